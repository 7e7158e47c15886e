import { useEffect, useId, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import type { TsData } from '../lib/live.js';

/**
 * A uPlot time-series chart (line or bars) of any number of keys. uPlot draws 100,000 points on a
 * canvas and zooms by dragging; Shift+drag or a touch drag pans, the arrow keys and +/- do both from
 * the keyboard. A zoomed or panned realtime chart holds still until double click, Escape or
 * *Back to live*. The container keeps its height, so live updates never move the page.
 */

export interface ChartSeries {
  label: string;
  /** [ts ms, value] sorted by ts. */
  points: Array<[number, number]>;
  color?: string;
}

const COLORS = ['#1565c0', '#c62828', '#2e7d32', '#ef6c00', '#6a1b9a', '#00838f', '#5d4037'];

/**
 * The y axis as wide as its longest label: uPlot's fixed 50 px cut large values ("10,000")
 * down to their last digits.
 */
function fitAxis(u: uPlot, values: string[] | null, axisIdx: number): number {
  const axis = u.axes[axisIdx] as { font?: unknown; gap?: number; ticks?: { size?: number } };
  const longest = (values ?? []).reduce(
    (a, v) => (String(v).length > a.length ? String(v) : a),
    '',
  );
  u.ctx.font = String(Array.isArray(axis.font) ? axis.font[0] : (axis.font ?? ''));
  const text = longest ? u.ctx.measureText(longest).width / devicePixelRatio : 0;
  return Math.ceil(Math.max(50, text + (axis.ticks?.size ?? 10) + (axis.gap ?? 5) + 4));
}

/** Aligns the series on the union of their timestamps (uPlot's data shape, seconds on x). */
export function align(series: ChartSeries[]): uPlot.AlignedData {
  const xs = new Set<number>();
  for (const s of series) for (const p of s.points) xs.add(p[0]);
  const x = [...xs].sort((a, b) => a - b);
  const index = new Map(x.map((t, i) => [t, i]));
  const ys = series.map((s) => {
    const y: Array<number | null> = new Array(x.length).fill(null);
    for (const [t, v] of s.points) y[index.get(t) as number] = v;
    return y;
  });
  return [x.map((t) => t / 1000), ...ys];
}

export function TimeChart(props: {
  series: ChartSeries[];
  /** Realtime: the x range [now - windowMs, now] follows the clock. */
  windowMs?: number;
  bars?: boolean;
  height?: number;
  title?: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  /** The user's own x range (zoomed or panned, seconds); null follows the live window. */
  const held = useRef<{ min: number; max: number } | null>(null);
  const [paused, setPaused] = useState(false);
  const hintId = useId();
  const labels = props.series.map((s) => s.label).join('\n');
  const height = props.height ?? 260;
  const windowMs = useRef(props.windowMs);
  windowMs.current = props.windowMs;

  /** Holds the chart at [min, max] (live updates stop moving it). */
  const hold = (min: number, max: number) => {
    held.current = { min, max };
    setPaused(true);
    plot.current?.setScale('x', { min, max });
  };
  /** Back to the live window (realtime) or to all the data (history). */
  const release = () => {
    held.current = null;
    setPaused(false);
    const u = plot.current;
    if (!u) return;
    const w = windowMs.current;
    if (w) {
      const now = Date.now() / 1000;
      u.setScale('x', { min: now - w / 1000, max: now });
    } else {
      const xs = u.data[0];
      if (xs.length > 0) u.setScale('x', { min: xs[0], max: xs[xs.length - 1] });
    }
  };

  // Rebuild the chart when the set of series changes; data updates go through setData.
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      title: props.title,
      cursor: {
        drag: { x: true, y: false },
        // Double click (or tap) goes back to the live window, not to uPlot's full data range.
        bind: {
          dblclick: () => () => {
            release();
            return null;
          },
        },
      },
      scales: { x: { time: true } },
      axes: [{}, { size: fitAxis }],
      hooks: {
        // A drag zoom holds the chart at the selected range.
        setSelect: [
          (u) => {
            if (u.select.width <= 0) return;
            hold(u.posToVal(u.select.left, 'x'), u.posToVal(u.select.left + u.select.width, 'x'));
          },
        ],
        // The shown range, for tests and assistive text.
        setScale: [
          (u, key) => {
            if (key !== 'x') return;
            el.dataset.xMin = String(Math.round((u.scales.x.min ?? 0) * 1000));
            el.dataset.xMax = String(Math.round((u.scales.x.max ?? 0) * 1000));
          },
        ],
      },
      series: [
        {},
        ...props.series.map((s, i) => ({
          label: s.label,
          stroke: s.color ?? COLORS[i % COLORS.length],
          width: 1.5,
          spanGaps: true,
          ...(props.bars
            ? {
                paths: uPlot.paths.bars?.({ size: [0.6, 40] }),
                fill: `${s.color ?? COLORS[i % COLORS.length]}88`,
              }
            : {}),
        })),
      ],
    };
    const u = new uPlot(opts, align(props.series), el);
    plot.current = u;
    if (held.current) u.setScale('x', held.current);
    const stopPan = panGesture(u, hold);
    const ro = new ResizeObserver(() =>
      u.setSize({ width: Math.max(200, el.clientWidth), height }),
    );
    ro.observe(el);
    return () => {
      stopPan();
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [labels, props.bars, height]);

  useEffect(() => {
    const u = plot.current;
    if (!u) return;
    // A held (zoomed or panned) view stays put while data arrives; else follow the window.
    u.setData(align(props.series), !props.windowMs && !held.current);
    if (held.current) u.setScale('x', held.current);
    else if (props.windowMs) {
      const now = Date.now() / 1000;
      u.setScale('x', { min: now - props.windowMs / 1000, max: now });
    }
  }, [props.series, props.windowMs]);

  // Realtime: the window slides with the clock even when no data arrives.
  useEffect(() => {
    if (!props.windowMs) return;
    const windowS = props.windowMs / 1000;
    const timer = setInterval(() => {
      const u = plot.current;
      if (!u || held.current) return;
      const now = Date.now() / 1000;
      u.setScale('x', { min: now - windowS, max: now });
    }, 1000);
    return () => clearInterval(timer);
  }, [props.windowMs]);

  /** Keyboard: arrows pan by a tenth, + and - zoom, Escape or Home back to live. */
  const onKey = (e: KeyboardEvent) => {
    const u = plot.current;
    if (!u) return;
    const min = u.scales.x.min ?? 0;
    const max = u.scales.x.max ?? 0;
    const span = max - min;
    const shifted = (by: number) => hold(min + by, max + by);
    const zoomed = (f: number) => {
      const mid = (min + max) / 2;
      hold(mid - (span * f) / 2, mid + (span * f) / 2);
    };
    const keys: Record<string, () => void> = {
      ArrowLeft: () => shifted(-span / 10),
      ArrowRight: () => shifted(span / 10),
      '+': () => zoomed(0.5),
      '=': () => zoomed(0.5),
      '-': () => zoomed(2),
      Escape: release,
      Home: release,
    };
    const run = keys[e.key];
    if (!run) return;
    e.preventDefault();
    run();
  };

  const name = props.series.map((s) => s.label).join(', ') || 'no keys';
  return (
    <figure class="chart-box">
      <div
        ref={box}
        class="chart"
        data-points={props.series.reduce((n, s) => n + s.points.length, 0)}
        data-live={props.windowMs ? String(!paused) : undefined}
        style={{ minHeight: `${height + 40}px` }}
        role="application"
        aria-roledescription="chart"
        // biome-ignore lint/a11y/noNoninteractiveTabindex: the chart pans and zooms by keyboard
        tabIndex={0}
        aria-label={`Chart of ${name}`}
        aria-describedby={hintId}
        onKeyDown={onKey}
      />
      <figcaption class="chart-tools">
        <span id={hintId} class="muted">
          Drag to zoom, Shift+drag or touch-drag to pan; arrow keys pan, + and − zoom; double-click
          or Escape goes back.
        </span>
        <button type="button" onClick={release} disabled={!paused}>
          {props.windowMs ? 'Back to live' : 'Show all'}
        </button>
      </figcaption>
    </figure>
  );
}

/**
 * Drag to pan: Shift+drag with a mouse, or a one-finger drag on a touch screen, moves the x range
 * with the pointer. It takes the pointer before uPlot's drag zoom sees it (a cancelled pointerdown
 * fires no mouse events), and calls `hold` with each new range. Returns the unbinding.
 */
function panGesture(u: uPlot, hold: (min: number, max: number) => void): () => void {
  const over = u.over;
  let start: { x: number; min: number; max: number; id: number } | null = null;
  const down = (e: PointerEvent) => {
    if (e.button !== 0 || (e.pointerType === 'mouse' && !e.shiftKey)) return;
    e.preventDefault();
    e.stopPropagation();
    over.setPointerCapture(e.pointerId);
    start = { x: e.clientX, min: u.scales.x.min ?? 0, max: u.scales.x.max ?? 0, id: e.pointerId };
  };
  const move = (e: PointerEvent) => {
    if (!start || e.pointerId !== start.id) return;
    const width = over.clientWidth || 1;
    const by = ((e.clientX - start.x) / width) * (start.max - start.min);
    if (by !== 0) hold(start.min - by, start.max - by);
  };
  const up = (e: PointerEvent) => {
    if (start && e.pointerId === start.id) start = null;
  };
  over.style.touchAction = 'pan-y';
  over.addEventListener('pointerdown', down);
  over.addEventListener('pointermove', move);
  over.addEventListener('pointerup', up);
  over.addEventListener('pointercancel', up);
  return () => {
    over.removeEventListener('pointerdown', down);
    over.removeEventListener('pointermove', move);
    over.removeEventListener('pointerup', up);
    over.removeEventListener('pointercancel', up);
  };
}

/** Numeric points of one key from update data (text values that are not numbers are skipped). */
export function numericPoints(points: Array<[number, string]>): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const [t, v] of points) {
    const n = v === 'true' ? 1 : v === 'false' ? 0 : Number(v);
    if (v !== '' && Number.isFinite(n)) out.push([t, n]);
  }
  return out;
}

/** Merges update data into a per-key ts -> value store, dropping points older than `since`. */
export function mergeInto(store: Map<string, Map<number, string>>, data: TsData, since = 0): void {
  for (const [k, points] of Object.entries(data)) {
    let m = store.get(k);
    if (!m) {
      m = new Map();
      store.set(k, m);
    }
    for (const [t, v] of points) m.set(t, v);
    if (since > 0) for (const t of m.keys()) if (t < since) m.delete(t);
  }
}

/** The store as chart series of `keys`, sorted by time. */
export function toSeries(store: Map<string, Map<number, string>>, keys: string[]): ChartSeries[] {
  return keys.map((k) => ({
    label: k,
    points: numericPoints(
      [...(store.get(k) ?? new Map<number, string>()).entries()].sort((a, b) => a[0] - b[0]),
    ),
  }));
}
