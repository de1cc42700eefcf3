/*
 * IPv6 prefix mode (ipv6Mode Prefix, dual-stack): each ENI holds one /80 from which its pods take
 * their IPv6 addresses, so IPv6 costs no call as the pool grows; a /80 is given back only whole,
 * through the release handshake, once the pool stops using IPv6.
 */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPool } from '../../src/api/types.js';
import { inIpv6Prefix, ipv6PrefixAddress, firstFreeInIpv6Prefix } from '../../src/ipam/ipv6-prefix.js';
import { planPool, type EniFact, type PoolObservation } from '../../src/ipam/pool-plan.js';
import type { Ack } from '../../src/ipam/release.js';
import { VSW6, observation, v4, v6 } from './observation.js';

const NOW = Date.parse('2026-01-01T01:00:00.000Z');
const OLD = new Date(NOW - 30_000).toISOString();
const RUNS = Number(process.env.PLAN_RUNS ?? 300);
const prefixOf = (n: number) => `2408:4005:3c0:a100:${n + 1}::/80`;
const single6 = v6;

function eni(id: string, ipv4: number, o: { base?: number; prefixes?: string[]; ipv6?: string[] } = {}): EniFact {
  const base = o.base ?? 0;
  return {
    id,
    status: 'InUse',
    instanceId: 'i-node',
    vSwitchId: 'vsw-6',
    primaryIp: v4(base + 99),
    secondaryIps: Array.from({ length: ipv4 }, (_, k) => v4(base + k)),
    ipv6: o.ipv6 ?? [],
    ipv6Prefixes: o.prefixes ?? [],
    ours: true,
    removing: false,
    attaching: false,
  };
}

function observe(o: {
  enis?: EniFact[];
  used?: string[];
  cooling?: string[];
  requests?: Record<string, string>;
  acks?: Record<string, Ack>;
  preAllocate?: number;
  spec?: Partial<ENIPool['spec']>;
}): PoolObservation {
  const enis = o.enis ?? [];
  return observation({
    now: NOW,
    spec: {
      securityGroupIDs: ['sg-a'],
      ipFamilies: ['IPv4', 'IPv6'],
      ipv6Mode: 'Prefix',
      preAllocate: o.preAllocate ?? 4,
      releaseDelaySeconds: 0,
      ...o.spec,
    },
    status: {
      used: Object.fromEntries(
        (o.used ?? []).map((ip, k) => [ip, { pod: `default/p${k}`, containerID: `c${k}`, ifName: 'eth0' }]),
      ),
      cooling: Object.fromEntries((o.cooling ?? []).map((ip) => [ip, new Date(NOW + 60_000).toISOString()])),
      releaseRequests: o.requests ?? {},
      releaseAcks: o.acks ?? {},
    },
    // 15 IPv4 per ENI (14 for pods) but only 6 IPv6 entries: a /80 is one of them.
    limits: { eniQuantity: 4, ipv4PerEni: 15, ipv6PerEni: 6 },
    instanceEnis: enis,
    ownedEnis: enis,
    vSwitches: [VSW6],
  });
}

