import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import type { TsData } from '../lib/live.js';

/**
 * A uPlot time-series chart (line or bars) of any number of keys. uPlot draws 100,000 points on a
 * canvas and zooms by dragging (double click resets); the container keeps its height, so live
 * updates never move the page.
 */

export interface ChartSeries {
  label: string;
  /** [ts ms, value] sorted by ts. */
  points: Array<[number, number]>;
  color?: string;
}

const COLORS = ['#1565c0', '#c62828', '#2e7d32', '#ef6c00', '#6a1b9a', '#00838f', '#5d4037'];

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
  const labels = props.series.map((s) => s.label).join('\n');
  const height = props.height ?? 260;

  // Rebuild the chart when the set of series changes; data updates go through setData.
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      title: props.title,
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: true } },
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
    const ro = new ResizeObserver(() =>
      u.setSize({ width: Math.max(200, el.clientWidth), height }),
    );
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
  }, [labels, props.bars, height]);

  useEffect(() => {
    const u = plot.current;
    if (!u) return;
    // Keep a zoomed-in view while data arrives; follow the window otherwise.
    const zoomed = u.select.width > 0;
    u.setData(align(props.series), !props.windowMs);
    if (props.windowMs && !zoomed) {
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
      if (!u || u.select.width > 0) return;
      const now = Date.now() / 1000;
      u.setScale('x', { min: now - windowS, max: now });
    }, 1000);
    return () => clearInterval(timer);
  }, [props.windowMs]);

  return (
    <div
      ref={box}
      class="chart"
      data-points={props.series.reduce((n, s) => n + s.points.length, 0)}
      style={{ minHeight: `${height + 40}px` }}
      role="img"
      aria-label={`Chart of ${props.series.map((s) => s.label).join(', ') || 'no keys'}`}
    />
  );
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
