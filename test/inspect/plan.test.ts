import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPoolClassSpec } from '../../src/api/types.js';
import { MUTATING_ACTIONS, resolveLimits } from '../../src/cloud/limits.js';
import { podIpCapacity, type InstanceLimits } from '../../src/ipam/capacity.js';
import { familyLimits } from '../../src/ipam/families.js';
import { fewestScaleUpCalls, quotaTime, scaleUpWant } from '../../src/ipam/quota-time.js';
import { whatIf, type WhatIf, type WhatIfInput, type WhatIfVSwitch } from '../../src/inspect/plan.js';

const RUNS = { numRuns: Number(process.env.PLAN_RUNS ?? 300) };
const XLARGE: InstanceLimits = { eniQuantity: 4, ipv4PerEni: 15, ipv6PerEni: 15 };
const QUOTAS = resolveLimits();
const vsw = (id: string, free: number, more: Partial<WhatIfVSwitch> = {}): WhatIfVSwitch => ({
  id,
  zoneId: 'zone-a',
  vpcId: 'vpc-a',
  free,
  tags: { role: 'pods' },
  ...more,
});
const POD_CLASS: ENIPoolClassSpec = { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-pods'], preAllocate: 8 };

/** N xlarge nodes of the pods class in zone-a, with Terway's default quotas. */
const input = (o: Partial<WhatIfInput> = {}, spec: Partial<ENIPoolClassSpec> = {}): WhatIfInput => ({
  className: 'pods',
  nodes: 1,
  instanceType: 'ecs.g7.xlarge',
  limits: XLARGE,
  podsPerNode: 0,
  zone: 'zone-a',
  vpcId: 'vpc-a',
  vSwitches: [vsw('vsw-a', 1000)],
  quotas: QUOTAS,
  ...o,
  spec: { ...POD_CLASS, ...o.spec, ...spec },
});
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const total = (calls: Record<string, number>) => sum(Object.values(calls));
const freeAfter = (w: WhatIf, id: string) => w.vSwitches.find((v) => v.id === id)!.freeAfter;

describe('whatIf: the planner run on simulated nodes', () => {
  it('fills a warm pool with one ENI carrying all its IPs: a create and an attach', () => {
    const w = whatIf(input());
    expect(w.perNode).toEqual({
      enis: 1,
      ips: 8,
      ready: true,
      calls: { CreateNetworkInterface: 1, AttachNetworkInterface: 1 },
    });
    expect(w.calls).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    // Its 8 IPs and the ENI's own primary.
    expect(w.vSwitches).toEqual([{ id: 'vsw-a', zoneId: 'zone-a', freeBefore: 1000, freeAfter: 991 }]);
    expect(w.warnings).toEqual([]);
  });

  it('grows each pool to its pods plus preAllocate, over as many ENIs as that takes', () => {
    const w = whatIf(input({ nodes: 3, podsPerNode: 30 }));
    // 38 IPs: 14 + 14 + 10 on three ENIs (an ENI's own primary is the node's).
    for (const n of w.byNode) expect(n).toMatchObject({ enis: 3, ips: 38, ready: true });
    expect(w.calls).toEqual({ CreateNetworkInterface: 9, AttachNetworkInterface: 9 });
    expect(freeAfter(w, 'vsw-a')).toBe(1000 - 3 * (38 + 3));
    expect(w.boundCalls).toEqual({ CreateNetworkInterface: 9, AttachNetworkInterface: 9 });
  });

  it('warns when the instance caps the pool below its pods plus preAllocate', () => {
    const w = whatIf(input({ podsPerNode: 50 }));
    // Three secondary ENIs of 14 pod IPs: 42, Ready at capacity.
    expect(w.perNode).toMatchObject({ enis: 3, ips: 42, ready: true });
    expect(w.perNode.shortfall).toMatch(/holds at most 42 pod IPs/);
    expect(w.warnings).toContainEqual(
      "each node's pool is capped at 42 pod IPs (ecs.g7.xlarge), below podsPerNode 50 + preAllocate 8 = 58; " +
        '8 of its pods get no address',
    );
  });

  it('names the vSwitch that runs short, and the nodes it cannot serve', () => {
    const w = whatIf(input({ nodes: 5, vSwitches: [vsw('vsw-small', 30)] }));
    // 9 addresses a node: three nodes fit, the fourth gets 2 IPs (the last free one is its ENI's primary), the fifth none.
    expect(w.byNode.map((n) => [n.ready, n.ips])).toEqual([
      [true, 8],
      [true, 8],
      [true, 8],
      [false, 2],
      [false, 0],
    ]);
    expect(w.nodesReady).toBe(3);
    expect(w.byNode[4]!.shortfall).toMatch(/no vSwitch of the class in zone-a has free addresses/);
    expect(freeAfter(w, 'vsw-small')).toBe(0);
    expect(w.warnings).toEqual([
      'the vSwitches of class pods in zone zone-a run short: vsw-small (30 free, 0 after); ' +
        '2 of 5 nodes cannot fill their pools (from node 4 on), 14 addresses short',
    ]);
  });

  it('spreads nodes over the vSwitches with the most free addresses (MostFreeIPs)', () => {
    const w = whatIf(input({ nodes: 4, vSwitches: [vsw('vsw-a', 100), vsw('vsw-b', 95)] }));
    expect(w.vSwitches.map((v) => v.freeAfter)).toEqual([100 - 2 * 9, 95 - 2 * 9]);
  });

  it('with usePrimaryENI, fills the primary ENI from the node’s own vSwitch with one assign', () => {
    const nodes = vsw('vsw-nodes', 200, { tags: { role: 'nodes' } });
    const w = whatIf(
      input({ nodes: 2, vSwitches: [vsw('vsw-a', 1000), nodes], nodeVSwitchId: 'vsw-nodes' }, { usePrimaryENI: true }),
    );
    expect(w.perNode).toMatchObject({ enis: 0, ips: 8, ready: true });
    expect(w.calls).toEqual({ AssignPrivateIpAddresses: 2 });
    expect(w.boundCalls).toEqual({ AssignPrivateIpAddresses: 2 });
    expect(w.vSwitches.map((v) => v.freeAfter)).toEqual([1000, 200 - 16]);
    // Without the nodes' vSwitch its room is not counted, and the prediction says so.
    const blind = whatIf(input({}, { usePrimaryENI: true }));
    expect(blind.calls).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    expect(blind.warnings.join('\n')).toMatch(/the nodes' own vSwitch is not given/);
  });

  it('in Prefix mode, creates an ENI with a whole /28', () => {
    const w = whatIf(input({ nodes: 2 }, { ipv4Mode: 'Prefix' }));
    expect(w.perNode).toMatchObject({ enis: 1, ips: 16, prefixes: 1, ready: true });
    expect(w.calls).toEqual({ CreateNetworkInterface: 2, AttachNetworkInterface: 2 });
    expect(freeAfter(w, 'vsw-a')).toBe(1000 - 2 * 17);
  });

  it('dual-stack: a create carries ten IPv6 companions, an AssignIpv6Addresses the rest', () => {
    const v6 = vsw('vsw-6', 500, { ipv6Cidr: '2408:4005:3c0:a100::/64' });
    const w = whatIf(input({ vSwitches: [v6] }, { ipFamilies: ['IPv4', 'IPv6'], preAllocate: 12 }));
    expect(w.perNode).toMatchObject({ enis: 1, ips: 12, ipv6: 12, ready: true });
    expect(w.calls).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1, AssignIpv6Addresses: 1 });
    // With a /80 per ENI, no IPv6 call follows.
    const prefixed = whatIf(
      input({ vSwitches: [v6] }, { ipFamilies: ['IPv4', 'IPv6'], ipv6Mode: 'Prefix', preAllocate: 12 }),
    );
    expect(prefixed.perNode).toMatchObject({ enis: 1, ips: 12, ipv6Prefixes: 1, ready: true });
    expect(prefixed.calls).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
  });

  it('says a dual-stack class cannot be served by vSwitches without IPv6', () => {
    const w = whatIf(input({ nodes: 2 }, { ipFamilies: ['IPv4', 'IPv6'] }));
    expect(w.nodesReady).toBe(0);
    expect(w.calls).toEqual({});
    expect(w.warnings).toEqual([expect.stringMatching(/^2 of 2 nodes not Ready \(NoVSwitchInZone\): .*IPv6 CIDR/)]);
  });

  it('times the calls at the quotas, warns where a burst is spent, and keeps the bound below', () => {
    const quotas = {
      ...QUOTAS,
      CreateNetworkInterface: { perMinute: 60, burst: 4 },
      AttachNetworkInterface: { perMinute: 120, burst: 4 },
    };
    const w = whatIf(input({ nodes: 10, quotas, attachDelayMs: 2000 }));
    // 10 creates: 6 beyond the burst at one a second, then the last attach's delay.
    expect(w.predictedSeconds).toBeCloseTo(6 + 2);
    expect(w.boundSeconds).toBeCloseTo(6 + 2);
    expect(w.warnings).toEqual([
      'CreateNetworkInterface: 10 calls exceed its burst of 4; the last waits 6.0 s at 60 a minute',
      'AttachNetworkInterface: 10 calls exceed its burst of 4; the last waits 3.0 s at 120 a minute',
    ]);
    // Small creates (the vSwitches' room splits them) cost more calls than the bound counts.
    const split = whatIf(
      input({ nodes: 10, quotas, vSwitches: [vsw('vsw-a', 45), vsw('vsw-b', 45)] }, { preAllocate: 8 }),
    );
    expect(split.nodesReady).toBe(10);
    expect(split.predictedSeconds).toBeGreaterThanOrEqual(split.boundSeconds);
  });

  it('refuses a count of nodes or pods that is not a whole number, naming the class', () => {
    expect(() => whatIf(input({ nodes: 0 }))).toThrow(
      'plan for class pods: nodes must be a whole number, at least 1 (got 0)',
    );
    expect(() => whatIf(input({ podsPerNode: 1.5 }))).toThrow(/pods per node must be a whole number/);
  });
});

