/**
 * Fault drill (issue 20): a statement fails with SQLITE_BUSY (another process holds the write
 * lock past the busy timeout) or an I/O error. The request gets an error answer; the process
 * stays up and writes again once the cause is gone.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { DB_FILE } from '../src/db/open.js';
import { fromStorageError, StorageFullError, UnavailableError } from '../src/errors.js';
import { coapRequest } from './helpers/coap.js';
import { createDevice, startGateway, type TestGateway } from './helpers/gateway.js';

describe('fault drill: SQLite errors from a failing statement', () => {
  let t: TestGateway;
  let dev: { id: string; token: string };

  before(async () => {
    t = await startGateway();
    dev = await createDevice(t, 'busy-dev');
  });
  after(() => t.close());

  it('SQLITE_BUSY: writes answered 503 / CoAP 5.03, no crash, writes resume after the lock', async () => {
    const other = new Database(join(t.dataDir, DB_FILE));
    try {
      other.exec('BEGIN EXCLUSIVE');
      const telemetry = await t.api(`/api/v1/${dev.token}/telemetry`, { body: { busy: 1 } });
      assert.equal(telemetry.status, 503);
      assert.match(((await telemetry.json()) as { message: string }).message, /Storage is busy/);
      const attrs = await t.api(`/api/v1/${dev.token}/attributes`, { body: { busy: 1 } });
      assert.equal(attrs.status, 503);
      const coap = await coapRequest(
        {
          port: t.gw.ports.coap,
          method: 'POST',
          pathname: `/api/v1/${dev.token}/attributes`,
          payload: '{"busy":2}',
        },
        15_000,
      );
      assert.equal(coap.code, '5.03');
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    assert.equal(t.gw.state, 'ready');
    const ok = await t.api(`/api/v1/${dev.token}/telemetry`, { body: { busy: 3 } });
    assert.equal(ok.status, 200);
    assert.equal((await t.api(`/api/v1/${dev.token}/attributes`, { body: { b: 1 } })).status, 200);
  });

  it('SQLite result codes become domain errors: full -> 507, busy and I/O errors -> 503', () => {
    const err = (code: string) => new Database.SqliteError(`${code} from a statement`, code);
    assert.ok(fromStorageError(err('SQLITE_FULL')) instanceof StorageFullError);
    for (const code of [
      'SQLITE_BUSY',
      'SQLITE_BUSY_SNAPSHOT',
      'SQLITE_LOCKED',
      'SQLITE_IOERR',
      'SQLITE_IOERR_WRITE',
    ]) {
      const mapped = fromStorageError(err(code));
      assert.ok(mapped instanceof UnavailableError, code);
      assert.equal((mapped as Error).cause instanceof Database.SqliteError, true);
    }
    const other = new Error('not from storage');
    assert.equal(fromStorageError(other), other);
  });
});
