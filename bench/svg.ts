import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR } from './report.js';

export interface Series {
  label: string;
  points: Array<[number, number]>;
  color: string;
  /** Drawn as steps (a count that changes at instants) rather than straight segments. */
  step?: boolean;
  dashed?: boolean;
}

export interface Chart {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  /** Vertical lines, e.g. a bound. */
  markers?: Array<{ x: number; label: string; color: string }>;
  /** Horizontal dashed lines, e.g. a rate limit, named in the legend. */
  levels?: Array<{ y: number; label: string; color: string }>;
  /** Where the legend goes, inside the plot's top corner (default left). */
  legend?: 'left' | 'right';
}

/** Axis ticks: the values, the step between them, and their labels. */
export interface Ticks {
  /** 1, 2 or 5 × 10^k. */
  step: number;
  values: number[];
  labels: string[];
}

/**
 * Ticks at round values over [lo, hi]: the smallest step of 1, 2 or 5 × 10^k whose multiples
 * from at or below lo to at or above hi number at most `maxTicks` (at least 4 of them when
 * maxTicks is 8). Each value is computed as an integer over a power of ten, so 0.3 is 0.3 (not
 * 3 × 0.1), and labelled with the step's decimals. An empty range [v, v] is widened upwards by
 * |v| (by 1 at 0).
 */
export function niceTicks(lo: number, hi: number, maxTicks = 8): Ticks {
  if (!Number.isFinite(hi - lo)) throw new RangeError(`ticks need a finite range, not [${lo}, ${hi}]`);
  if (maxTicks < 3) throw new RangeError(`ticks need maxTicks of at least 3, not ${maxTicks}`);
  if (hi < lo) [lo, hi] = [hi, lo];
  // Narrower than a billionth of its values (or than 1e-90, past what a label's decimals show),
  // steps would be lost in their rounding: as empty.
  const size = Math.max(Math.abs(lo), Math.abs(hi));
  if (hi - lo <= Math.max(size * 1e-9, 1e-90)) hi = lo + (size < 1e-90 ? 1 : size);
  for (let e = Math.floor(Math.log10((hi - lo) / maxTicks)) - 1; ; e++) {
    for (const m of [1, 2, 5]) {
      // k × m × 10^e, with 10^e as an exact divisor when e < 0 (k × m is an integer).
      const at = (k: number) => (e >= 0 ? k * m * 10 ** e : (k * m) / 10 ** -e);
      const step = at(1);
      let first = Math.floor(lo / step);
      let last = Math.ceil(hi / step);
      // The divisions round: keep the range covered.
      while (at(first) > lo) first--;
      while (at(first + 1) <= lo) first++;
      while (at(last) < hi) last++;
      while (at(last - 1) >= hi) last--;
      if (last - first + 1 > maxTicks) continue;
      const decimals = Math.max(0, -e);
      const values = Array.from({ length: last - first + 1 }, (_, i) => at(first + i) + 0);
      return { step, values, labels: values.map((v) => v.toFixed(decimals)) };
    }
  }
}

const W = 720;
const H = 400;
const M = { left: 64, right: 24, top: 40, bottom: 48 };
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
/** A coordinate: one decimal is finer than a pixel (and keeps float noise out of the file). */
const c1 = (v: number) => String(Math.round(v * 10) / 10);

