import type { ScenarioResult } from '../../chaos/scenario.js';

/** What went wrong in a fault-suite phase: its error, and every verdict that failed, with why. */
export const failuresOf = (r: ScenarioResult | undefined): string[] =>
  [
    r?.error ?? '',
    ...Object.entries(r?.verdicts ?? {})
      .filter(([, v]) => !v.ok)
      .map(([k, v]) => `${k}: ${v.detail}`),
  ].filter(Boolean);
