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
}

const W = 720;
const H = 400;
const M = { left: 64, right: 24, top: 40, bottom: 48 };
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
const fmt = (v: number) => (Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2));

/** Writes a plain SVG line chart to bench/results/<name>.svg; answers its path. */
export function writeChart(name: string, c: Chart): string {
  const xs = [...c.series.flatMap((s) => s.points.map((p) => p[0])), ...(c.markers ?? []).map((m) => m.x), 0];
  const ys = [...c.series.flatMap((s) => s.points.map((p) => p[1])), 0];
  const xMax = Math.max(...xs) * 1.05 || 1;
  const yMax = Math.max(...ys) * 1.05 || 1;
  const px = (x: number) => M.left + (x / xMax) * (W - M.left - M.right);
  const py = (y: number) => H - M.bottom - (y / yMax) * (H - M.top - M.bottom);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${esc(c.title)}</text>`,
    `<line x1="${M.left}" y1="${H - M.bottom}" x2="${W - M.right}" y2="${H - M.bottom}" stroke="black"/>`,
    `<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${H - M.bottom}" stroke="black"/>`,
    `<text x="${W / 2}" y="${H - 10}" text-anchor="middle">${esc(c.xLabel)}</text>`,
    `<text x="16" y="${H / 2}" text-anchor="middle" transform="rotate(-90 16 ${H / 2})">${esc(c.yLabel)}</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const x = (xMax / 5) * i;
    const y = (yMax / 5) * i;
    out.push(`<text x="${px(x)}" y="${H - M.bottom + 16}" text-anchor="middle">${fmt(x)}</text>`);
    out.push(`<text x="${M.left - 6}" y="${py(y) + 4}" text-anchor="end">${fmt(y)}</text>`);
    out.push(`<line x1="${M.left}" y1="${py(y)}" x2="${W - M.right}" y2="${py(y)}" stroke="#eee"/>`);
  }
  for (const m of c.markers ?? []) {
    out.push(
      `<line x1="${px(m.x)}" y1="${M.top}" x2="${px(m.x)}" y2="${H - M.bottom}" stroke="${m.color}" stroke-dasharray="6 4"/>`,
    );
    // A label near the right edge goes to the left of its line.
    const right = px(m.x) > W - 160;
    out.push(
      `<text x="${px(m.x) + (right ? -4 : 4)}" y="${M.top + 12}" fill="${m.color}" text-anchor="${right ? 'end' : 'start'}">${esc(m.label)}</text>`,
    );
  }
  c.series.forEach((s, k) => {
    const pts = s.step
      ? s.points.flatMap((p, i) => (i ? [[p[0], s.points[i - 1]![1]] as [number, number], p] : [p]))
      : s.points;
    const d = pts.map((p, i) => `${i ? 'L' : 'M'}${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`).join(' ');
    out.push(
      `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="4 3"' : ''}/>`,
    );
    out.push(`<rect x="${M.left + 12}" y="${M.top + 8 + k * 18}" width="14" height="3" fill="${s.color}"/>`);
    out.push(`<text x="${M.left + 32}" y="${M.top + 13 + k * 18}">${esc(s.label)}</text>`);
  });
  out.push('</svg>');
  const path = join(BENCH_DIR, 'results', `${name}.svg`);
  writeFileSync(path, `${out.join('\n')}\n`);
  return path;
}