describe('the quota bound (shared with bench/bound.ts)', () => {
  it('counts each action’s calls beyond its burst at its rate, the slowest one, and one attach delay', () => {
    const t = quotaTime(
      { CreateNetworkInterface: 100, AttachNetworkInterface: 100, AssignPrivateIpAddresses: 5 },
      { CreateNetworkInterface: { perMinute: 60, burst: 40 }, AttachNetworkInterface: { perMinute: 30 } },
      500,
    );
    expect(t.perActionMs).toEqual({ CreateNetworkInterface: 60_000, AttachNetworkInterface: 140_000 });
    expect(t.ms).toBe(140_500);
    // Nothing attached: no attach delay.
    expect(quotaTime({ AssignPrivateIpAddresses: 3 }, {}, 500).ms).toBe(0);
  });

  it('fills an empty pool with as few ENIs as creates may carry', () => {
    expect(scaleUpWant(XLARGE, { preAllocate: 8 }, 30)).toBe(38);
    expect(fewestScaleUpCalls(XLARGE, {}, 38)).toEqual({ CreateNetworkInterface: 3, AttachNetworkInterface: 3 });
    expect(fewestScaleUpCalls(XLARGE, { usePrimaryENI: true }, 38)).toEqual({
      AssignPrivateIpAddresses: 1,
      CreateNetworkInterface: 2,
      AttachNetworkInterface: 2,
    });
    expect(fewestScaleUpCalls(XLARGE, { ipv4Mode: 'Prefix' }, 38)).toEqual({
      CreateNetworkInterface: 1,
      AttachNetworkInterface: 1,
    });
  });
});

