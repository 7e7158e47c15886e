import { randomUUID } from 'node:crypto';
import { hashPassword } from '../../src/users/password.js';
import type { TestGateway } from './gateway.js';

/**
 * Inserts a customer row straight into the gateway's database. Tests of other domains use it so
 * that they do not depend on the customer REST API.
 */
export function insertCustomer(t: TestGateway, title: string): string {
  const id = randomUUID();
  t.gw.db
    .prepare('INSERT INTO customer (id, tenant_id, title, created_time) VALUES (?, ?, ?, ?)')
    .run(id, t.gw.services.tenants.id, title, Date.now());
  return id;
}

/** Inserts an activated CUSTOMER_USER of `customerId`, logs it in and returns its access token. */
export async function customerUserToken(
  t: TestGateway,
  customerId: string,
  email: string,
): Promise<string> {
  const password = 'customer-password-1';
  t.gw.db
    .prepare(
      `INSERT INTO user (id, tenant_id, customer_id, email, authority, password_hash, enabled,
         created_time)
       VALUES (?, ?, ?, ?, 'CUSTOMER_USER', ?, 1, ?)`,
    )
    .run(
      randomUUID(),
      t.gw.services.tenants.id,
      customerId,
      email,
      await hashPassword(password),
      Date.now(),
    );
  const res = await t.api('/api/auth/login', { body: { username: email, password } });
  if (res.status !== 200)
    throw new Error(`customer login failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}
