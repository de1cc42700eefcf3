import { describe, expect, it } from '@jest/globals';
import { runSeries } from '../../chaos/scenario.js';
import { SCENARIOS } from '../../chaos/scenarios.js';
import { failuresOf } from '../helpers/faults.js';

/**
 * The fault suite's Cilium-mode scenarios, short: operators with --pool-api ciliumnode serving
 * stand-in cilium-agents, pods coming and going through the agents, releases through their
 * handshake under lost answers and refused CiliumNode writes, then the leader killed; the same
 * invariants as every scenario, and no address pooled before its ENI is in status.
 */
describe('fault suite in Cilium mode, short', () => {
  it('keeps every invariant through lost answers, refused CiliumNode writes and a killed leader', async () => {
    const list = ['cilium-release-faults', 'cilium-leader-sigkill'].map((n) => SCENARIOS.find((s) => s.name === n)!);
    const results = await runSeries(list, {
      quick: true,
      faultMs: 12_000,
      warmMs: 1500,
      cluster: { nodes: 3, heldBack: 4, replicas: 2 },
    });
    expect(results.map((r) => ({ scenario: r.scenario, failures: failuresOf(r) }))).toEqual(
      list.map((s) => ({ scenario: s.name, failures: [] })),
    );
    for (const r of results) {
      expect(r.verdicts['no-release-in-use']!.detail).toMatch(/^\d+ polls$/);
      expect(r.verdicts['eni-listed-first']!.detail).toMatch(/^\d+ cilium-agents/);
    }
    expect(results[0]!.verdicts['released-through-handshake']!.ok).toBe(true);
    expect(results.reduce((n, r) => n + (r.workload?.allocations ?? 0), 0)).toBeGreaterThan(20);
  }, 200_000);
});