// Properties, over instance shapes, class modes, vSwitches and quotas.
const limitsArb = fc.record({
  eniQuantity: fc.integer({ min: 1, max: 8 }),
  ipv4PerEni: fc.integer({ min: 1, max: 30 }),
  ipv6PerEni: fc.integer({ min: 0, max: 30 }),
});
const modeArb = fc.constantFrom<Partial<ENIPoolClassSpec>>(
  {},
  { ipv4Mode: 'Prefix' },
  { usePrimaryENI: true },
  { usePrimaryENI: true, ipv4Mode: 'Prefix' },
  { ipFamilies: ['IPv4', 'IPv6'] },
  { ipFamilies: ['IPv4', 'IPv6'], ipv6Mode: 'Prefix' },
  { ipFamilies: ['IPv6'] },
  { ipFamilies: ['IPv6'], ipv6Mode: 'Prefix' },
  { ipFamilies: ['IPv6'], ipv6Mode: 'Prefix', usePrimaryENI: true },
  { ipFamilies: ['IPv4', 'IPv6'], usePrimaryENI: true },
  { ipFamilies: ['IPv6'], usePrimaryENI: true },
  { ipFamilies: ['IPv4', 'IPv6'], ipv4Mode: 'Prefix', ipv6Mode: 'Prefix' },
);
const specArb = fc
  .record({
    mode: modeArb,
    preAllocate: fc.nat(20),
    minAllocate: fc.oneof(fc.constant(0), fc.nat(40)),
    maxAllocate: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 100 })),
    maxAboveWatermark: fc.oneof(fc.constant(0), fc.nat(5)),
    vSwitchSelection: fc.constantFrom('MostFreeIPs' as const, 'Ordered' as const),
  })
  .map(({ mode, ...sizing }): ENIPoolClassSpec => ({
    ...POD_CLASS,
    ...sizing,
    minAllocate: sizing.maxAllocate ? Math.min(sizing.minAllocate, sizing.maxAllocate) : sizing.minAllocate,
    ...mode,
  }));
