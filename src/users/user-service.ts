import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { AuditActor, AuditService } from '../audit/audit-service.js';
import type { Principal } from '../auth/auth-service.js';
import {
  assertCanReadCustomer,
  assertCanReadUser,
  assertCanWriteUser,
  assertTenantAdmin,
  isTenantAdmin,
} from '../auth/authorization.js';
import {
  type EntityId,
  entityId,
  NULL_UUID,
  type PageData,
  type PageQuery,
  pageData,
} from '../common/entity.js';
import { validate } from '../common/validate.js';
import type { Secrets } from '../config.js';
import type { CustomerService } from '../customers/customer-service.js';
import type { Db } from '../db/open.js';
import {
  AuthenticationError,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  ValidationError,
} from '../errors.js';
import type { EmailMessage } from '../rules/types.js';
import type { TenantService } from '../tenant/tenant-service.js';
import { generatePassword, hashPassword, verifyPassword } from './password.js';
import {
  type Authority,
  type TokenKind,
  type UserRow,
  type UserSort,
  UserStore,
} from './user-store.js';
import { hashToken, randomAlphanumeric } from './user-tokens.js';

export const INITIAL_ADMIN_FILE = 'initial-admin.txt';
const DEFAULT_ADMIN_EMAIL = 'admin@edge.local';

export interface User {
  readonly id: EntityId<'USER'>;
  readonly createdTime: number;
  readonly tenantId: EntityId<'TENANT'>;
  readonly customerId: EntityId<'CUSTOMER'>;
  readonly email: string;
  readonly name: string;
  readonly authority: Authority;
  readonly firstName: string | null;
  readonly lastName: string | null;
  readonly phone: string | null;
  readonly additionalInfo: Record<string, unknown>;
  readonly version: number;
}

/** Password policy: at least 8 characters; 256 at most so hashing stays cheap. */
export const MIN_PASSWORD_LENGTH = 8;
const MAX_PASSWORD_LENGTH = 256;
/** ThingsBoard's default activation/reset link lifetime (security settings): 24 h. */
export const USER_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;
/** The link lifetime in whole hours, as the mails say it. */
const HOURS = Math.round(USER_TOKEN_TTL_MS / 3_600_000);

/** A link for the administrator to hand over, and how long it stays valid. */
export interface UserLink {
  readonly value: string;
  readonly ttlMs: number;
}

const optionalText = z.string().max(255).nullish();

const userBody = z.object({
  id: z.object({ id: z.string().uuid() }).nullish(),
  email: z.string().trim().email().max(255),
  authority: z.enum(['TENANT_ADMIN', 'CUSTOMER_USER']),
  customerId: z.object({ id: z.string().uuid() }).nullish(),
  firstName: optionalText,
  lastName: optionalText,
  phone: optionalText,
  additionalInfo: z.record(z.string(), z.unknown()).nullish(),
  version: z.number().int().nullish(),
});

export interface UserServiceDeps {
  readonly db: Db;
  readonly tenants: TenantService;
  readonly secrets: Secrets;
  readonly dataDir: string;
  readonly log: Logger;
  readonly audit: AuditService;
  readonly customers: CustomerService;
  /**
   * Sends a mail through the system SMTP settings; undefined while none are configured (read at
   * each request: mail settings change at run time).
   */
  readonly mailer?: () => ((mail: EmailMessage) => Promise<void>) | undefined;
  /**
   * The configured address of the page (`--public-url`): the base of every link handed out or
   * mailed. Empty: the address the asking request came to (ThingsBoard without a fixed base URL),
   * which a client chooses through its Host header.
   */
  readonly publicUrl?: string;
}

export class UserService {
  readonly #store: UserStore;

  constructor(private readonly deps: UserServiceDeps) {
    this.#store = new UserStore(deps.db);
  }

