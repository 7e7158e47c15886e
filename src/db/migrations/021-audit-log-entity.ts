import type { Migration } from '../migrator.js';

/**
 * `GET /api/audit/logs/entity/{entityType}/{entityId}` (the device page's audit tab) reads one
 * entity's entries newest first; this index finds them without scanning the whole log (up to
 * 100 000 rows). The customer and user variants scan: they are rarer and the log is bounded.
 */
export const m021AuditLogEntity: Migration = {
  version: 21,
  name: 'audit-log-entity',
  up(db) {
    db.exec('CREATE INDEX audit_log_entity ON audit_log(entity_id, created_time);');
  },
};