const quotaArb = fc.record({ perMinute: fc.integer({ min: 1, max: 600 }), burst: fc.integer({ min: 1, max: 100 }) });
/** Room enough for every node to fill up: no allocation is cut short by a vSwitch. */
const AMPLE = 1_000_000;
const inputArb = (free: fc.Arbitrary<number>) =>
  fc
    .record({
      spec: specArb,
      limits: limitsArb,
      nodes: fc.integer({ min: 1, max: 10 }),
      podsPerNode: fc.nat(60),
      frees: fc.array(free, { minLength: 1, maxLength: 3 }),
      ipv6: fc.boolean(),
      nodeFree: free,
      nodeIpv6: fc.boolean(),
      create: quotaArb,
      attach: quotaArb,
      assign: quotaArb,
      assign6: quotaArb,
      attachDelayMs: fc.nat(3000),
    })
    .map((r): WhatIfInput => ({
      className: 'pods',
      spec: r.spec,
      nodes: r.nodes,
      instanceType: 'ecs.any',
      limits: r.limits,
      podsPerNode: r.podsPerNode,
      zone: 'zone-a',
      vpcId: 'vpc-a',
      vSwitches: [
        ...r.frees.map((f, i) => vsw(`vsw-${i}`, f, r.ipv6 || i > 0 ? { ipv6Cidr: `2408:4005:3c0:a10${i}::/64` } : {})),
        vsw('vsw-nodes', r.nodeFree, {
          tags: { role: 'nodes' },
          ...(r.nodeIpv6 ? { ipv6Cidr: '2408:4005:3c0:a1ff::/64' } : {}),
        }),
      ],
      nodeVSwitchId: 'vsw-nodes',
      quotas: {
        ...QUOTAS,
        CreateNetworkInterface: r.create,
        AttachNetworkInterface: r.attach,
        AssignPrivateIpAddresses: r.assign,
        AssignIpv6Addresses: r.assign6,
      },
      attachDelayMs: r.attachDelayMs,
    }));

/** The most pod addresses of the pool's family a node may hold: the instance's, within maxAllocate. */
function ceilingOf(i: WhatIfInput): number {
  const { spec } = i;
  const v6only = spec.ipFamilies?.length === 1 && spec.ipFamilies[0] === 'IPv6';
  const limits = v6only ? { ...i.limits, ipv4PerEni: (i.limits.ipv6PerEni ?? 0) + 1 } : familyLimits(i.limits, spec);
  // With IPv6, the primary ENI serves pods only where the nodes' vSwitch has IPv6.
  const nodeIpv6 = i.vSwitches.some((v) => v.id === i.nodeVSwitchId && v.ipv6Cidr);
  const primary = spec.usePrimaryENI === true && (!spec.ipFamilies?.includes('IPv6') || nodeIpv6);
  const capacity = podIpCapacity(limits, primary, spec.ipv4Mode === 'Prefix');
  return spec.maxAllocate ? Math.min(spec.maxAllocate, capacity) : capacity;
}
const podAddresses = (i: WhatIfInput, n: WhatIf['perNode']) =>
  i.spec.ipFamilies?.length === 1 && i.spec.ipFamilies[0] === 'IPv6' ? (n.ipv6 ?? 0) : n.ips;

