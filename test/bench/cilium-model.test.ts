import { describe, expect, it } from '@jest/globals';
import { ciliumChanges, ciliumScaleUp } from '../../bench/cilium-model.js';
import { benchWorld } from '../../testbed/harness/world.js';

describe("Cilium's operator, computed", () => {
  it('fills a node one change at a time, at most 10 addresses per new ENI, counting ENI primaries', () => {
    // ecs.g7.large: 6 addresses per ENI, the ENI's primary among them.
    expect(ciliumChanges({ eniQuantity: 3, ipv4PerEni: 6 }, 8)).toEqual([
      { kind: 'create', ips: 6 },
      { kind: 'create', ips: 2 },
    ]);
    expect(ciliumChanges({ eniQuantity: 4, ipv4PerEni: 15 }, 32)).toEqual([
      { kind: 'create', ips: 10 },
      { kind: 'assign', ips: 5 },
      { kind: 'create', ips: 10 },
      { kind: 'assign', ips: 5 },
      { kind: 'create', ips: 2 },
    ]);
    // Never beyond what the instance holds.
    expect(ciliumChanges({ eniQuantity: 2, ipv4PerEni: 3 }, 8)).toEqual([{ kind: 'create', ips: 3 }]);
  });

  it('is bound by its one bucket: 4 calls a second after a burst of 20, the attach polls on top', () => {
    const world = benchWorld({ nodes: 100, timeScale: 1, typeOf: () => 'ecs.g7.xlarge' });
    const r = ciliumScaleUp(world, 8);
    // One create, attach and instance resync per node, and two attach polls (one right after the
    // attach, one 2.5 s later: the world's attach takes 2 s).
    expect(r.calls).toEqual({
      CreateNetworkInterface: 100,
      AttachNetworkInterface: 100,
      DescribeNetworkInterfaces: 100,
      'DescribeNetworkInterfaces (attach polls)': 200,
    });
    expect(r.bucketCalls).toBe(300);
    // The last resync gets the 300th token: (300 - 20) / 4 s after the start; nothing goes faster.
    expect(r.ms).toBeGreaterThanOrEqual(((300 - 20) / 4) * 1000);
    expect(r.ms).toBeLessThanOrEqual(((300 - 20) / 4) * 1000 + 2 * 2500);
    expect(r.readyMs).toHaveLength(100);
    // A node alone: create, attach, one poll at 2.5 s (the world's attach takes 2 s), its resync.
    expect(ciliumScaleUp(benchWorld({ nodes: 1, timeScale: 1, typeOf: () => 'ecs.g7.xlarge' }), 8).ms).toBe(2500);
  });

  it('refuses a world whose attach outlasts the six polls', () => {
    const world = benchWorld({ nodes: 1, timeScale: 1 });
    world.delays = { attachMs: 13_000 };
    expect(() => ciliumScaleUp(world, 8)).toThrow(/outlasts Cilium's 6 polls/);
  });
});
