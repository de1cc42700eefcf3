import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { formatFiles } from './format.js';

export const BENCH_DIR = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..', 'bench');

export interface BenchRow {
  scenario: string;
  /** The command that reproduces the row. */
  command: string;
  /** Short result columns, in order. */
  summary: Record<string, string>;
  target?: string;
  met?: boolean;
  /** A sentence below the table: a chart, why a target was missed. */
  note?: string;
}

/** Writes `results/<scenario>.json` and replaces the scenario's row in RESULTS.md. */
export function writeResults(row: BenchRow, details: unknown): void {
  const json = join(BENCH_DIR, 'results', `${row.scenario}.json`);
  writeFileSync(
    json,
    `${JSON.stringify({ ...row, at: new Date().toISOString(), machine: machine(), details }, null, 2)}\n`,
  );
  const md = join(BENCH_DIR, 'RESULTS.md');
  let text: string;
  try {
    text = readFileSync(md, 'utf8');
  } catch {
    text =
      '# Benchmark results\n\nEach row is rewritten by the run that produced it; `results/<scenario>.json` has the details.\n';
  }
  const begin = `<!-- ${row.scenario}:begin -->`;
  const end = `<!-- ${row.scenario}:end -->`;
  const cols = Object.keys(row.summary);
  const section = [
    begin,
    `## ${row.scenario}`,
    '',
    `Reproduce: \`${row.command}\``,
    '',
    `| ${cols.join(' | ')} |`,
    `| ${cols.map(() => '---').join(' | ')} |`,
    `| ${cols.map((c) => row.summary[c]).join(' | ')} |`,
    '',
    ...(row.target ? [`Target: ${row.target} — **${row.met ? 'met' : 'NOT met'}**.`, ''] : []),
    ...(row.note ? [row.note, ''] : []),
    end,
  ].join('\n');
  const re = new RegExp(`${begin}[\\s\\S]*?${end}`);
  text = re.test(text) ? text.replace(re, section) : `${text.trimEnd()}\n\n${section}\n`;
  writeFileSync(md, text.endsWith('\n') ? text : `${text}\n`);
  formatFiles([json, md]);
}

function machine(): string {
  return `${process.platform} ${process.arch}, node ${process.version}`;
}

export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
