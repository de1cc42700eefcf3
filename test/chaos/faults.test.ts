import { describe, expect, it } from '@jest/globals';
import { runSeries } from '../../chaos/scenario.js';
import { SCENARIOS } from '../../chaos/scenarios.js';
import { failuresOf } from '../helpers/faults.js';

/**
 * Short versions of the fault suite's scenarios (npm run chaos has the full ones): one cluster
 * of real operator and agent processes, each fault for a few seconds in turn, every invariant
 * checked after each. Only scenarios that hold on the current code are here; the README and
 * docs/RELIABILITY.md list the others.
 */
const SHORT = [
  'ecs-throttling-storm',
  'ecs-internal-errors',
  'ecs-drop-answer',
  'ecs-non-json-502',
  'kube-watches-closed',
  'kube-status-conflicts',
  'kube-410-storm',
  'kube-429-retry-after',
  'kube-unreachable-30s',
  'kube-list-nodes-403-at-start',
  'agent-killed-mid-burst',
  'leader-sigkill',
];

describe('fault suite, short versions', () => {
  it('keeps every invariant through ECS, Kubernetes and process faults', async () => {
    const list = SHORT.map((n) => SCENARIOS.find((s) => s.name === n)!);
    const results = await runSeries(list, {
      quick: true,
      faultMs: 4000,
      warmMs: 1500,
      cluster: { nodes: 3, heldBack: 2, replicas: 1 },
    });
    expect(results.map((r) => ({ scenario: r.scenario, failures: failuresOf(r) }))).toEqual(
      SHORT.map((scenario) => ({ scenario, failures: [] })),
    );
    // The checks ran: pods came and went, and the invariants were polled in each phase.
    for (const r of results) expect(r.verdicts['no-release-in-use']!.detail).toMatch(/^\d+ polls$/);
    expect(results.reduce((n, r) => n + (r.workload?.allocations ?? 0), 0)).toBeGreaterThan(20);
  }, 170_000);

  it('keeps one leader, to the last call, when another holder is written into the Lease', async () => {
    const scenario = SCENARIOS.find((s) => s.name === 'kube-lease-rewritten')!;
    const [r] = await runSeries([scenario], {
      quick: true,
      faultMs: 3000,
      warmMs: 1500,
      cluster: { nodes: 1, heldBack: 2 },
    });
    expect(failuresOf(r)).toEqual([]);
    expect(r!.verdicts['deposed-at-once']!.detail).toMatch(
      /^stopped leading \d\.\d s after the write, (on reading it|on losing its renewal to it)$/,
    );
    expect(r!.verdicts['silent-once-deposed']!.detail).toMatch(
      / (read another holder \(.+\)|conflict) at .*none after the grace$/,
    );
  }, 90_000);
});