describe('whatIf properties', () => {
  it('keeps every pool within its instance and its maxAllocate, with a create and an attach per ENI', () => {
    fc.assert(
      fc.property(inputArb(fc.nat(300)), (i) => {
        const w = whatIf(i);
        for (const n of w.byNode) {
          expect(podAddresses(i, n)).toBeLessThanOrEqual(ceilingOf(i));
          expect(n.enis).toBeLessThanOrEqual(Math.max(0, i.limits.eniQuantity - 1));
          expect(n.calls.CreateNetworkInterface ?? 0).toBe(n.enis);
          expect(n.calls.AttachNetworkInterface ?? 0).toBe(n.enis);
          // From an empty pool nothing is released; every call is a mutating ECS action.
          for (const action of Object.keys(n.calls)) {
            expect(MUTATING_ACTIONS.has(action)).toBe(true);
            expect(action).toMatch(/^(Create|Attach|Assign)/);
          }
          // An assign carries at least one address: no more assigns than addresses.
          expect(n.calls.AssignPrivateIpAddresses ?? 0).toBeLessThanOrEqual(n.ips);
          expect(n.calls.AssignIpv6Addresses ?? 0).toBeLessThanOrEqual((n.ipv6 ?? 0) + (n.ipv6Prefixes ?? 0));
        }
        const perAction: Record<string, number> = {};
        for (const n of w.byNode) for (const [a, c] of Object.entries(n.calls)) perAction[a] = (perAction[a] ?? 0) + c;
        expect(w.calls).toEqual(perAction);
      }),
      RUNS,
    );
  });

  it('takes from the vSwitches exactly the addresses the pools hold, and each ENI’s own primary', () => {
    fc.assert(
      fc.property(inputArb(fc.nat(300)), (i) => {
        const w = whatIf(i);
        const taken = sum(w.vSwitches.map((v) => v.freeBefore - v.freeAfter));
        expect(taken).toBe(sum(w.byNode.map((n) => n.ips + n.enis)));
        for (const v of w.vSwitches) expect(v.freeBefore).toBe(i.vSwitches.find((x) => x.id === v.id)!.free);
      }),
      RUNS,
    );
  });

  it('serves every node when the vSwitches have room, at no less than the bound', () => {
    fc.assert(
      fc.property(inputArb(fc.constant(AMPLE)), (i) => {
        const w = whatIf(i);
        // IPv6 needs it on the type, and a vSwitch of the class with an IPv6 CIDR.
        const servable =
          i.spec.ipFamilies?.includes('IPv6') !== true ||
          ((i.limits.ipv6PerEni ?? 0) > 0 && i.vSwitches.some((v) => v.tags.role === 'pods' && v.ipv6Cidr));
        // An IPv6-only pool of /80s needs its /80 whatever it holds: an ENI slot, or the primary ENI with IPv6.
        const nodeIpv6 = i.vSwitches.some((v) => v.id === i.nodeVSwitchId && v.ipv6Cidr);
        const slot = i.limits.eniQuantity > 1 || (i.spec.usePrimaryENI === true && nodeIpv6);
        const needsSlot = i.spec.ipFamilies?.join() === 'IPv6' && i.spec.ipv6Mode === 'Prefix';
        if (servable && (slot || !needsSlot)) expect(w.nodesReady).toBe(i.nodes);
        // The bound is a floor for a class the operator can serve (an unservable one needs nothing it can do).
        if (w.nodesReady === i.nodes && servable) {
          expect(w.predictedSeconds).toBeGreaterThanOrEqual(w.boundSeconds - 1e-9);
          for (const [action, n] of Object.entries(w.boundCalls))
            expect(w.calls[action] ?? 0).toBeGreaterThanOrEqual(n);
        }
        expect(w.warnings.join('\n')).not.toMatch(/run short/);
      }),
      RUNS,
    );
  });

  it('names a vSwitch too small for one node, and leaves that node not Ready', () => {
    const smallArb = fc.record({
      want: fc.integer({ min: 2, max: 14 }),
      short: fc.integer({ min: 1, max: 14 }),
      nodes: fc.integer({ min: 1, max: 4 }),
    });
    fc.assert(
      fc.property(smallArb, ({ want, short, nodes }) => {
        // One node takes want + 1 (its ENI's primary); the vSwitch has less.
        const free = Math.max(0, want + 1 - short);
        const w = whatIf(input({ nodes, vSwitches: [vsw('vsw-tiny', free)] }, { preAllocate: want }));
        expect(w.byNode[0]!.ready).toBe(false);
        expect(w.nodesReady).toBe(0);
        // A create needs two free addresses at least (its primary, and one for pods).
        const after = free < 2 ? free : 0;
        expect(w.warnings[0]).toMatch(
          new RegExp(`vsw-tiny \\(${free} free, ${after} after\\); ${nodes} of ${nodes} nodes`),
        );
      }),
      RUNS,
    );
  });

  it('never needs fewer calls for more nodes', () => {
    fc.assert(
      fc.property(inputArb(fc.nat(300)), (i) => {
        const fewer = whatIf(i);
        const more = whatIf({ ...i, nodes: i.nodes + 1 });
        expect(total(more.calls)).toBeGreaterThanOrEqual(total(fewer.calls));
        for (const [action, n] of Object.entries(fewer.calls))
          expect(more.calls[action] ?? 0).toBeGreaterThanOrEqual(n);
        expect(more.predictedSeconds).toBeGreaterThanOrEqual(fewer.predictedSeconds);
        expect(more.boundSeconds).toBeGreaterThanOrEqual(fewer.boundSeconds);
      }),
      RUNS,
    );
  });
});
