import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { it } from 'node:test';
import { pino } from 'pino';
import { migrate } from '../migrator.js';
import { openDb } from '../open.js';
import { MIGRATIONS } from './index.js';

const log = pino({ level: 'silent' });

it('migration 020 keeps every customer and tenant attribute and lets users have theirs', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'edge-m020-'));
  const db = openDb({ dataDir: dir, durability: 'normal' });
  try {
    migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 20),
      log,
    );
    const rows = `SELECT entity_type, entity_id, scope, key, type, value, last_update_ts
                  FROM owner_attribute_kv ORDER BY entity_type, key`;
    db.exec(`
      INSERT INTO owner_attribute_kv VALUES
        ('TENANT', 't1', 'SERVER_SCOPE', 'limit', 'DOUBLE', 21.5, 1000),
        ('CUSTOMER', 'c1', 'SHARED_SCOPE', 'on', 'BOOLEAN', 1, 2000),
        ('CUSTOMER', 'c1', 'SERVER_SCOPE', 'cfg', 'JSON', '{"a":1}', 3000);
    `);
    const before = db.prepare(rows).all();
    assert.throws(() =>
      db.exec(
        `INSERT INTO owner_attribute_kv VALUES ('USER', 'u1', 'SERVER_SCOPE', 'k', 'LONG', 1, 1)`,
      ),
    );
    migrate(db, MIGRATIONS, log);
    assert.deepEqual(db.prepare(rows).all(), before);
    db.exec(
      `INSERT INTO owner_attribute_kv VALUES ('USER', 'u1', 'SERVER_SCOPE', 'k', 'LONG', 1, 1)`,
    );
    assert.throws(() =>
      db.exec(
        `INSERT INTO owner_attribute_kv VALUES ('DEVICE', 'd1', 'SERVER_SCOPE', 'k', 'LONG', 1, 1)`,
      ),
    );
  } finally {
    db.close();
    await rm(dir, { recursive: true, force: true });
  }
});