  /** The base of a link: the configured public address, else the asking request's. */
  #base(requestOrigin: string): string {
    return this.deps.publicUrl ? this.deps.publicUrl.replace(/\/+$/, '') : requestOrigin;
  }

  /**
   * Creates the tenant administrator on first start: from EDGE_ADMIN_EMAIL/EDGE_ADMIN_PASSWORD,
   * or with a generated password that is logged once and written to a 0600 file.
   */
  async bootstrapAdmin(): Promise<void> {
    if (this.#store.countAdmins() > 0) return;
    const email = this.deps.secrets.adminEmail ?? DEFAULT_ADMIN_EMAIL;
    const generated = this.deps.secrets.adminPassword === undefined;
    const password = this.deps.secrets.adminPassword ?? generatePassword();
    this.#store.insert({
      id: randomUUID(),
      tenant_id: this.deps.tenants.id,
      customer_id: null,
      email,
      authority: 'TENANT_ADMIN',
      first_name: null,
      last_name: null,
      password_hash: await hashPassword(password),
      enabled: 1,
      additional_info: null,
      created_time: Date.now(),
    });
    if (generated) {
      const file = join(this.deps.dataDir, INITIAL_ADMIN_FILE);
      writeFileSync(file, `email: ${email}\npassword: ${password}\n`, { mode: 0o600 });
      // @NOTE: the one place a secret is logged, on purpose: the operator has no other way to
      // learn a generated password when the data directory is not readable to them.
      this.deps.log.warn(
        { email, initialPassword: password, file },
        'created tenant administrator with a generated password; change it after the first login',
      );
    } else {
      this.deps.log.info({ email }, 'created tenant administrator');
    }
  }

  /** Returns the user when email and password match an enabled account, else undefined. */
  async verifyCredentials(email: string, password: string): Promise<UserRow | undefined> {
    const row = this.#store.byEmail(email);
    if (!row?.password_hash) {
      // @NOTE: hash anyway so a missing account takes as long as a wrong password.
      await verifyPassword(password, DUMMY_HASH);
      return undefined;
    }
    return (await verifyPassword(password, row.password_hash)) ? row : undefined;
  }

  /** Users a notification goes to (enabled ones; at most 1,000). */
  recipients(f: {
    authority?: 'TENANT_ADMIN' | 'CUSTOMER_USER';
    customerId?: string;
    ids?: readonly string[];
  }): User[] {
    return this.#store.select(f, 1000).map((r) => this.toUser(r));
  }

  /** For audit records of failed logins: the account a username names, if any. */
  findIdByEmail(email: string): Pick<UserRow, 'id' | 'customer_id'> | undefined {
    const row = this.#store.byEmail(email);
    return row && { id: row.id, customer_id: row.customer_id };
  }

  row(id: string): UserRow | undefined {
    return this.#store.byId(id);
  }

  toUser(row: UserRow): User {
    return {
      id: entityId('USER', row.id),
      createdTime: row.created_time,
      tenantId: entityId('TENANT', row.tenant_id),
      customerId: entityId('CUSTOMER', row.customer_id ?? NULL_UUID),
      email: row.email,
      name: row.email,
      authority: row.authority,
      firstName: row.first_name,
      lastName: row.last_name,
      phone: row.phone ?? null,
      // `userCredentialsEnabled` is derived from the account state, as in ThingsBoard's user list.
      additionalInfo: {
        ...(row.additional_info === null ? {} : JSON.parse(row.additional_info)),
        userCredentialsEnabled: row.enabled === 1,
      },
      version: row.version ?? 1,
    };
  }

  /**
   * ThingsBoard's `POST /api/user`: creates (no `id`, tenant admin only) or updates a user. A new
   * user has no password and is disabled until it follows its activation link.
   */
  save(
    body: unknown,
    principal: Principal,
    opts: { sendActivationMail: boolean; baseUrl?: string },
  ): User {
    const input = validate(userBody, body, 'user');
    const customerId = input.customerId?.id.toLowerCase();
    const wantedCustomer = customerId && customerId !== NULL_UUID ? customerId : null;
    const { userCredentialsEnabled: _derived, ...info } = input.additionalInfo ?? {};
    const fields = {
      email: input.email,
      authority: input.authority,
      customer_id: wantedCustomer,
      first_name: input.firstName ?? null,
      last_name: input.lastName ?? null,
      phone: input.phone ?? null,
      additional_info: Object.keys(info).length ? JSON.stringify(info) : null,
    };
    const actor = actorOf(principal);
    const sameEmail = this.#store.byEmail(input.email);

    if (input.id) {
      const id = input.id.id.toLowerCase();
      const existing = this.#row(id);
      assertCanWriteUser(principal, refOf(existing));
      // @NOTE: authority and customer are fixed at creation: moving a user between customers or
      // roles would silently change what it may see.
      if (fields.authority !== existing.authority || fields.customer_id !== existing.customer_id) {
        if (!isTenantAdmin(principal)) throw new ForbiddenError();
        throw new ValidationError("A user's authority and customer cannot be changed");
      }
      if (input.version != null && input.version !== (existing.version ?? 1)) {
        throw new ConflictError(
          `User was updated by another request (version ${existing.version}, got ${input.version})`,
        );
      }
      if (sameEmail && sameEmail.id !== id) throw duplicateEmail(input.email);
      this.#store.update({ id, ...fields });
      const user = this.toUser(this.#row(id));
      this.#audit('UPDATED', user, actor);
      return user;
    }

    assertTenantAdmin(principal);
    if (fields.authority === 'CUSTOMER_USER') {
      if (!wantedCustomer) throw new ValidationError('A customer user needs a customerId');
      if (!this.deps.customers.exists(wantedCustomer))
        throw new ValidationError(`Customer with id [${wantedCustomer}] is not found`);
    } else if (wantedCustomer) {
      throw new ValidationError('A tenant administrator cannot belong to a customer');
    }
    if (sameEmail) throw duplicateEmail(input.email);
    const id = randomUUID();
    this.#store.insert({
      id,
      tenant_id: this.deps.tenants.id,
      ...fields,
      password_hash: null,
      enabled: 0,
      created_time: Date.now(),
    });
    const user = this.toUser(this.#row(id));
    this.#audit('ADDED', user, actor);
    if (opts.sendActivationMail) this.#mailActivation(id, input.email, opts.baseUrl ?? '');
    return user;
  }

  get(id: string, principal: Principal): User {
    const row = this.#row(id);
    assertCanReadUser(principal, refOf(row));
    return this.toUser(row);
  }

  delete(id: string, principal: Principal): void {
    assertTenantAdmin(principal);
    const row = this.#row(id);
    if (row.id === principal.userId) throw new ValidationError('You cannot delete yourself');
    this.#store.delete(id);
    this.deps.audit.record({
      actionType: 'DELETED',
      entityId: entityId('USER', id),
      entityName: row.email,
      user: actorOf(principal),
    });
  }

  /** Users the caller may see: all for the tenant admin, its own customer's for a customer user. */
  list(q: PageQuery<UserSort>, principal: Principal): PageData<User> {
    if (isTenantAdmin(principal)) return this.#page(q, {});
    if (!principal.customerId) throw new ForbiddenError();
    return this.#page(q, { customerId: principal.customerId });
  }

  listByCustomer(customerId: string, q: PageQuery<UserSort>, principal: Principal): PageData<User> {
    assertCanReadCustomer(principal, customerId);
    if (!this.deps.customers.exists(customerId))
      throw new NotFoundError(`Customer with id [${customerId}] is not found`);
    return this.#page(q, { customerId });
  }

  /**
   * The users `keep` accepts, searched and sorted as `list`, paged after the filter. It reads the
   * whole user table in steps: one gateway's staff, a few hundred users at most.
   */
  pageWhere(q: PageQuery<UserSort>, keep: (row: UserRow) => boolean): PageData<User> {
    const step = 500;
    const kept: UserRow[] = [];
    for (let page = 0; ; page++) {
      const { rows } = this.#store.page({ ...q, pageSize: step, page }, {});
      kept.push(...rows.filter(keep));
      if (rows.length < step) break;
    }
    const from = q.page * q.pageSize;
    return pageData(
      kept.slice(from, from + q.pageSize).map((r) => this.toUser(r)),
      kept.length,
      q,
    );
  }

  /** Enables or disables login (ThingsBoard's `userCredentialsEnabled`). */
  setCredentialsEnabled(id: string, enabled: boolean, principal: Principal): void {
    assertTenantAdmin(principal);
    const row = this.#row(id);
    if (!enabled && row.id === principal.userId)
      throw new ValidationError('You cannot disable yourself');
    this.#store.setEnabled(id, enabled);
    this.deps.audit.record({
      actionType: 'CREDENTIALS_UPDATED',
      entityId: entityId('USER', id),
      entityName: row.email,
      user: actorOf(principal),
      actionData: { userCredentialsEnabled: enabled },
    });
  }

  /**
   * Issues a fresh activation link. Tokens are stored hashed, so an earlier link cannot be shown
   * again: each call replaces the user's previous activation token.
   */
  activationLink(id: string, principal: Principal, baseUrl: string): UserLink {
    assertTenantAdmin(principal);
    const row = this.#row(id);
    if (row.password_hash) throw new ValidationError('User is already activated!');
    const token = this.#issueToken(row.id, 'ACTIVATE');
    return {
      value: `${this.#base(baseUrl)}/api/noauth/activate?activateToken=${token}`,
      ttlMs: USER_TOKEN_TTL_MS,
    };
  }

  /** Issues a fresh password reset link for the administrator to hand over (no mail yet). */
  passwordResetLink(id: string, principal: Principal, baseUrl: string): UserLink {
    assertTenantAdmin(principal);
    const row = this.#row(id);
    if (!row.password_hash)
      throw new ValidationError('User is not activated yet: use the activation link');
    if (!row.enabled) throw new ValidationError('Unable to reset password for inactive user');
    const token = this.#issueToken(row.id, 'RESET');
    return {
      value: `${this.#base(baseUrl)}/api/noauth/resetPassword?resetToken=${token}`,
      ttlMs: USER_TOKEN_TTL_MS,
    };
  }

  /**
   * `POST /api/noauth/resetPasswordByEmail`: never tells whether the email exists (the caller
   * answers 200 at once; the mail goes out after). With the system SMTP settings configured, an
   * enabled, activated user gets a mail with a reset link on `baseUrl` (ThingsBoard's
   * `/api/noauth/resetPassword?resetToken=`). Without them nobody could receive a token, so none
   * is issued (issuing one would also cancel a reset link the administrator already handed out);
   * the request is logged with the user id so the administrator can hand over a link from
   * `passwordResetLink`.
   */
  requestPasswordReset(email: unknown, baseUrl: string): void {
    if (typeof email !== 'string') return;
    const row = this.#store.byEmail(email);
    if (!row?.password_hash || !row.enabled) return;
    const send = this.deps.mailer?.();
    if (!send) {
      this.deps.log.info(
        { userId: row.id },
        'password reset requested; no mail sent (email is not configured)',
      );
      return;
    }
    const link = `${this.#base(baseUrl)}/api/noauth/resetPassword?resetToken=${this.#issueToken(row.id, 'RESET')}`;
    this.#sendLink(send, row.id, 'password reset', {
      to: row.email,
      subject: 'Password reset',
      body:
        `A password reset was requested for ${row.email} on the edge gateway.\n\n` +
        `Open this link to set a new password (valid for ${HOURS} hours, once):\n${link}\n\n` +
        'If you did not ask for it, ignore this mail: your password stays as it is.\n',
    });
  }

  /**
   * `POST /api/user?sendActivationMail=true` (the default): with the system SMTP settings, the new
   * user gets a mail with the activation link. Without them the user is kept and the
   * administrator hands over `GET /api/user/{id}/activationLink`.
   * @NOTE: ThingsBoard deletes the user and answers 500 when the mail cannot be sent; the mail
   * goes out after the answer here, so a failed one is logged and the user kept.
   */
  #mailActivation(id: string, email: string, baseUrl: string): void {
    const send = this.deps.mailer?.();
    if (!send) {
      this.deps.log.info(
        { userId: id },
        'no activation mail sent: email is not configured; use GET /api/user/{id}/activationLink',
      );
      return;
    }
    const link = `${this.#base(baseUrl)}/api/noauth/activate?activateToken=${this.#issueToken(id, 'ACTIVATE')}`;
    this.#sendLink(send, id, 'activation', {
      to: email,
      subject: 'Your account on the edge gateway',
      body:
        `An account was created for ${email} on the edge gateway.\n\n` +
        `Open this link to choose your password (valid for ${HOURS} hours, once):\n${link}\n`,
    });
  }

  #sendLink(
    send: (mail: EmailMessage) => Promise<void>,
    userId: string,
    what: string,
    mail: EmailMessage,
  ): void {
    send(mail).then(
      () => this.deps.log.info({ userId }, `${what} mail sent`),
      (err: unknown) => this.deps.log.warn({ err, userId }, `${what} mail failed`),
    );
  }

  /** Whether an activation or reset token may still be used (for the GET redirect). */
  tokenState(token: unknown, kind: TokenKind): 'valid' | 'expired' | 'unknown' {
    if (typeof token !== 'string' || !token) return 'unknown';
    const row = this.#store.tokenByHash(hashToken(token), kind);
    if (!row) return 'unknown';
    return row.expires_at <= Date.now() ? 'expired' : 'valid';
  }

  /** Sets the first password with an activation token and enables the account. */
  async activate(token: unknown, password: unknown): Promise<UserRow> {
    const row = await this.#setPasswordWithToken(token, password, 'ACTIVATE');
    this.deps.audit.record({
      actionType: 'ACTIVATED',
      entityId: entityId('USER', row.id),
      entityName: row.email,
      user: actorOfRow(row),
    });
    return row;
  }

  /** Sets a new password with a reset token. */
  async resetPassword(token: unknown, password: unknown): Promise<UserRow> {
    const row = await this.#setPasswordWithToken(token, password, 'RESET');
    this.deps.audit.record({
      actionType: 'CREDENTIALS_UPDATED',
      entityId: entityId('USER', row.id),
      entityName: row.email,
      user: actorOfRow(row),
      actionData: { passwordReset: true },
    });
    return row;
  }

  async #setPasswordWithToken(token: unknown, password: unknown, kind: TokenKind) {
    const what = kind === 'ACTIVATE' ? 'activation' : 'password reset';
    if (typeof token !== 'string' || !token) throw new ValidationError(`${what} token is required`);
    const pw = checkPassword(password);
    const hash = hashToken(token);
    const found = this.#store.tokenByHash(hash, kind);
    if (!found) throw new ValidationError(`Invalid or already used ${what} token`);
    if (found.expires_at <= Date.now()) {
      this.#store.deleteToken(hash);
      throw new ValidationError(`The ${what} link has expired`);
    }
    const row = this.#row(found.user_id);
    if (kind === 'RESET' && !row.enabled)
      throw new AuthenticationError('User account is not active');
    const passwordHash = await hashPassword(pw);
    // @NOTE: re-checked after the (slow) hashing, so two requests cannot both use one token.
    const used = this.deps.db.transaction(() => {
      if (!this.#store.tokenByHash(hash, kind)) return false;
      this.#store.setPasswordAndEnable(row.id, passwordHash);
      return true;
    })();
    if (!used) throw new ValidationError(`Invalid or already used ${what} token`);
    return this.#row(row.id);
  }

  #issueToken(userId: string, kind: TokenKind): string {
    const token = randomAlphanumeric(30);
    const now = Date.now();
    this.#store.putToken({
      token_hash: hashToken(token),
      user_id: userId,
      kind,
      expires_at: now + USER_TOKEN_TTL_MS,
      created_time: now,
    });
    return token;
  }

  #page(q: PageQuery<UserSort>, filter: { customerId?: string }): PageData<User> {
    const { rows, total } = this.#store.page(q, filter);
    return pageData(
      rows.map((r) => this.toUser(r)),
      total,
      q,
    );
  }

  #row(id: string): UserRow {
    const row = this.#store.byId(id);
    if (!row) throw new NotFoundError(`User with id [${id}] is not found`);
    return row;
  }

  #audit(actionType: 'ADDED' | 'UPDATED', user: User, actor: AuditActor): void {
    this.deps.audit.record({ actionType, entityId: user.id, entityName: user.email, user: actor });
  }
}

function checkPassword(password: unknown): string {
  if (typeof password !== 'string') throw new ValidationError('password is required');
  if (password.length < MIN_PASSWORD_LENGTH)
    throw new ValidationError(`Password must be at least ${MIN_PASSWORD_LENGTH} characters long`);
  if (password.length > MAX_PASSWORD_LENGTH)
    throw new ValidationError(`Password must be at most ${MAX_PASSWORD_LENGTH} characters long`);
  return password;
}

function duplicateEmail(email: string): ValidationError {
  return new ValidationError(`User with email '${email}' already present in database!`);
}

function refOf(row: UserRow) {
  return { id: row.id, customerId: row.customer_id };
}

/** The audit actor for a request's caller. */
export function actorOf(p: Principal): AuditActor {
  return { id: p.userId, name: p.email, customerId: p.customerId };
}

export function actorOfRow(row: UserRow): AuditActor {
  return { id: row.id, name: row.email, customerId: row.customer_id };
}

const DUMMY_HASH =
  'scrypt$32768$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';
