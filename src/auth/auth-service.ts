import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { Logger } from 'pino';
import type { AuditService } from '../audit/audit-service.js';
import { entityId } from '../common/entity.js';
import type { Config } from '../config.js';
import {
  AuthenticationError,
  TokenExpiredError,
  TooManyRequestsError,
  ValidationError,
} from '../errors.js';
import type { UserService } from '../users/user-service.js';
import type { Authority, UserRow } from '../users/user-store.js';
import { LoginThrottle } from './login-throttle.js';

export const JWT_SECRET_FILE = 'jwt-secret';
const ISSUER = 'edge-gateway';
const REFRESH_SCOPE = 'REFRESH_TOKEN';

export interface JwtPair {
  readonly token: string;
  readonly refreshToken: string;
}

/** Who is calling: what every authorization decision is made from. */
export interface Principal {
  readonly userId: string;
  readonly email: string;
  readonly authority: Authority;
  readonly tenantId: string;
  readonly customerId: string | null;
}

export interface AuthServiceDeps {
  readonly config: Config;
  readonly users: UserService;
  readonly log: Logger;
  readonly audit: AuditService;
}

export class AuthService {
  /** Failed logins per account and address: one user's typos lock out only that user there. */
  readonly #throttle: LoginThrottle;
  /** Failed logins per address over every account (password spraying), at a higher bound. */
  readonly #addressThrottle: LoginThrottle;
  /** Failed and throttled logins since start (metrics). */
  #failures = 0;
  #throttled = 0;
  #key: Uint8Array | undefined;
  /** The secret imported once as an HMAC key: jose would import raw bytes on every call. */
  #cryptoKey: Promise<CryptoKey> | undefined;

