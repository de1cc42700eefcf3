/*
 * Dual-stack planning (src/ipam/families.ts): each pod IPv4 address of an ENI has an IPv6
 * companion on the same ENI; the IPv6 addresses follow the IPv4 plan, and their surplus goes
 * back through the release handshake like any address.
 */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { ASSIGN_MAX_IPV6, UNASSIGN_IPV6_BATCH, planCompanions, type CompanionInput } from '../../src/ipam/families.js';
import { planPool, type EniFact, type PoolObservation, type PoolPlan } from '../../src/ipam/pool-plan.js';
import type { FailureRecord } from '../../src/ipam/failure-record.js';
import type { Ack } from '../../src/ipam/release.js';
import { VSW6, observation, v4, v6 } from './observation.js';

const NOW = Date.parse('2026-01-01T01:00:00.000Z');
const STAMP = new Date(NOW).toISOString();
const OLD = new Date(NOW - 30_000).toISOString();
const RUNS = Number(process.env.PLAN_RUNS ?? 300);
const VSW4 = { ...VSW6, id: 'vsw-4', free: 200, ipv6Cidr: undefined };

function eni(id: string, ipv4: number, ipv6: number, base = 0): EniFact {
  return {
    id,
    status: 'InUse',
    instanceId: 'i-node',
    vSwitchId: 'vsw-6',
    primaryIp: v4(base + 99),
    secondaryIps: Array.from({ length: ipv4 }, (_, k) => v4(base + k)),
    ipv6: Array.from({ length: ipv6 }, (_, k) => v6(base + k)),
    ours: true,
    removing: false,
    attaching: false,
  };
}

function observe(o: {
  enis?: EniFact[];
  used?: string[];
  requests?: Record<string, string>;
  acks?: Record<string, Ack>;
  vSwitches?: PoolObservation['vSwitches'];
  preAllocate?: number;
}): PoolObservation {
  const enis = o.enis ?? [];
  return observation({
    now: NOW,
    spec: {
      securityGroupIDs: ['sg-a'],
      ipFamilies: ['IPv4', 'IPv6'],
      preAllocate: o.preAllocate ?? 4,
      releaseDelaySeconds: 0,
    },
    status: {
      used: Object.fromEntries((o.used ?? []).map((ip) => [ip, { pod: 'default/p', containerID: 'c' }])),
      releaseRequests: o.requests ?? {},
      releaseAcks: o.acks ?? {},
    },
    // 15 IPv4 per ENI (14 for pods) but only 6 IPv6: an ENI serves 6 dual-stack pods.
    limits: { eniQuantity: 4, ipv4PerEni: 15, ipv6PerEni: 6 },
    instanceEnis: enis,
    ownedEnis: enis,
    vSwitches: o.vSwitches ?? [VSW6],
  });
}

