/**
 * Where better-sqlite3's native addon comes from. By default (the node bundle, tsx) better-sqlite3
 * finds it in node_modules. The single executable carries it, writes it to its cache folder at
 * start (src/sea.ts) and passes it in here.
 */
export interface SqliteAddon {
  /** The addon's exports, loaded with `process.dlopen` (better-sqlite3's `nativeBinding`). */
  readonly binding: object;
  /** The addon file, for worker threads: each loads it again. */
  readonly bindingFile: string;
  /** better-sqlite3's JavaScript as one CommonJS file, for worker threads. */
  readonly moduleFile: string;
}

/** Loads a native addon file and returns its exports. */
export function loadAddon(file: string): object {
  const module = { exports: {} };
  process.dlopen(module, file);
  return module.exports;
}