  constructor(private readonly deps: AuthServiceDeps) {
    const a = deps.config.auth;
    this.#throttle = new LoginThrottle({
      maxFailures: a.loginMaxFailures,
      windowMs: a.loginFailureWindowSec * 1000,
      lockoutMs: a.loginLockoutSec * 1000,
    });
    this.#addressThrottle = new LoginThrottle({
      maxFailures: a.loginMaxFailuresPerAddress,
      windowMs: a.loginFailureWindowSec * 1000,
      lockoutMs: a.loginLockoutSec * 1000,
    });
  }

  /** Loads the signing secret, generating it on first start (kept in the data directory, 0600). */
  init(): void {
    const file = join(this.deps.config.dataDir, JWT_SECRET_FILE);
    if (!existsSync(file)) {
      writeFileSync(file, randomBytes(64).toString('base64'), { mode: 0o600, flag: 'wx' });
      this.deps.log.info({ file }, 'generated JWT signing secret');
    }
    this.#key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (this.#key.length < 32) throw new Error(`JWT secret in ${file} is too short`);
  }

  #secret(): Promise<CryptoKey> {
    if (!this.#key) throw new Error('AuthService.init() has not run');
    this.#cryptoKey ??= crypto.subtle.importKey(
      'raw',
      new Uint8Array(this.#key),
      { name: 'HMAC', hash: 'SHA-512' },
      false,
      ['sign', 'verify'],
    );
    return this.#cryptoKey;
  }

  /**
   * Failed and throttled logins since start, and the two throttle tables: entries tracked now
   * and dropped at their bound.
   */
  get loginCounts(): {
    failures: number;
    throttled: number;
    accounts: { entries: number; dropped: number };
    addresses: { entries: number; dropped: number };
  } {
    return {
      failures: this.#failures,
      throttled: this.#throttled,
      accounts: this.#throttle.counts,
      addresses: this.#addressThrottle.counts,
    };
  }

  async login(username: unknown, password: unknown, address: string): Promise<JwtPair> {
    // Account names are case-insensitive e-mails; a non-string is counted under ''.
    const pair = `${address}|${typeof username === 'string' ? username.toLowerCase() : ''}`;
    const retry = Math.max(
      this.#throttle.retryAfterSec(pair),
      this.#addressThrottle.retryAfterSec(address),
    );
    if (retry > 0) {
      this.#throttled++;
      this.deps.log.warn({ address, username }, 'login throttled');
      this.#auditLogin(
        typeof username === 'string' ? username : '',
        undefined,
        'Too many failed login attempts',
      );
      throw new TooManyRequestsError('Too many failed login attempts; try again later', retry);
    }
    if (typeof username !== 'string' || typeof password !== 'string' || !username || !password) {
      throw new ValidationError('username and password are required strings');
    }
    const row = await this.deps.users.verifyCredentials(username, password);
    if (!row) {
      this.#failures++;
      this.#throttle.recordFailure(pair);
      this.#addressThrottle.recordFailure(address);
      this.deps.log.info({ address, username }, 'login failed');
      this.#auditLogin(
        username,
        this.deps.users.findIdByEmail(username),
        'Invalid username or password',
      );
      throw new AuthenticationError('Invalid username or password');
    }
    if (!row.enabled) {
      this.#failures++;
      this.#throttle.recordFailure(pair);
      this.#addressThrottle.recordFailure(address);
      this.#auditLogin(username, row, 'User account is not active');
      throw new AuthenticationError('User account is not active');
    }
    this.#throttle.recordSuccess(pair);
    this.deps.log.info({ userId: row.id }, 'login');
    this.#auditLogin(username, row);
    return this.issue(row);
  }

  /** JWTs are stateless: logout is only recorded (ThingsBoard does the same). */
  logout(principal: Principal): void {
    this.deps.audit.record({
      actionType: 'LOGOUT',
      entityId: entityId('USER', principal.userId),
      entityName: principal.email,
      user: { id: principal.userId, name: principal.email, customerId: principal.customerId },
    });
  }

  /** A LOGIN audit record; `failure` set means it failed. Never the password. */
  #auditLogin(
    username: string,
    row: Pick<UserRow, 'id' | 'customer_id'> | undefined,
    failure?: string,
  ): void {
    // A username is whatever the client sent: keep a bounded prefix.
    const name = username.slice(0, 255);
    this.deps.audit.record({
      actionType: 'LOGIN',
      entityId: row ? entityId('USER', row.id) : null,
      entityName: name,
      user: { id: row?.id ?? null, name, customerId: row?.customer_id ?? null },
      status: failure ? 'FAILURE' : 'SUCCESS',
      failureDetails: failure ?? null,
    });
  }

  async refresh(refreshToken: unknown): Promise<JwtPair> {
    if (typeof refreshToken !== 'string' || !refreshToken) {
      throw new ValidationError('refreshToken is required');
    }
    const payload = await this.#verify(refreshToken);
    if (!(payload.scopes as unknown[] | undefined)?.includes(REFRESH_SCOPE)) {
      throw new AuthenticationError('Invalid refresh token');
    }
    const row = this.deps.users.row(String(payload.userId));
    if (!row?.enabled) throw new AuthenticationError('User account is not active');
    return this.issue(row);
  }

  /** Verifies an access token and returns the caller. The account must still exist and be enabled. */
  async authenticate(token: string): Promise<Principal> {
    return (await this.authenticateSession(token)).principal;
  }

  /** As `authenticate`, with the token's expiry (epoch ms) for sessions that outlive a request. */
  async authenticateSession(token: string): Promise<{ principal: Principal; expiresAt: number }> {
    const payload = await this.#verify(token);
    const scopes = payload.scopes as unknown[] | undefined;
    if (!scopes || scopes.includes(REFRESH_SCOPE))
      throw new AuthenticationError('Invalid JWT token');
    const row = this.deps.users.row(String(payload.userId));
    if (!row?.enabled) throw new AuthenticationError('User account is not active');
    return { principal: principalOf(row), expiresAt: (payload.exp ?? 0) * 1000 };
  }

  async issue(row: UserRow): Promise<JwtPair> {
    const a = this.deps.config.auth;
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      userId: row.id,
      scopes: [row.authority],
      firstName: row.first_name,
      lastName: row.last_name,
      enabled: row.enabled === 1,
      isPublic: false,
      tenantId: row.tenant_id,
      ...(row.customer_id ? { customerId: row.customer_id } : {}),
    };
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS512' })
      .setSubject(row.email)
      .setIssuer(ISSUER)
      .setIssuedAt(now)
      .setExpirationTime(now + a.accessTokenTtlSec)
      .sign(await this.#secret());
    const refreshToken = await new SignJWT({
      userId: row.id,
      scopes: [REFRESH_SCOPE],
      isPublic: false,
    })
      .setProtectedHeader({ alg: 'HS512' })
      .setSubject(row.email)
      .setIssuer(ISSUER)
      .setJti(randomUUID())
      .setIssuedAt(now)
      .setExpirationTime(now + a.refreshTokenTtlSec)
      .sign(await this.#secret());
    return { token, refreshToken };
  }

  async #verify(token: string) {
    try {
      const { payload } = await jwtVerify(token, await this.#secret(), {
        issuer: ISSUER,
        algorithms: ['HS512'],
      });
      return payload;
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired)
        throw new TokenExpiredError('Token has expired', { cause: err });
      throw new AuthenticationError('Invalid JWT token', { cause: err });
    }
  }
}

export function principalOf(row: UserRow): Principal {
  return {
    userId: row.id,
    email: row.email,
    authority: row.authority,
    tenantId: row.tenant_id,
    customerId: row.customer_id,
  };
}