describe('dual-stack pools', () => {
  it('create ENIs only in vSwitches with an IPv6 CIDR, each with its IPv6 companions, sized to the IPv6 limit', () => {
    const plan = planPool(observe({ vSwitches: [VSW4, VSW6], preAllocate: 10 }), { failures: [] });
    expect(plan.create.length).toBeGreaterThan(0);
    for (const c of plan.create) {
      expect(c.vSwitchId).toBe('vsw-6');
      // An ENI holds 6 IPv6 addresses: no more IPv4 pod addresses than that.
      expect(c.ips).toBeLessThanOrEqual(6);
      expect(c.ipv6).toBe(c.ips);
    }
  });

  it('say why when no vSwitch of the class has IPv6 in the zone', () => {
    const plan = planPool(observe({ vSwitches: [VSW4] }), { failures: [] });
    expect(plan.create).toEqual([]);
    const ready = plan.status.conditions.find((c) => c.type === 'Ready')!;
    expect(ready.status).toBe('False');
    expect(ready.reason).toBe('NoVSwitchInZone');
    expect(ready.message).toContain('IPv6');
  });

  it('top up an ENI’s IPv6 to its IPv4 pod addresses, 10 per call at most', () => {
    const plan = planPool(observe({ enis: [eni('eni-a', 5, 1)], preAllocate: 2 }), { failures: [] });
    expect(plan.assignIpv6).toEqual([{ eniId: 'eni-a', count: 4 }]);
    expect(plan.status.summary.availableIPv6).toBe(5);
  });

  it('count a dual-stack pod once: its IPv6 address is no second pod', () => {
    const plan = planPool(observe({ enis: [eni('eni-a', 5, 5)], used: [v4(0), v6(0)], preAllocate: 4 }), {
      failures: [],
    });
    expect(plan.status.summary.used).toBe(1);
    expect(plan.status.summary.usedIPv6).toBe(1);
    // 5 available, 1 used, 4 free: the pool is full.
    expect(plan.assign).toEqual([]);
    expect(plan.create).toEqual([]);
  });

  it('give back the IPv6 surplus of an ENI whose IPv4 went, only on the agent’s ready, never one in use', () => {
    // 3 IPv4, 5 IPv6: two surplus; the pod holding v6(0) keeps it.
    const first = planPool(observe({ enis: [eni('eni-a', 3, 5)], used: [v4(0), v6(0)], preAllocate: 2 }), {
      failures: [],
    });
    const requested = Object.keys(first.status.releaseRequests).filter((k) => k.includes(':'));
    expect(requested).toHaveLength(2);
    expect(requested).not.toContain(v6(0));
    expect(first.unassignIpv6).toEqual([]);
    const acks = Object.fromEntries(requested.map((k) => [k, { answer: 'ready' as const, requestedAt: STAMP }]));
    const second = planPool(
      observe({
        enis: [eni('eni-a', 3, 5)],
        used: [v4(0), v6(0)],
        requests: first.status.releaseRequests,
        acks,
        preAllocate: 2,
      }),
      { failures: [] },
    );
    expect(second.unassignIpv6).toEqual([{ eniId: 'eni-a', ips: requested }]);
    for (const k of requested) expect(second.status.releaseRequests[k]).toBeUndefined();
  });

  it('do not delete an ENI whose IPv4 addresses are confirmed free while a pod holds one of its IPv6 addresses', () => {
    const requests = { [v4(0)]: STAMP, [v4(1)]: STAMP };
    const acks = Object.fromEntries(
      Object.keys(requests).map((k) => [k, { answer: 'ready' as const, requestedAt: STAMP }]),
    );
    const o = observe({ enis: [eni('eni-a', 2, 2)], used: [v6(0)], requests, acks, preAllocate: 0 });
    o.pool.spec.deleteEmptyENIs = true;
    const plan = planPool(o, { failures: [] });
    expect(plan.deleteEnis).toEqual([]);
  });

  it('say so, and wait, on an instance type without IPv6 addresses per ENI', () => {
    const o = observe({});
    o.limits = { eniQuantity: 4, ipv4PerEni: 15, ipv6PerEni: 0 };
    const plan = planPool(o, { failures: [] });
    expect(plan.create).toEqual([]);
    expect(plan.status.conditions.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'NoIPv6OnInstanceType',
    });
    expect(plan.events.map((e) => e.reason)).toContain('NoIPv6OnInstanceType');
  });

  it('give back the IPv6 addresses of a pool that no longer uses IPv6, through the handshake', () => {
    const o = observe({ enis: [eni('eni-a', 3, 3)], preAllocate: 3 });
    o.pool.spec.ipFamilies = ['IPv4'];
    const plan = planPool(o, { failures: [] });
    expect(Object.keys(plan.status.releaseRequests).sort()).toEqual([v6(0), v6(1), v6(2)].sort());
    expect(plan.assignIpv6).toEqual([]);
  });

  it('keep IPv4 release requests apart from IPv6 ones (neither withdraws the other’s)', () => {
    const plan = planPool(
      observe({
        enis: [eni('eni-a', 4, 6)],
        requests: { [v4(3)]: OLD, [v6(5)]: OLD },
        preAllocate: 2,
      }),
      { failures: [] },
    );
    // Two IPv4 in excess, two IPv6 beyond the ENI's IPv4: each step keeps its own request and adds one.
    expect(plan.status.releaseRequests[v4(3)]).toBe(OLD);
    expect(plan.status.releaseRequests[v6(5)]).toBe(OLD);
    expect(Object.keys(plan.status.releaseRequests)).toHaveLength(4);
  });
});

const stamp = fc.constantFrom(OLD, STAMP);
const inputArb: fc.Arbitrary<CompanionInput> = fc
  .record({
    enis: fc.array(
      fc.record({
        attached: fc.boolean(),
        podIpv4: fc.integer({ min: 0, max: 30 }),
        ipv6: fc.integer({ min: 0, max: 30 }),
      }),
      { maxLength: 4 },
    ),
    perEni: fc.integer({ min: 0, max: 20 }),
    picks: fc.array(fc.tuple(fc.nat(200), fc.constantFrom('used', 'cooling', 'request', 'ready', 'refused')), {
      maxLength: 40,
    }),
    requestStamp: stamp,
    ackStamp: stamp,
    release: fc.boolean(),
    assign: fc.boolean(),
  })
  .map((r) => {
    const enis = r.enis.map((e, k) => ({
      id: `eni-${k}`,
      attached: e.attached,
      podIpv4: e.podIpv4,
      ipv6: Array.from({ length: e.ipv6 }, (_, n) => v6(k * 40 + n)),
    }));
    const all = enis.flatMap((e) => e.ipv6);
    const used = new Set<string>();
    const cooling = new Set<string>();
    const requests = new Map<string, string>();
    const acks = new Map<string, Ack>();
    for (const [n, what] of r.picks) {
      // Some picks name addresses no ENI holds (gone with their ENI).
      const ip = n < all.length ? all[n]! : v6(1000 + n);
      if (what === 'used') used.add(ip);
      else if (what === 'cooling') cooling.add(ip);
      else {
        requests.set(ip, r.requestStamp);
        if (what !== 'request')
          acks.set(ip, { answer: what === 'ready' ? 'ready' : 'do-not-release', requestedAt: r.ackStamp });
      }
    }
    return {
      enis,
      perEni: r.perEni,
      used,
      cooling,
      requests,
      acks,
      now: NOW,
      allow: { assign: r.assign, release: r.release },
    };
  });

