/**
 * The part of a commit that another service takes (the upstream outbox, the alarm engine):
 * `write` runs inside the commit's transaction, `settled` after it (committed or rolled back).
 */
export interface CommitHook<T> {
  write(items: readonly T[]): void;
  settled(ok: boolean): void;
}

/** A hook that forwards to one made later (the service is built after the services it hooks). */
export function laterHook<T>(get: () => CommitHook<T> | undefined): CommitHook<T> {
  return {
    write: (items) => get()?.write(items),
    settled: (ok) => get()?.settled(ok),
  };
}

/** Several hooks as one, in order (each `write` inside the same transaction). */
export function joinHooks<T>(...all: ReadonlyArray<CommitHook<T> | undefined>): CommitHook<T> {
  const list = all.filter((h): h is CommitHook<T> => h !== undefined);
  return {
    write: (items) => {
      for (const h of list) h.write(items);
    },
    settled: (ok) => {
      for (const h of list) h.settled(ok);
    },
  };
}
