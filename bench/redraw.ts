import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { drawFootprint } from './footprint.js';
import { drawGrowth } from './growth.js';
import { BENCH_DIR } from './report.js';
import { drawScaleUp, type ScaleUpChartData } from './scale-up.js';

/**
 * Redraws the charts from results/<scenario>.json, without a run, where the JSON holds the
 * chart's data: footprint's rows; scale-up's and growth's series from runs that saved them
 * (`readyMs`, `callsOverTime`). Names the scenarios whose charts need a run.
 */
export function redraw(): void {
  const dir = join(BENCH_DIR, 'results');
  const drawn: string[] = [];
  const needRun: string[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()) {
    const { scenario, details: d } = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
      scenario: string;
      details: Record<string, unknown>;
    };
    if (scenario === 'footprint') drawn.push(drawFootprint(d.rows as Array<Record<string, number>>));
    else if (scenario.startsWith('scale-up-') && d.readyMs && d.callsOverTime)
      drawn.push(...drawScaleUp(scenario, d as unknown as ScaleUpChartData));
    else if (scenario.startsWith('growth-') && d.callsOverTime)
      drawn.push(drawGrowth(scenario, d as unknown as Parameters<typeof drawGrowth>[1]));
    else if (/^(scale-up|growth|churn|scale-down)/.test(scenario)) needRun.push(scenario);
  }
  for (const p of drawn) console.log(`drew ${p.replace(/.*\/bench\//, 'bench/')}`);
  if (needRun.length) console.log(`their JSON has no chart data (a run draws them): ${needRun.join(', ')}`);
}