describe('planCompanions (property)', () => {
  it('never releases or asks for an address in use or cooling, releases only what the agent confirmed, and never overfills an ENI', () => {
    fc.assert(
      fc.property(inputArb, (i) => {
        const plan = planCompanions(i);
        const unassigned = plan.unassign.flatMap((u) => u.ips);
        for (const ip of [...unassigned, ...plan.request]) expect(i.used.has(ip)).toBe(false);
        // Cooling: never asked for; released only on the agent's ready (which a correct agent withholds meanwhile).
        for (const ip of plan.request) expect(i.cooling.has(ip)).toBe(false);
        for (const ip of unassigned) {
          expect(i.acks.get(ip)?.answer).toBe('ready');
          expect(i.acks.get(ip)?.requestedAt).toBe(i.requests.get(ip));
        }
        for (const u of plan.unassign) expect(u.ips.length).toBeLessThanOrEqual(UNASSIGN_IPV6_BATCH);
        for (const a of plan.assign) expect(a.count).toBeLessThanOrEqual(ASSIGN_MAX_IPV6);
        if (!i.allow.release) expect([...plan.request, ...plan.withdraw, ...unassigned]).toEqual([]);
        if (!i.allow.assign) expect(plan.assign).toEqual([]);
        for (const e of i.enis) {
          const added = plan.assign.filter((a) => a.eniId === e.id).reduce((n, a) => n + a.count, 0);
          const removed = plan.unassign.filter((u) => u.eniId === e.id).reduce((n, u) => n + u.ips.length, 0);
          const after = e.ipv6.length + added - removed;
          const target = Math.min(e.podIpv4, i.perEni);
          if (added > 0) {
            expect(e.attached).toBe(true);
            // Topped up exactly to the target, never beyond the instance type's limit.
            expect(after).toBe(target);
          }
          // Never above its target unless it was already; what is given back an attached ENI gets again at once.
          expect(after).toBeLessThanOrEqual(Math.max(target, e.ipv6.length));
          if (e.attached && i.allow.assign) expect(after).toBeGreaterThanOrEqual(target);
          for (const ip of plan.request) if (e.ipv6.includes(ip)) expect(e.ipv6.length).toBeGreaterThan(target);
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe('IPv6-only pools (ipFamilies [IPv6]), planned in IPv6 pod addresses', () => {
  const only6 = (o: PoolObservation): PoolObservation => ({
    ...o,
    pool: { ...o.pool, spec: { ...o.pool.spec, ipFamilies: ['IPv6'] } },
  });
  const ipv6Eni = (id: string, ipv6: number): EniFact => eni(id, 0, ipv6);

  it('create ENIs with IPv6 addresses only, 10 at most each, in vSwitches with an IPv6 CIDR', () => {
    const plan = planPool(only6(observe({ vSwitches: [VSW4, VSW6], preAllocate: 6 })), { failures: [] });
    expect(plan.create.length).toBeGreaterThan(0);
    for (const c of plan.create) {
      expect(c).toMatchObject({ vSwitchId: 'vsw-6', ips: 0 });
      expect(c.ipv6).toBeGreaterThan(0);
      expect(c.ipv6).toBeLessThanOrEqual(6);
    }
    expect(plan.assign).toEqual([]);
  });

  it('grow an ENI with AssignIpv6Addresses, never IPv4 assigns, within the type’s IPv6 addresses per ENI', () => {
    const plan = planPool(only6(observe({ enis: [ipv6Eni('eni-a', 2)], used: [v6(0), v6(1)], preAllocate: 4 })), {
      failures: [],
    });
    expect(plan.assign).toEqual([]);
    expect(plan.assignIpv6).toEqual([{ eniId: 'eni-a', count: 4 }]);
    expect(plan.status.summary).toMatchObject({ available: 6, used: 2, availableIPv6: 6, usedIPv6: 2 });
  });

  it('release excess IPv6 addresses through the handshake, with UnassignIpv6Addresses on the agent’s ready', () => {
    const first = planPool(only6(observe({ enis: [ipv6Eni('eni-a', 6)], used: [v6(0)], preAllocate: 2 })), {
      failures: [],
    });
    const requested = Object.keys(first.status.releaseRequests);
    expect(requested).toHaveLength(3);
    for (const k of requested) expect(k).toMatch(/:/);
    expect(requested).not.toContain(v6(0));
    const acks = Object.fromEntries(requested.map((k) => [k, { answer: 'ready' as const, requestedAt: STAMP }]));
    const second = planPool(
      only6(
        observe({
          enis: [ipv6Eni('eni-a', 6)],
          used: [v6(0)],
          requests: first.status.releaseRequests,
          acks,
          preAllocate: 2,
        }),
      ),
      { failures: [] },
    );
    expect(second.unassign).toEqual([]);
    expect(second.unassignIpv6).toEqual([{ eniId: 'eni-a', ips: requested }]);
  });

  it('hold AssignIpv6Addresses back after it failed, as an IPv4 pool holds its assigns', () => {
    const failures: FailureRecord[] = [
      {
        action: 'AssignIpv6Addresses',
        code: 'InternalError',
        message: 'AssignIpv6Addresses: InternalError',
        permanent: false,
        count: 1,
        until: NOW + 10_000,
      },
    ];
    const plan = planPool(only6(observe({ enis: [ipv6Eni('eni-a', 2)], used: [v6(0), v6(1)], preAllocate: 4 })), {
      failures,
    });
    expect(plan.assignIpv6).toEqual([]);
  });
});

describe('changing a pool’s families under running pods, and IPv6-only corners (found by review)', () => {
  const only6 = (o: PoolObservation): PoolObservation => ({
    ...o,
    pool: { ...o.pool, spec: { ...o.pool.spec, ipFamilies: ['IPv6'] } },
  });

  it('IPv6-only: keeps an ENI whose IPv4 address (left from before) a pod holds, and gives back only the free IPv4', () => {
    const a = eni('eni-a', 2, 2);
    const requests = { [v6(0)]: STAMP, [v6(1)]: STAMP };
    const acks = Object.fromEntries(
      Object.keys(requests).map((k) => [k, { answer: 'ready' as const, requestedAt: STAMP }]),
    );
    const o = only6(observe({ enis: [a, eni('eni-b', 0, 6, 40)], used: [v4(0)], requests, acks, preAllocate: 2 }));
    o.pool.spec.deleteEmptyENIs = true;
    const plan = planPool(o, { failures: [] });
    expect(plan.deleteEnis).toEqual([]);
    expect(plan.unassignIpv6).toEqual([{ eniId: 'eni-a', ips: [v6(0), v6(1)] }]);
    // The IPv4 left on eni-a: the free one is requested, through the handshake; the used one stays.
    expect(plan.status.releaseRequests[v4(1)]).toBe(STAMP);
    expect(plan.status.releaseRequests[v4(0)]).toBeUndefined();
    const acked = planPool(
      only6(
        observe({
          enis: [eni('eni-a', 2, 0), eni('eni-b', 0, 6, 40)],
          used: [v4(0)],
          requests: { [v4(1)]: STAMP },
          acks: { [v4(1)]: { answer: 'ready', requestedAt: STAMP } },
          preAllocate: 2,
        }),
      ),
      { failures: [] },
    );
    expect(acked.unassign).toEqual([{ eniId: 'eni-a', ips: [v4(1)] }]);
    expect(acked.assign).toEqual([]);
  });

  it('[IPv6] to dual-stack: keeps the free IPv6 addresses the new IPv4 ones need, beside those IPv6-only pods hold', () => {
    // Four IPv6-only pods hold four of eni-a's six IPv6 addresses; the class is now dual-stack.
    const o = observe({ enis: [eni('eni-a', 0, 6)], used: [0, 1, 2, 3].map(v6), preAllocate: 2 });
    o.pool.status!.used = Object.fromEntries(
      [0, 1, 2, 3].map((k) => [v6(k), { pod: `default/p${k}`, containerID: `c${k}`, ifName: 'eth0' }]),
    );
    const plan = planPool(o, { failures: [] });
    expect(plan.assign.reduce((n, a) => n + a.count, 0)).toBeGreaterThan(0);
    expect(Object.keys(plan.status.releaseRequests).filter((k) => k.includes(':'))).toEqual([]);
  });

  it('IPv6-only: grows an ENI by assign when the vSwitch has no IPv4 address left (a /64 never runs short)', () => {
    const plan = planPool(
      only6(
        observe({ enis: [eni('eni-a', 0, 2)], used: [v6(0), v6(1)], vSwitches: [{ ...VSW6, free: 0, blocked: true }] }),
      ),
      { failures: [] },
    );
    expect(plan.assignIpv6).toEqual([{ eniId: 'eni-a', count: 4 }]);
  });

  it('IPv6-only: a create of 10 where the ENI holds more is a step, not a shortfall', () => {
    const o = only6(observe({ preAllocate: 15 }));
    o.limits = { eniQuantity: 2, ipv4PerEni: 21, ipv6PerEni: 20 };
    const plan = planPool(o, { failures: [] });
    expect(plan.create).toEqual([{ vSwitchId: 'vsw-6', ips: 0, ipv6: 10 }]);
    expect(plan.status.conditions.find((c) => c.type === 'Exhausted')).toMatchObject({ status: 'False' });
  });
});

describe('usePrimaryENI with IPv6: the primary ENI serves dual-stack and IPv6-only pods where the node’s vSwitch has IPv6', () => {
  const NODE6 = { ...VSW6, id: 'vsw-node6', ipv6Cidr: '2408:4005:3c0:a200::/64' };
  const NODE4 = { ...VSW4, id: 'vsw-node4' };
  const primaryOn = (vSwitchId: string, ipv4: number, ipv6: number): EniFact => ({
    ...eni('eni-primary', ipv4, ipv6, 40),
    vSwitchId,
    ours: false,
    primary: true,
  });
  const withPrimary = (
    families: Array<'IPv4' | 'IPv6'>,
    primary: EniFact,
    nodeVSwitch: typeof NODE6 | typeof NODE4,
    used: string[] = [],
    preAllocate = 4,
  ): PoolObservation => {
    const o = observe({ used, preAllocate, vSwitches: [VSW6, nodeVSwitch] });
    return {
      ...o,
      primaryEni: primary,
      pool: { ...o.pool, spec: { ...o.pool.spec, ipFamilies: families, usePrimaryENI: true } },
    };
  };

  it('dual-stack: fills the primary ENI first with IPv4 addresses and their IPv6 companions, no create', () => {
    const plan = planPool(withPrimary(['IPv4', 'IPv6'], primaryOn('vsw-node6', 0, 0), NODE6), { failures: [] });
    expect(plan.create).toEqual([]);
    expect(plan.assign).toMatchObject([{ eniId: 'eni-primary', count: 4 }]);
    expect(plan.assignIpv6).toEqual([{ eniId: 'eni-primary', count: 4 }]);
    expect(plan.events.map((e) => e.reason)).not.toContain('PrimaryENIWithoutIPv6');
  });

  it('dual-stack: tops up the primary ENI’s IPv6 to its IPv4 pod addresses', () => {
    const plan = planPool(withPrimary(['IPv4', 'IPv6'], primaryOn('vsw-node6', 4, 1), NODE6, [v4(40)]), {
      failures: [],
    });
    expect(plan.assignIpv6).toEqual([{ eniId: 'eni-primary', count: 4 }]);
  });

  it('IPv6-only: assigns IPv6 addresses on the primary ENI before any create, and leaves its IPv4 alone', () => {
    // Its IPv4 secondaries (the node's, or another pool's) are no IPv6-only pool's to give back.
    const plan = planPool(withPrimary(['IPv6'], primaryOn('vsw-node6', 2, 0), NODE6), { failures: [] });
    expect(plan.create).toEqual([]);
    expect(plan.assign).toEqual([]);
    expect(plan.assignIpv6).toEqual([{ eniId: 'eni-primary', count: 4 }]);
    expect(plan.unassign).toEqual([]);
    expect(Object.keys(plan.status.releaseRequests)).toEqual([]);
  });

  it('a node vSwitch without IPv6: the primary ENI serves no pod, secondary ENIs do, and the pool says why', () => {
    for (const families of [['IPv4', 'IPv6'], ['IPv6']] as const) {
      const plan = planPool(withPrimary([...families], primaryOn('vsw-node4', 0, 0), NODE4), { failures: [] });
      expect(plan.assign.filter((a) => a.eniId === 'eni-primary')).toEqual([]);
      expect(plan.assignIpv6.filter((a) => a.eniId === 'eni-primary')).toEqual([]);
      expect(plan.create.map((c) => c.vSwitchId)).toEqual(['vsw-6']);
      const why = plan.events.find((e) => e.reason === 'PrimaryENIWithoutIPv6');
      expect(why?.message).toMatch(/vsw-node4 has no IPv6 CIDR.*usePrimaryENI false/);
    }
  });
});

describe('the primary ENI’s IPv6 is planned only where it serves dual-stack pods (found by review)', () => {
  const NODE6 = { ...VSW6, id: 'vsw-node6', ipv6Cidr: '2408:4005:3c0:a200::/64' };
  const NODE4 = { ...VSW4, id: 'vsw-node4' };
  const NODE_V6 = '2408:4005:3c0:a200::5';
  const P80 = '2408:4005:3c0:a200:1::/80';
  const primary = (vSwitchId: string, ipv4: string[], ipv6: string[], ipv6Prefixes: string[] = []): EniFact => ({
    ...eni('eni-p', 0, 0, 40),
    vSwitchId,
    secondaryIps: ipv4,
    ipv6,
    ipv6Prefixes,
    ours: false,
    primary: true,
  });
  const obs = (
    spec: Partial<PoolObservation['pool']['spec']>,
    p: EniFact,
    nodeVSwitch: typeof NODE6 | typeof NODE4,
    extra: { requests?: Record<string, string>; acks?: Record<string, Ack>; nodeAddresses?: string[] } = {},
  ): PoolObservation => {
    const o = observe({ vSwitches: [VSW6, nodeVSwitch], preAllocate: 0, requests: extra.requests, acks: extra.acks });
    return {
      ...o,
      primaryEni: p,
      ...(extra.nodeAddresses ? { nodeAddresses: extra.nodeAddresses } : {}),
      pool: {
        ...o.pool,
        spec: { ...o.pool.spec, ipFamilies: ['IPv4'], ...spec },
        status: { ...o.pool.status, enis: [{ id: 'eni-p', deviceIndex: 0 } as never] },
      },
    };
  };
  const DS = { ipFamilies: ['IPv4', 'IPv6'] as Array<'IPv4' | 'IPv6'> };
  const onP = (xs: Array<{ eniId: string }>) => xs.filter((x) => x.eniId === 'eni-p');

  it('a primary whose vSwitch has no IPv6 gets no IPv6, is no room for dual-stack pods, and is drained first', () => {
    const p = primary('vsw-node4', [v4(40), v4(41), v4(42), v4(43)], []);
    const plan = planPool(obs({ ...DS, usePrimaryENI: true, preAllocate: 4 }, p, NODE4), { failures: [] });
    expect(onP(plan.assignIpv6)).toEqual([]);
    expect(onP(plan.assignIpv6Prefixes)).toEqual([]);
    expect(plan.create.length).toBeGreaterThan(0);
    // Once an ENI of the class serves the pods, the primary's addresses are the excess given back.
    const withEni = obs({ ...DS, usePrimaryENI: true, preAllocate: 4 }, p, NODE4);
    const served = { ...withEni, instanceEnis: [eni('eni-a', 4, 4)], ownedEnis: [eni('eni-a', 4, 4)] };
    const next = planPool(served, { failures: [] });
    expect(Object.keys(next.status.releaseRequests).sort()).toEqual([v4(40), v4(41), v4(42), v4(43)].sort());
    expect(next.create).toEqual([]);
  });

  it('a primary being drained (usePrimaryENI off) in dual-stack gets no IPv6, and its IPv6 is left alone', () => {
    const p = primary('vsw-node6', [v4(40), v4(41)], [NODE_V6]);
    for (const mode of [{}, { ipv6Mode: 'Prefix' as const }]) {
      const plan = planPool(obs({ ...DS, ...mode, usePrimaryENI: false }, p, NODE6), { failures: [] });
      expect([onP(plan.assignIpv6), onP(plan.assignIpv6Prefixes)]).toEqual([[], []]);
      expect(Object.keys(plan.status.releaseRequests)).not.toContain(NODE_V6);
    }
  });

  it('an IPv4 pool on the primary ENI never gives back a /80 or an IPv6 address it holds', () => {
    const p = primary('vsw-node6', [v4(40)], [NODE_V6], [P80]);
    const first = planPool(obs({ usePrimaryENI: true }, p, NODE6), { failures: [] });
    expect(Object.keys(first.status.releaseRequests)).not.toContain(P80);
    expect(Object.keys(first.status.releaseRequests)).not.toContain(NODE_V6);
    const acked = planPool(
      obs({ usePrimaryENI: true }, p, NODE6, {
        requests: { [P80]: OLD },
        acks: { [P80]: { answer: 'ready', requestedAt: OLD } },
      }),
      { failures: [] },
    );
    expect(acked.unassignIpv6Prefixes).toEqual([]);
  });

  it('the node’s own IPv6 (its Node’s InternalIP) on the primary is no pod’s companion and never released', () => {
    const p = primary('vsw-node6', [], [NODE_V6]);
    const plan = planPool(obs({ ...DS, usePrimaryENI: true, preAllocate: 4 }, p, NODE6, { nodeAddresses: [NODE_V6] }), {
      failures: [],
    });
    expect(onP(plan.assignIpv6)).toEqual([{ eniId: 'eni-p', count: 4 }]);
    const six = planPool(obs({ ipFamilies: ['IPv6'], usePrimaryENI: true }, p, NODE6, { nodeAddresses: [NODE_V6] }), {
      failures: [],
    });
    expect(Object.keys(six.status.releaseRequests)).not.toContain(NODE_V6);
  });
});

describe('dual-stack with both prefixes (ipv4Mode Prefix, ipv6Mode Prefix): /28s for IPv4, one /80 per ENI for IPv6', () => {
  const both = (o: PoolObservation): PoolObservation => ({
    ...o,
    pool: { ...o.pool, spec: { ...o.pool.spec, ipv4Mode: 'Prefix', ipv6Mode: 'Prefix' } },
  });
  const PREFIX80 = '2408:4005:3c0:a100:1::/80';
  const prefixEni = (prefixes: string[]): EniFact => ({
    ...eni('eni-a', 0, 0),
    ipv4Prefixes: prefixes,
    ipv6Prefixes: [PREFIX80],
  });

  it('creates an ENI with /28s and one /80, no single IPv6 address: not capped by the type’s 6 IPv6 entries', () => {
    const plan = planPool(both(observe({ preAllocate: 20 })), { failures: [] });
    expect(plan.create).toHaveLength(1);
    expect(plan.create[0]).toMatchObject({ vSwitchId: 'vsw-6', prefix: true, ips: 32, ipv6Prefixes: 1 });
    expect(plan.create[0]!.ipv6).toBeUndefined();
    expect([plan.assignIpv6, plan.assignIpv6Prefixes]).toEqual([[], []]);
  });

  it('grows by /28s alone: no IPv6 call, every pod’s IPv6 comes from the ENI’s /80', () => {
    const pods = Array.from({ length: 16 }, (_, k) => `192.168.1.${k}`);
    const plan = planPool(both(observe({ enis: [prefixEni(['192.168.1.0/28'])], used: pods, preAllocate: 4 })), {
      failures: [],
    });
    expect(plan.assign).toMatchObject([{ eniId: 'eni-a', count: 16, prefix: true }]);
    expect([plan.create, plan.assignIpv6, plan.assignIpv6Prefixes, plan.unassignIpv6Prefixes]).toEqual([
      [],
      [],
      [],
      [],
    ]);
    expect(Object.keys(plan.status.releaseRequests)).toEqual([]);
    // The status as it will be once the /28 is assigned: each IPv4 pod address has an IPv6 one in the /80.
    expect(plan.status.summary).toMatchObject({ available: 32, used: 16, availableIPv6: 32 });
  });
});

describe('IPv6-only pools of /80s (ipFamilies [IPv6], ipv6Mode Prefix): one /80 serves every pod of the node', () => {
  const PREFIX80 = '2408:4005:3c0:a100:1::/80';
  const in80 = (k: number) => `2408:4005:3c0:a100:1::${(k + 1).toString(16)}`;
  const only80 = (o: PoolObservation, extra: Partial<PoolObservation['pool']['spec']> = {}): PoolObservation => ({
    ...o,
    pool: { ...o.pool, spec: { ...o.pool.spec, ipFamilies: ['IPv6'], ipv6Mode: 'Prefix', ...extra } },
  });
  const holder = (singles = 0): EniFact => ({ ...eni('eni-a', 0, singles), ipv6Prefixes: [PREFIX80] });
  const readyOf = (plan: PoolPlan) => plan.status.conditions.find((c) => c.type === 'Ready')!;

  it('creates one ENI for the /80 (no IPv4 secondary, no single IPv6), and says the node waits for it', () => {
    const plan = planPool(only80(observe({ vSwitches: [VSW4, VSW6], preAllocate: 8 })), { failures: [] });
    expect(plan.create).toEqual([{ vSwitchId: 'vsw-6', ips: 0, ipv6Prefixes: 1 }]);
    expect([plan.assign, plan.assignIpv6, plan.assignIpv6Prefixes]).toEqual([[], [], []]);
    expect(plan.securityGroupIds).toEqual(['sg-a']);
    expect(readyOf(plan)).toMatchObject({ status: 'False', reason: 'IPv6PrefixPending' });
    // While it is made and attached, no second one.
    const again = planPool(only80({ ...observe({ vSwitches: [VSW6] }), inFlight: { enis: 1, ips: 0 } }), {
      failures: [],
    });
    expect(again.create).toEqual([]);
  });

  it('with usePrimaryENI, assigns the /80 to the primary ENI: Ready after one call, the node’s pods its room', () => {
    const base = observe({ vSwitches: [VSW6] });
    const primary: EniFact = { ...eni('eni-primary', 0, 0, 40), ours: false, primary: true };
    const o = { ...only80(base, { usePrimaryENI: true }), primaryEni: primary, podCapacity: 64 };
    const plan = planPool(o, { failures: [] });
    expect(plan.create).toEqual([]);
    expect(plan.assignIpv6Prefixes).toEqual([{ eniId: 'eni-primary', count: 1 }]);
    expect(plan.status.summary).toMatchObject({ available: 64, availableIPv6: 64, ipv6Prefixes: 1 });
    expect(readyOf(plan).status).toBe('True');
  });

  it('with a /80, makes no call as pods come: the pool is Ready with the node’s pods as its room', () => {
    const used = Array.from({ length: 30 }, (_, k) => in80(k));
    const plan = planPool(only80({ ...observe({ enis: [holder()], used }), podCapacity: 110 }), { failures: [] });
    expect([plan.create, plan.assign, plan.assignIpv6, plan.assignIpv6Prefixes]).toEqual([[], [], [], []]);
    expect(plan.status.summary).toMatchObject({ available: 110, used: 30, availableIPv6: 110, usedIPv6: 30 });
    expect(readyOf(plan).status).toBe('True');
  });

  it('never releases or deletes the /80’s ENI, with no pod on it and deleteEmptyENIs; withdraws a request left for its /80', () => {
    const o = only80(observe({ enis: [holder()], requests: { [PREFIX80]: OLD } }), { deleteEmptyENIs: true });
    const plan = planPool(o, { failures: [] });
    expect([plan.deleteEnis, plan.unassignIpv6Prefixes]).toEqual([[], []]);
    expect(plan.status.releaseRequests).toEqual({});
  });

  it('asks no second /80 while an ENI is on its way, and gives the /80 to an ENI its unassigns make room on', () => {
    const used = [v6(2), v6(3), v6(4), v6(5)];
    const full = { ...eni('eni-old', 0, 6) };
    const acks = {
      [v6(0)]: { answer: 'ready' as const, requestedAt: STAMP },
      [v6(1)]: { answer: 'ready' as const, requestedAt: STAMP },
    };
    const first = planPool(
      only80(observe({ enis: [full], used, requests: { [v6(0)]: STAMP, [v6(1)]: STAMP }, acks })),
      {
        failures: [],
      },
    );
    expect(first.unassignIpv6).toEqual([{ eniId: 'eni-old', ips: [v6(0), v6(1)] }]);
    expect(first.assignIpv6Prefixes).toEqual([{ eniId: 'eni-old', count: 1 }]);
    expect(first.create).toEqual([]);
    const roomy = { ...eni('eni-old', 0, 4) };
    const coming = planPool(only80({ ...observe({ enis: [roomy], used }), inFlight: { enis: 1, ips: 0 } }), {
      failures: [],
    });
    expect([coming.create, coming.assignIpv6Prefixes]).toEqual([[], []]);
  });

  it('keeps one /80 (the one pods hold most of) and gives any other back through the handshake, never one a pod holds', () => {
    const P2 = '2408:4005:3c0:a100:2::/80';
    const in2 = (k: number) => `2408:4005:3c0:a100:2::${k + 1}`;
    const second: EniFact = { ...eni('eni-b', 0, 0, 20), ipv6Prefixes: [P2] };
    const both = (used: string[], extra: { requests?: Record<string, string>; acks?: Record<string, Ack> } = {}) =>
      only80(observe({ enis: [holder(), second], used, ...extra }));
    const first = planPool(both([in80(0), in80(1)]), { failures: [] });
    expect(Object.keys(first.status.releaseRequests)).toEqual([P2]);
    expect([first.create, first.assignIpv6Prefixes, first.deleteEnis]).toEqual([[], [], []]);
    const acked = planPool(
      both([in80(0), in80(1)], { requests: { [P2]: STAMP }, acks: { [P2]: { answer: 'ready', requestedAt: STAMP } } }),
      { failures: [] },
    );
    expect(acked.unassignIpv6Prefixes).toEqual([{ eniId: 'eni-b', prefixes: [P2] }]);
    expect(acked.status.releaseRequests).toEqual({});
    // A pod on the other /80: it stays (asked for only once untouched), and a request left for it is withdrawn.
    const held = planPool(both([in80(0), in80(1), in2(0)], { requests: { [P2]: STAMP } }), { failures: [] });
    expect(held.status.releaseRequests).toEqual({});
    expect(held.unassignIpv6Prefixes).toEqual([]);
    // Two /80s on one ENI (an assign made twice): the same.
    const twice = planPool(
      only80(observe({ enis: [{ ...holder(), ipv6Prefixes: [PREFIX80, P2] }], used: [in80(0)] })),
      {
        failures: [],
      },
    );
    expect(Object.keys(twice.status.releaseRequests)).toEqual([P2]);
  });

  it('says so when the instance has no ENI slot for the /80, and takes nothing for addresses no ENI holds', () => {
    const full = { ...observe({ vSwitches: [VSW6] }), limits: { eniQuantity: 1, ipv4PerEni: 15, ipv6PerEni: 6 } };
    const plan = planPool(only80(full), { failures: [] });
    expect([plan.create, plan.assignIpv6Prefixes]).toEqual([[], []]);
    expect(readyOf(plan)).toMatchObject({ status: 'False', reason: 'IPv6PrefixPending' });
    expect(readyOf(plan).message).toMatch(/no ENI slot free for the \/80/);
    // A pod's address that is in no /80 and on no ENI (its ENI gone) asks for no single address.
    const stale = planPool(only80(observe({ enis: [holder()], used: ['2408:4005:3c0:a100:9::1'] })), {
      failures: [],
    });
    expect([stale.create, stale.assignIpv6]).toEqual([[], []]);
  });

  it('gives back single IPv6 addresses left from SecondaryIP mode once free, keeps those pods hold', () => {
    const o = only80(observe({ enis: [holder(3)], used: [v6(0), in80(0)] }));
    const plan = planPool(o, { failures: [] });
    expect(Object.keys(plan.status.releaseRequests).sort()).toEqual([v6(1), v6(2)].sort());
    const acked = planPool(
      only80(
        observe({
          enis: [holder(3)],
          used: [v6(0), in80(0)],
          requests: { [v6(1)]: STAMP, [v6(2)]: STAMP },
          acks: { [v6(1)]: { answer: 'ready', requestedAt: STAMP }, [v6(2)]: { answer: 'ready', requestedAt: STAMP } },
        }),
      ),
      { failures: [] },
    );
    expect(acked.unassignIpv6).toEqual([{ eniId: 'eni-a', ips: [v6(1), v6(2)] }]);
    expect(acked.unassignIpv6.flatMap((u) => u.ips)).not.toContain(v6(0));
  });
});
