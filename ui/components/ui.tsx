import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, errorText } from '../lib/api.js';

/** Small shared pieces of the pages: data loading, dialogs, messages, paging, copy. */

/** Runs `load` on mount and whenever `deps` change; `reload` runs it again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState('');
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let current = true;
    load()
      .then((d) => {
        if (!current) return;
        setData(d);
        setError('');
      })
      .catch((err: unknown) => current && setError(errorText(err)));
    return () => {
      current = false;
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, reload };
}

/**
 * GETs `path` now and again `everyMs` after each answer, while mounted (a page's live status);
 * keeps the last data, and the error of the last attempt.
 */
export function usePoll<T>(path: string, everyMs: number): { data: T | undefined; error: string } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState('');
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      try {
        const d = await api<T>(path);
        if (stopped) return;
        setData(d);
        setError('');
      } catch (err) {
        if (!stopped) setError(errorText(err));
      }
      if (!stopped) timer = setTimeout(() => void poll(), everyMs);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [path, everyMs]);
  return { data, error };
}

/** Runs an action, keeping its error to show; returns whether it succeeded. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const run = useCallback(async (fn: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true);
    setError('');
    try {
      await fn();
      return true;
    } catch (err) {
      setError(errorText(err));
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, setError };
}

export function ErrorText(props: { error?: string }) {
  return props.error ? (
    <p role="alert" class="error">
      {props.error}
    </p>
  ) : null;
}

/** A modal dialog (native <dialog>: focus trap, Escape closes). */
export function Dialog(props: { title: string; onClose: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
  }, []);
  return (
    <dialog ref={ref} aria-label={props.title} onClose={props.onClose} class="card">
      <h2>{props.title}</h2>
      {props.children}
    </dialog>
  );
}

export function Paging(props: { page: number; hasNext: boolean; onPage: (p: number) => void }) {
  return (
    <nav class="paging" aria-label="Pages">
      <button
        type="button"
        disabled={props.page === 0}
        onClick={() => props.onPage(props.page - 1)}
      >
        Previous
      </button>
      <span>Page {props.page + 1}</span>
      <button type="button" disabled={!props.hasNext} onClick={() => props.onPage(props.page + 1)}>
        Next
      </button>
    </nav>
  );
}

/** A button that copies `text` to the clipboard and says so. */
export function CopyButton(props: { text: () => Promise<string> | string; label: string }) {
  const [done, setDone] = useState('');
  const copy = async () => {
    try {
      const text = await props.text();
      try {
        await navigator.clipboard.writeText(text);
        setDone('Copied');
      } catch {
        // No clipboard (plain HTTP on the LAN): show the text to copy by hand.
        setDone(text);
      }
    } catch (err) {
      setDone(errorText(err));
    }
  };
  return (
    <span class="copy">
      <button type="button" onClick={() => void copy()}>
        {props.label}
      </button>
      <output aria-live="polite">{done}</output>
    </span>
  );
}

export function formatTs(ts: number | null | undefined): string {
  return ts ? new Date(ts).toLocaleString() : '';
}

/**
 * Imports a JSON document from a file or pasted text: parses it and hands it to `onImport`
 * (which saves it and may throw to show an error).
 */
export function JsonImportDialog(props: {
  title: string;
  fileLabel: string;
  onImport: (parsed: unknown) => Promise<void>;
  onClose: () => void;
}) {
  const [text, setText] = useState('');
  const act = useAction();
  const submit = (e: Event) => {
    e.preventDefault();
    void act.run(async () => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new Error(`The file is not JSON: ${errorText(err)}`);
      }
      await props.onImport(parsed);
    });
  };
  return (
    <Dialog title={props.title} onClose={props.onClose}>
      <form class="stack" onSubmit={submit}>
        <label>
          {props.fileLabel}
          <input
            type="file"
            accept=".json,application/json"
            onChange={(e) => {
              const file = e.currentTarget.files?.[0];
              if (file) void file.text().then(setText);
            }}
          />
        </label>
        <label>
          Or paste the JSON
          <textarea rows={8} value={text} onInput={(e) => setText(e.currentTarget.value)} />
        </label>
        <ErrorText error={act.error} />
        <FormButtons onCancel={props.onClose} busy={act.busy || !text} label="Import" />
      </form>
    </Dialog>
  );
}

/** A dialog form's buttons: cancel (closes) and submit (disabled while busy). */
export function FormButtons(props: {
  onCancel: () => void;
  label: string;
  cancelLabel?: string;
  busy?: boolean;
}) {
  return (
    <div class="buttons">
      <button type="button" onClick={props.onCancel}>
        {props.cancelLabel ?? 'Cancel'}
      </button>
      <button type="submit" class="primary" disabled={props.busy}>
        {props.label}
      </button>
    </div>
  );
}

/** A labelled checkbox (`label.check`): the box, then its text. */
export function Check(props: { checked: boolean; onChange: (v: boolean) => void; label: string }) {
  return (
    <label class="check">
      <input
        type="checkbox"
        checked={props.checked}
        onChange={(e) => props.onChange(e.currentTarget.checked)}
      />
      {props.label}
    </label>
  );
}

/** A tab list (ARIA tabs: arrow keys move between them); the caller renders the panel. */
export function Tabs<T extends string>(props: {
  label: string;
  tabs: readonly T[];
  tab: T;
  onTab: (t: T) => void;
  names?: Partial<Record<T, string>>;
}) {
  const { tabs } = props;
  return (
    <div role="tablist" class="tabs" aria-label={props.label}>
      {tabs.map((t) => (
        <button
          key={t}
          type="button"
          role="tab"
          aria-selected={props.tab === t}
          onClick={() => props.onTab(t)}
          onKeyDown={(e) => {
            const i = tabs.indexOf(t);
            const next = e.key === 'ArrowRight' ? i + 1 : e.key === 'ArrowLeft' ? i - 1 : -99;
            if (next === -99) return;
            const nt = tabs[(next + tabs.length) % tabs.length];
            props.onTab(nt);
            (e.currentTarget.parentElement?.children[tabs.indexOf(nt)] as HTMLElement)?.focus();
          }}
        >
          {props.names?.[t] ?? t}
        </button>
      ))}
    </div>
  );
}

/** A typed value from the text a user typed: JSON when it parses (numbers, booleans, objects). */
export function parseValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
