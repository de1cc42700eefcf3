import { parseArgs } from 'node:util';
import { saveResult, writeReport } from './report.js';
import { runScenario } from './scenario.js';
import { SCENARIOS } from './scenarios.js';

/** `npm run chaos -- <scenario|all|report> [--quick]` */
const usage = `usage: npm run chaos -- <scenario|all|report> [--quick]\n${SCENARIOS.map((s) => `  ${s.name}: ${s.summary}`).join('\n')}\n  all: every scenario above, in order\n  report: rewrite docs/RELIABILITY.md from chaos/results`;
let parsed;
try {
  parsed = parseArgs({
    args: process.argv.slice(2),
    options: { quick: { type: 'boolean' } },
    allowPositionals: true,
    strict: true,
  });
} catch (e) {
  console.error(`${(e as Error).message}\n${usage}`);
  process.exit(2);
}
const names = parsed.positionals;
if (!names.length) {
  console.error(usage);
  process.exit(2);
}
const order = SCENARIOS.map((s) => s.name);
const chosen = names.includes('all')
  ? SCENARIOS
  : names.includes('report')
    ? []
    : names.map((n) => SCENARIOS.find((s) => s.name === n));
const unknown = names.filter((n, i) => !['all', 'report'].includes(n) && !chosen[i]);
if (unknown.length) {
  console.error(`unknown scenario ${unknown.join(', ')}\n${usage}`);
  process.exit(2);
}
let failed = 0;
for (const s of chosen) {
  const r = await runScenario(s!, { quick: !!parsed.values.quick, log: (m) => console.log(m) });
  saveResult(r);
  failed += r.ok ? 0 : 1;
  const bad = Object.entries(r.verdicts).filter(([, v]) => !v.ok);
  console.log(
    `${r.scenario}: ${r.ok ? 'PASS' : 'FAIL'}${r.error ? ` (${r.error})` : ''}${bad.map(([k, v]) => `\n  ${k}: ${v.detail}`).join('')}`,
  );
}
console.log(`wrote ${writeReport(order)}`);
process.exit(failed ? 1 : 0);
