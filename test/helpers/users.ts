import type { TestGateway } from './gateway.js';

export interface Ref {
  readonly id: string;
}

async function ok<T>(res: Response, what: string): Promise<T> {
  if (res.status !== 200) throw new Error(`${what} failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** The tenant id of the signed-in user behind `token` (GET /api/auth/user). */
export async function tenantIdOf(t: TestGateway, token: string): Promise<string> {
  const res = await t.api('/api/auth/user', { token });
  return (await ok<{ tenantId: Ref }>(res, 'read the signed-in user')).tenantId.id;
}

/** Creates a customer as the tenant administrator and returns its id. */
export async function createCustomer(t: TestGateway, title: string): Promise<string> {
  const res = await t.api('/api/customer', { body: { title }, token: await t.adminToken() });
  return (await ok<{ id: Ref }>(res, 'create customer')).id.id;
}

/** Creates a user (customer user when `customerId` is given) without mail; returns its id. */
export async function createUser(
  t: TestGateway,
  email: string,
  customerId?: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const body = customerId
    ? { email, authority: 'CUSTOMER_USER', customerId: { entityType: 'CUSTOMER', id: customerId } }
    : { email, authority: 'TENANT_ADMIN' };
  const res = await t.api('/api/user?sendActivationMail=false', {
    body: { ...body, ...extra },
    token: await t.adminToken(),
  });
  return (await ok<{ id: Ref }>(res, 'create user')).id.id;
}

/** The activation token from a fresh activation link. */
export async function activationToken(t: TestGateway, userId: string): Promise<string> {
  const res = await t.api(`/api/user/${userId}/activationLink`, { token: await t.adminToken() });
  if (res.status !== 200) throw new Error(`activation link: ${res.status} ${await res.text()}`);
  const link = new URL(await res.text());
  return link.searchParams.get('activateToken') ?? '';
}

/** Activates a user with `password` and returns its access token. */
export async function activateUser(
  t: TestGateway,
  userId: string,
  password: string,
): Promise<string> {
  const activateToken = await activationToken(t, userId);
  const res = await t.api('/api/noauth/activate', { body: { activateToken, password } });
  return (await ok<{ token: string }>(res, 'activate')).token;
}