/** A plain SVG line chart: axes from 0 to a round value past the data, ticks at round values. */
export function renderChart(c: Chart): string {
  const xs = [...c.series.flatMap((s) => s.points.map((p) => p[0])), ...(c.markers ?? []).map((m) => m.x), 0];
  const ys = [...c.series.flatMap((s) => s.points.map((p) => p[1])), ...(c.levels ?? []).map((l) => l.y), 0];
  const xt = niceTicks(Math.min(...xs), Math.max(...xs));
  const yt = niceTicks(Math.min(...ys), Math.max(...ys));
  const [x0, x1] = [xt.values[0]!, xt.values.at(-1)!];
  const [y0, y1] = [yt.values[0]!, yt.values.at(-1)!];
  const px = (x: number) => M.left + ((x - x0) / (x1 - x0)) * (W - M.left - M.right);
  const py = (y: number) => H - M.bottom - ((y - y0) / (y1 - y0)) * (H - M.top - M.bottom);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${esc(c.title)}</text>`,
  ];
  yt.values.forEach((y, i) => {
    out.push(`<line x1="${M.left}" y1="${c1(py(y))}" x2="${W - M.right}" y2="${c1(py(y))}" stroke="#eee"/>`);
    out.push(`<text x="${M.left - 6}" y="${c1(py(y) + 4)}" text-anchor="end">${yt.labels[i]}</text>`);
  });
  xt.values.forEach((x, i) => {
    out.push(
      `<line x1="${c1(px(x))}" y1="${H - M.bottom}" x2="${c1(px(x))}" y2="${H - M.bottom + 4}" stroke="black"/>`,
    );
    out.push(`<text x="${c1(px(x))}" y="${H - M.bottom + 18}" text-anchor="middle">${xt.labels[i]}</text>`);
  });
  out.push(
    `<line x1="${M.left}" y1="${H - M.bottom}" x2="${W - M.right}" y2="${H - M.bottom}" stroke="black"/>`,
    `<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${H - M.bottom}" stroke="black"/>`,
    `<text x="${W / 2}" y="${H - 10}" text-anchor="middle">${esc(c.xLabel)}</text>`,
    `<text x="16" y="${H / 2}" text-anchor="middle" transform="rotate(-90 16 ${H / 2})">${esc(c.yLabel)}</text>`,
  );
  for (const m of c.markers ?? []) {
    const x = c1(px(m.x));
    out.push(
      `<line x1="${x}" y1="${M.top}" x2="${x}" y2="${H - M.bottom}" stroke="${m.color}" stroke-dasharray="6 4"/>`,
    );
    // A label near the right edge goes to the left of its line.
    const right = px(m.x) > W - 160;
    out.push(
      `<text x="${c1(px(m.x) + (right ? -4 : 4))}" y="${M.top + 12}" fill="${m.color}" text-anchor="${right ? 'end' : 'start'}">${esc(m.label)}</text>`,
    );
  }
  for (const l of c.levels ?? []) {
    const y = c1(py(l.y));
    out.push(
      `<line x1="${M.left}" y1="${y}" x2="${W - M.right}" y2="${y}" stroke="${l.color}" stroke-dasharray="6 4"/>`,
    );
  }
  for (const s of c.series) {
    const pts = s.step
      ? s.points.flatMap((p, i) => (i ? [[p[0], s.points[i - 1]![1]] as [number, number], p] : [p]))
      : s.points;
    const d = pts.map((p, i) => `${i ? 'L' : 'M'}${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`).join(' ');
    out.push(
      `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="4 3"' : ''}/>`,
    );
  }
  // The legend: the series, then the levels (their labels in a list, as close levels would overlap at their lines).
  const right = c.legend === 'right';
  const entries = [
    ...c.series.map((s) => ({ label: s.label, color: s.color, dash: s.dashed ? '4 3' : undefined })),
    ...(c.levels ?? []).map((l) => ({ label: l.label, color: l.color, dash: '4 2' })),
  ];
  entries.forEach((e, k) => {
    const y = M.top + 9 + k * 18;
    const x = right ? W - M.right - 26 : M.left + 12;
    out.push(
      `<line x1="${x}" y1="${y}" x2="${x + 14}" y2="${y}" stroke="${e.color}" stroke-width="3"${e.dash ? ` stroke-dasharray="${e.dash}"` : ''}/>`,
    );
    out.push(
      `<text x="${right ? x - 6 : x + 20}" y="${y + 4}"${right ? ' text-anchor="end"' : ''}>${esc(e.label)}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** Writes renderChart's SVG to bench/results/<name>.svg; answers its path. */
export function writeChart(name: string, c: Chart): string {
  const path = join(BENCH_DIR, 'results', `${name}.svg`);
  writeFileSync(path, renderChart(c));
  return path;
}