describe('ipv6Mode Prefix', () => {
  it('creates ENIs with one /80 and no single IPv6 address, their IPv4 not capped by the IPv6 entries', () => {
    const plan = planPool(observe({ preAllocate: 14 }), { failures: [] });
    expect(plan.create).toEqual([{ vSwitchId: 'vsw-6', ips: 14, ipv6Prefixes: 1 }]);
  });

  it('grows an ENI with a /80 by IPv4 assigns only: no IPv6 call', () => {
    const plan = planPool(
      observe({ enis: [eni('eni-1', 4, { prefixes: [prefixOf(0)] })], used: [v4(0), v4(1), v4(2), v4(3)] }),
      { failures: [] },
    );
    expect(plan.assign.reduce((n, a) => n + a.count, 0)).toBeGreaterThanOrEqual(4);
    expect(plan.assignIpv6).toEqual([]);
    expect(plan.assignIpv6Prefixes).toEqual([]);
    expect(plan.create).toEqual([]);
    // Each IPv4 pod address has its IPv6 partner in the /80.
    expect(plan.status.summary.availableIPv6).toBe(plan.status.summary.available);
  });

  it('gives an ENI of single IPv6 addresses (the class changed) a /80, keeps the single ones pods hold and requests the rest', () => {
    const singles = [single6(0), single6(1), single6(2)];
    const plan = planPool(observe({ enis: [eni('eni-1', 3, { ipv6: singles })], used: [v4(0), single6(0)] }), {
      failures: [],
    });
    expect(plan.assignIpv6Prefixes).toEqual([{ eniId: 'eni-1', count: 1 }]);
    expect(plan.assignIpv6).toEqual([]);
    expect(Object.keys(plan.status.releaseRequests).sort()).toEqual([single6(1), single6(2)].sort());
  });

  it('assigns no /80, and no IPv4 address it could not pair, to an ENI whose IPv6 entries are all taken', () => {
    const singles = Array.from({ length: 6 }, (_, k) => single6(k));
    const used = [...Array.from({ length: 6 }, (_, k) => v4(k)), ...singles];
    const plan = planPool(observe({ enis: [eni('eni-1', 6, { ipv6: singles })], used, preAllocate: 4 }), {
      failures: [],
    });
    expect(plan.assignIpv6Prefixes).toEqual([]);
    // Its room is no use to a dual-stack pod: a new ENI (with its /80) is made instead.
    expect(plan.assign.filter((a) => a.eniId === 'eni-1')).toEqual([]);
    expect(plan.create).toEqual([{ vSwitchId: 'vsw-6', ips: 4, ipv6Prefixes: 1 }]);
  });

  it('withdraws a /80 request of a dual-stack pool (left from a spell without IPv6), whatever its ack', () => {
    for (const answer of ['ready', 'do-not-release', undefined] as const) {
      const plan = planPool(
        observe({
          enis: [eni('eni-1', 4, { prefixes: [prefixOf(0)] })],
          requests: { [prefixOf(0)]: OLD },
          acks: answer ? { [prefixOf(0)]: { answer, requestedAt: OLD } } : {},
        }),
        { failures: [] },
      );
      expect(plan.status.releaseRequests[prefixOf(0)]).toBeUndefined();
      expect(plan.unassignIpv6Prefixes).toEqual([]);
    }
  });

  it('IPv6-only: an ENI with a /80 left from dual-stack takes no single IPv6 address (the /80 holds an entry) until it goes', () => {
    const plan = planPool(
      observe({
        enis: [eni('eni-1', 0, { prefixes: [prefixOf(0)] })],
        preAllocate: 6,
        spec: { ipFamilies: ['IPv6'], ipv6Mode: 'SecondaryIP' },
      }),
      { failures: [] },
    );
    expect(plan.assignIpv6.filter((a) => a.eniId === 'eni-1')).toEqual([]);
    expect(plan.status.releaseRequests[prefixOf(0)]).toBeDefined();
  });

  it('keeps an ENI its /80 while the pool is dual-stack, whatever ipv6Mode says now', () => {
    const plan = planPool(
      observe({ enis: [eni('eni-1', 4, { prefixes: [prefixOf(0)] })], spec: { ipv6Mode: 'SecondaryIP' } }),
      { failures: [] },
    );
    expect(plan.unassignIpv6Prefixes).toEqual([]);
    expect(plan.assignIpv6).toEqual([]);
    expect(Object.keys(plan.status.releaseRequests)).toEqual([]);
  });

  describe('a pool that stopped using IPv6', () => {
    const ipv4Only = { ipFamilies: ['IPv4'] as Array<'IPv4' | 'IPv6'>, ipv6Mode: 'SecondaryIP' as const };
    const prefix = prefixOf(0);
    const inside = ipv6PrefixAddress(prefix, 1);

    it('requests its /80 at once', () => {
      const plan = planPool(observe({ enis: [eni('eni-1', 4, { prefixes: [prefix] })], spec: ipv4Only }), {
        failures: [],
      });
      expect(plan.status.releaseRequests[prefix]).toBeDefined();
      expect(plan.unassignIpv6Prefixes).toEqual([]);
    });

    it('unassigns it once the agent says ready to that request', () => {
      const plan = planPool(
        observe({
          enis: [eni('eni-1', 4, { prefixes: [prefix] })],
          spec: ipv4Only,
          requests: { [prefix]: OLD },
          acks: { [prefix]: { answer: 'ready', requestedAt: OLD } },
        }),
        { failures: [] },
      );
      expect(plan.unassignIpv6Prefixes).toEqual([{ eniId: 'eni-1', prefixes: [prefix] }]);
      expect(plan.status.releaseRequests[prefix]).toBeUndefined();
    });

    it('never unassigns it while a pod holds an address of it, whatever the ack says', () => {
      const plan = planPool(
        observe({
          enis: [eni('eni-1', 4, { prefixes: [prefix] })],
          spec: ipv4Only,
          used: [v4(0), inside],
          requests: { [prefix]: OLD },
          acks: { [prefix]: { answer: 'ready', requestedAt: OLD } },
        }),
        { failures: [] },
      );
      expect(plan.unassignIpv6Prefixes).toEqual([]);
    });

    it('deletes no ENI while a pod holds an address of its /80, though its IPv4 are free', () => {
      const plan = planPool(
        observe({
          enis: [eni('eni-1', 2, { prefixes: [prefix] }), eni('eni-2', 14, { base: 20 })],
          spec: { ...ipv4Only, deleteEmptyENIs: true, preAllocate: 1 },
          used: [inside],
          requests: { [v4(0)]: OLD, [v4(1)]: OLD },
          acks: { [v4(0)]: { answer: 'ready', requestedAt: OLD }, [v4(1)]: { answer: 'ready', requestedAt: OLD } },
        }),
        { failures: [] },
      );
      expect(plan.deleteEnis).not.toContain('eni-1');
    });
  });

  it('property: a /80 is never unassigned, nor its ENI deleted, while an address of it is used or cooling; no single IPv6 goes to an ENI of a /80', () => {
    fc.assert(
      fc.property(
        fc.record({
          enis: fc.integer({ min: 1, max: 3 }),
          ipv4: fc.array(fc.integer({ min: 0, max: 14 }), { minLength: 3, maxLength: 3 }),
          withPrefix: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
          usedV6: fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 5 })), { maxLength: 6 }),
          coolingV6: fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 6, max: 9 })), {
            maxLength: 3,
          }),
          usedV4: fc.array(fc.integer({ min: 0, max: 50 }), { maxLength: 10 }),
          families: fc.constantFrom(['IPv4'] as const, ['IPv4', 'IPv6'] as const),
          mode: fc.constantFrom('Prefix' as const, 'SecondaryIP' as const),
          acked: fc.boolean(),
          deleteEmptyENIs: fc.boolean(),
          preAllocate: fc.integer({ min: 0, max: 20 }),
        }),
        (r) => {
          const enis = Array.from({ length: r.enis }, (_, k) =>
            eni(`eni-${k}`, r.ipv4[k]!, { base: k * 20, prefixes: r.withPrefix[k] ? [prefixOf(k)] : [] }),
          );
          const withPrefix = (k: number) => enis[k]?.ipv6Prefixes?.length;
          const used6 = r.usedV6.filter(([k]) => withPrefix(k)).map(([k, n]) => ipv6PrefixAddress(prefixOf(k), n));
          const cooling6 = r.coolingV6
            .filter(([k]) => withPrefix(k))
            .map(([k, n]) => ipv6PrefixAddress(prefixOf(k), n));
          const all4 = enis.flatMap((e) => e.secondaryIps);
          const used4 = [...new Set(r.usedV4.map((n) => all4[n % Math.max(1, all4.length)]!))].filter(Boolean);
          const keys = [...all4, ...enis.flatMap((e) => e.ipv6Prefixes ?? [])];
          const plan = planPool(
            observe({
              enis,
              used: [...used4, ...used6],
              cooling: cooling6,
              preAllocate: r.preAllocate,
              spec: {
                ipFamilies: [...r.families],
                ipv6Mode: r.families.length === 2 ? r.mode : 'SecondaryIP',
                deleteEmptyENIs: r.deleteEmptyENIs,
              },
              requests: r.acked ? Object.fromEntries(keys.map((k) => [k, OLD])) : {},
              // The acks say ready whatever is used: the planner must not trust them for what status.used names.
              acks: r.acked ? Object.fromEntries(keys.map((k) => [k, { answer: 'ready', requestedAt: OLD }])) : {},
            }),
            { failures: [] },
          );
          const busy = [...used6, ...cooling6];
          for (const u of plan.unassignIpv6Prefixes)
            for (const p of u.prefixes) expect(busy.filter((ip) => inIpv6Prefix(ip, p))).toEqual([]);
          for (const id of plan.deleteEnis) {
            const e = enis.find((x) => x.id === id)!;
            expect(busy.filter((ip) => (e.ipv6Prefixes ?? []).some((p) => inIpv6Prefix(ip, p)))).toEqual([]);
          }
          const ofPrefix = new Set(enis.filter((e) => e.ipv6Prefixes?.length).map((e) => e.id));
          for (const a of plan.assignIpv6) expect(ofPrefix.has(a.eniId)).toBe(false);
          // At most one /80 per ENI.
          for (const a of plan.assignIpv6Prefixes) expect(ofPrefix.has(a.eniId)).toBe(false);
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe('addresses of a /80', () => {
  it('are found by membership, never listed', () => {
    const prefix = '2408:4005:3c0:a100:7::/80';
    expect(ipv6PrefixAddress(prefix, 1)).toBe('2408:4005:3c0:a100:7::1');
    expect(ipv6PrefixAddress(prefix, 0x1_0001)).toBe('2408:4005:3c0:a100:7:0:1:1');
    expect(inIpv6Prefix('2408:4005:3c0:a100:7:0:ffff:ffff', prefix)).toBe(true);
    expect(inIpv6Prefix('2408:4005:3c0:a100:8::1', prefix)).toBe(false);
    expect(inIpv6Prefix('192.168.0.1', prefix)).toBe(false);
    expect(inIpv6Prefix('not an address', prefix)).toBe(false);
    const taken = new Set([ipv6PrefixAddress(prefix, 1), ipv6PrefixAddress(prefix, 2)]);
    expect(firstFreeInIpv6Prefix(prefix, (ip) => taken.has(ip))).toBe('2408:4005:3c0:a100:7::3');
  });
});
