import { useEffect, useRef, useState } from 'preact/hooks';
import { wallParts } from '../../src/common/wall-clock.js';
import { api, errorText } from '../lib/api.js';

/**
 * The scheduler form's live preview: the next runs of the schedule being typed, computed by the
 * gateway's scheduler (`POST /api/scheduler/nextRuns`, nothing armed), shown in the schedule's
 * time zone; and the conversions of the form's wall times in a chosen time zone.
 */

/** How many runs the preview shows. */
const RUNS = 5;
/** Pause after the last keystroke before asking (ms). */
const PAUSE_MS = 300;

/** The browser's time zone (the form's default). */
export const browserZone = (): string => Intl.DateTimeFormat().resolvedOptions().timeZone;

/** Every IANA time zone the browser knows (the form's suggestions). */
export const timeZones = (): string[] =>
  (Intl as unknown as { supportedValuesOf?: (k: string) => string[] }).supportedValuesOf?.(
    'timeZone',
  ) ?? [];

/** The offset of `timezone` from UTC at `ms` (ms; Berlin in summer: +7,200,000). */
function offsetAt(ms: number, timezone: string): number {
  const p = wallParts(ms, timezone);
  const wall = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  return wall - Math.floor(ms / 1000) * 1000;
}

/** A `datetime-local` value (`2027-03-12T09:00`) as wall time in `timezone` -> ms. */
export function fromZoned(value: string, timezone: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})/.exec(value);
  if (!m) return Number.NaN;
  const wall = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5]);
  // The offset at the guess, corrected once for a guess on the other side of a DST change.
  const first = wall - offsetAt(wall, timezone);
  return wall - offsetAt(first, timezone);
}

/** ms -> a `datetime-local` value, as wall time in `timezone`. */
export function toZoned(ms: number | null | undefined, timezone: string): string | undefined {
  if (!ms) return undefined;
  return new Date(ms + offsetAt(ms, timezone)).toISOString().slice(0, 16);
}

function formatIn(ms: number, timezone: string | null): string {
  return new Intl.DateTimeFormat(undefined, {
    timeZone: timezone ?? undefined,
    weekday: 'short',
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    timeZoneName: 'short',
  }).format(new Date(ms));
}

type Preview = { runs: number[]; timezone: string | null } | { error: string } | undefined;

/**
 * The next runs of the schedule that `scheduleOf` reads from the enclosing form, asked for again
 * after each edit (a pause after typing); a schedule the form cannot build yet, or one the
 * gateway refuses, shows why.
 */
export function NextRuns(props: { scheduleOf: (f: FormData) => unknown }) {
  const ref = useRef<HTMLDivElement>(null);
  const [, setEdits] = useState(0);
  const [key, setKey] = useState('');
  const [preview, setPreview] = useState<Preview>(undefined);
  // Edits anywhere in the form render again, so that the effect below reads the new fields.
  useEffect(() => {
    const form = ref.current?.closest('form');
    const edited = () => setEdits((n) => n + 1);
    form?.addEventListener('input', edited);
    form?.addEventListener('change', edited);
    return () => {
      form?.removeEventListener('input', edited);
      form?.removeEventListener('change', edited);
    };
  }, []);
  // After every render: the form's schedule now (fields shown or hidden by the dialog included).
  useEffect(() => {
    const form = ref.current?.closest('form');
    if (!form) return;
    try {
      setKey(JSON.stringify({ schedule: props.scheduleOf(new FormData(form)) }));
    } catch (err) {
      setKey(JSON.stringify({ error: errorText(err) }));
    }
  });
  useEffect(() => {
    if (!key) return;
    const asked = JSON.parse(key) as { schedule?: unknown; error?: string };
    if (asked.error !== undefined) {
      setPreview({ error: asked.error });
      return;
    }
    let current = true;
    const timer = setTimeout(() => {
      api<{ runs: number[]; timezone: string | null }>('/api/scheduler/nextRuns', {
        body: { schedule: asked.schedule, count: RUNS },
      })
        .then((p) => current && setPreview(p))
        .catch((err: unknown) => current && setPreview({ error: errorText(err) }));
    }, PAUSE_MS);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [key]);
  return (
    <div ref={ref} class="stack" aria-live="polite" data-testid="next-runs">
      <strong>
        Next runs
        {preview && 'timezone' in preview && preview.timezone ? ` (${preview.timezone})` : ''}
      </strong>
      {preview === undefined ? (
        <p class="muted">…</p>
      ) : 'error' in preview ? (
        <p class="error">{preview.error}</p>
      ) : preview.runs.length === 0 ? (
        <p class="muted">none: the schedule has no run left</p>
      ) : (
        <ol aria-label="Next runs">
          {preview.runs.map((r) => (
            <li key={r} data-ts={r}>
              {formatIn(r, preview.timezone)}
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}
