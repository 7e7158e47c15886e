/**
 * The `admin_settings` table (ThingsBoard's `AdminSettings`: one JSON value per key). It is
 * the only module with SQL on that table; the settings that live there (mail and SMS, retention,
 * upstream, one-time markers) validate their own values and keep them through this store.
 */
import type { Db } from '../db/open.js';

export class AdminSettingsStore {
  readonly #get;
  readonly #put;
  readonly #putIfAbsent;
  readonly #delete;

  constructor(db: Db) {
    this.#get = db.prepare<[string], { json_value: string }>(
      'SELECT json_value FROM admin_settings WHERE key = ?',
    );
    this.#put = db.prepare<[string, string, number]>(
      `INSERT INTO admin_settings (key, json_value, updated) VALUES (?, ?, ?)
       ON CONFLICT(key) DO UPDATE SET json_value = excluded.json_value, updated = excluded.updated`,
    );
    this.#putIfAbsent = db.prepare<[string, string, number]>(
      'INSERT OR IGNORE INTO admin_settings (key, json_value, updated) VALUES (?, ?, ?)',
    );
    this.#delete = db.prepare<[string]>('DELETE FROM admin_settings WHERE key = ?');
  }

  /** The stored value (parsed JSON), or undefined when the key was never saved. */
  get(key: string): unknown {
    const row = this.#get.get(key);
    return row ? JSON.parse(row.json_value) : undefined;
  }

  has(key: string): boolean {
    return this.#get.get(key) !== undefined;
  }

  put(key: string, value: unknown, now = Date.now()): void {
    this.#put.run(key, JSON.stringify(value), now);
  }

  /** Stores `value` unless the key is already there (one-time markers). */
  putIfAbsent(key: string, value: unknown, now = Date.now()): void {
    this.#putIfAbsent.run(key, JSON.stringify(value), now);
  }

  delete(key: string): void {
    this.#delete.run(key);
  }
}
