import type { Chart } from './svg.js';

/** What a run keeps of its mutating calls over time (in its JSON, so the chart can be redrawn from it). */
export interface CallsOverTime {
  /** The width of a bucket, in real seconds. */
  intervalSeconds: number;
  /** Successful calls of each action per bucket, the first from the run's start. */
  byAction: Record<string, number[]>;
  /** Each action's sustained quota in calls per real second (its burst aside). */
  quotaPerSecond: Record<string, number>;
}

/** Bucket widths, in seconds: the narrowest that keeps a run within MAX_BUCKETS. */
const INTERVALS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600];
const MAX_BUCKETS = 60;

/**
 * The successful calls of `actions` in the emulator's journal (or anything with its `at`,
 * `action` and `code`), counted per bucket from `t0` (wall-clock ms) to the later of `endMs`
 * after it and the last call. Actions without a successful call are left out.
 */
export function bucketCalls(
  records: ReadonlyArray<{ at: number; action: string; code: string }>,
  o: { t0: number; endMs?: number; actions: readonly string[]; quotaPerSecond: Record<string, number> },
): CallsOverTime {
  const wanted = new Set(o.actions);
  const ok = records.filter((r) => r.code === 'OK' && wanted.has(r.action));
  const spanS = ok.reduce((ms, r) => Math.max(ms, r.at - o.t0), o.endMs ?? 0) / 1000;
  const intervalSeconds = INTERVALS.find((s) => spanS / s <= MAX_BUCKETS) ?? INTERVALS.at(-1)!;
  const buckets = Math.max(1, Math.ceil(spanS / intervalSeconds));
  const byAction: Record<string, number[]> = {};
  for (const action of o.actions) {
    const mine = ok.filter((r) => r.action === action);
    if (!mine.length) continue;
    const counts = new Array<number>(buckets).fill(0);
    for (const r of mine) {
      const i = Math.floor(Math.max(0, r.at - o.t0) / 1000 / intervalSeconds);
      counts[Math.min(buckets - 1, i)]!++;
    }
    byAction[action] = counts;
  }
  const quotaPerSecond = Object.fromEntries(
    Object.keys(byAction)
      .filter((a) => o.quotaPerSecond[a] !== undefined)
      .map((a) => [a, o.quotaPerSecond[a]!]),
  );
  return { intervalSeconds, byAction, quotaPerSecond };
}

/** Calls per real second of quotas given per emulated minute, on a clock `timeScale` times faster. */
export function perSecond(perMinute: Record<string, number>, timeScale: number): Record<string, number> {
  return Object.fromEntries(Object.entries(perMinute).map(([a, n]) => [a, (n * timeScale) / 60]));
}

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22'];
const rate = (v: number) => String(Number(v.toPrecision(3)));

/**
 * One line per action, its calls per second in each bucket (held across the bucket), and a
 * dashed line at each action's sustained quota (one line for actions that share a quota).
 */
export function callsChart(title: string, xLabel: string, c: CallsOverTime): Chart {
  const actions = Object.keys(c.byAction);
  const color = new Map(actions.map((a, i) => [a, COLORS[i % COLORS.length]!]));
  const w = c.intervalSeconds;
  const byQuota = new Map<number, string[]>();
  for (const a of actions) {
    const q = c.quotaPerSecond[a];
    if (q !== undefined) byQuota.set(q, [...(byQuota.get(q) ?? []), a]);
  }
  return {
    title,
    xLabel,
    yLabel: `successful calls per second (${w} s buckets)`,
    legend: 'right',
    series: actions.map((a) => {
      const counts = c.byAction[a]!;
      return {
        label: a,
        color: color.get(a)!,
        step: true,
        points: [
          ...counts.map((n, i) => [i * w, n / w] as [number, number]),
          [counts.length * w, counts.at(-1)! / w] as [number, number],
        ],
      };
    }),
    levels: [...byQuota].map(([q, as]) => ({
      y: q,
      label: `quota ${rate(q)}/s: ${as.join(', ')}`,
      color: as.length === 1 ? color.get(as[0]!)! : '#888',
    })),
  };
}
