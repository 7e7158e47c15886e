import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MIGRATIONS } from '../db/migrations/index.js';
import { migrate } from '../db/migrator.js';
import { type Db, openDb } from '../db/open.js';
import { ValidationError } from '../errors.js';
import { createLoggers } from '../logger.js';
import { TenantService } from '../tenant/tenant-service.js';
import { AuditService } from './audit-service.js';

describe('AuditService', () => {
  let dir: string;
  let db: Db;
  let tenants: TenantService;
  const log = createLoggers('silent').auth;
  const page = { pageSize: 10_000, page: 0, sortOrder: 'ASC' as const };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'edge-gw-audit-'));
    db = openDb({ dataDir: dir, durability: 'normal' });
    migrate(db, MIGRATIONS, log);
    tenants = new TenantService({ db });
    tenants.init();
  });
  after(async () => {
    db.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps only the newest maxRows records, pruning every 1000 inserts', () => {
    const audit = new AuditService({ db, tenants, log, maxRows: 500 });
    for (let i = 0; i < 999; i++) audit.record({ actionType: 'LOGIN', entityName: `u${i}` });
    assert.equal(audit.list(page, {}).totalElements, 999, 'no pruning before 1000 inserts');
    audit.record({ actionType: 'LOGIN', entityName: 'u999' });
    const kept = audit.list(page, {});
    assert.equal(kept.totalElements, 500);
    assert.equal(kept.data[0].entityName, 'u500');
    assert.equal(kept.data.at(-1)?.entityName, 'u999');
  });

  it('does not throw into the audited operation when writing fails', () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = createLoggers('error', { write: (l: string) => void lines.push(JSON.parse(l)) });
    const audit = new AuditService({ db, tenants, log: sink.auth });
    // A status the CHECK constraint refuses makes the insert fail.
    audit.record({ actionType: 'LOGIN', status: 'MAYBE' as 'SUCCESS' });
    assert.equal(lines.length, 1);
    assert.equal(lines[0].msg, 'audit record failed');
  });

  it('refuses unknown action types in a filter', () => {
    const audit = new AuditService({ db, tenants, log });
    assert.throws(() => audit.list(page, { actionTypes: ['NOPE'] }), ValidationError);
  });
});
