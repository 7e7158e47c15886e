import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { errorText } from '../lib/api.js';

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
