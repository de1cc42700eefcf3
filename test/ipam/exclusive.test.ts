import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPool } from '../../src/api/types.js';
import { podEniCeiling } from '../../src/ipam/exclusive.js';
import { planPool, type EniFact, type PoolObservation } from '../../src/ipam/pool-plan.js';
import { observation } from './observation.js';

/*
 * eniMode Exclusive: the pool is sized in whole ENIs, each a pod's, and gives idle ones back
 * through the release handshake keyed by ENI id.
 */
const NOW = Date.parse('2026-01-01T01:00:00.000Z');
const STAMP = new Date(NOW - 30_000).toISOString();
const STAMP_NOW = new Date(NOW).toISOString();
const LIMITS = { eniQuantity: 4, ipv4PerEni: 6 };
const VSW = { id: 'vsw-a', zoneId: 'zone-a', vpcId: 'vpc-a', free: 50, tags: {}, blocked: false };
const SG = [{ id: 'sg-a', vpcId: 'vpc-a', tags: {} }];

const eni = (n: number, over: Partial<EniFact> = {}): EniFact => ({
  id: `eni-${n}`,
  status: 'InUse',
  instanceId: 'i-node',
  vSwitchId: 'vsw-a',
  primaryIp: `192.168.0.${n}`,
  secondaryIps: [],
  ours: true,
  removing: false,
  attaching: false,
  ...over,
});
const owner = (n: number) => ({ pod: `default/p${n}`, containerID: `c${n}` });

function exclusive(
  o: Partial<PoolObservation> & { spec?: Partial<ENIPool['spec']>; status?: ENIPool['status']; enis?: EniFact[] },
): PoolObservation {
  const { enis = [], spec, ...rest } = o;
  return observation({
    now: NOW,
    limits: LIMITS,
    vSwitches: [VSW],
    securityGroups: SG,
    instanceEnis: enis.filter((e) => e.instanceId === 'i-node'),
    ownedEnis: enis.filter((e) => e.ours),
    ...rest,
    spec: { eniMode: 'Exclusive', securityGroupIDs: ['sg-a'], preAllocate: 1, releaseDelaySeconds: 0, ...spec },
  });
}
const plan = (o: PoolObservation) => planPool(o, { failures: [] });

describe('an Exclusive pool', () => {
  it('creates ENIs with no secondary address, preAllocate of them idle, within the instance type', () => {
    const p = plan(exclusive({ spec: { preAllocate: 2 } }));
    expect(p.create).toEqual([
      { vSwitchId: 'vsw-a', ips: 0 },
      { vSwitchId: 'vsw-a', ips: 0 },
    ]);
    expect(p.securityGroupIds).toEqual(['sg-a']);
    expect(p.assign).toEqual([]);
    expect(p.status.summary).toMatchObject({ available: 0, used: 0, needed: 2, podENIs: 3 });
    // More than the instance has: its three secondary ENIs, and the shortfall said.
    const all = plan(exclusive({ spec: { preAllocate: 8 } }));
    expect(all.create).toHaveLength(3);
    const full = plan(exclusive({ spec: { preAllocate: 8 }, enis: [eni(1), eni(2), eni(3)] }));
    expect(full.create).toEqual([]);
    expect(full.status.conditions.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'AtCapacity',
    });
  });

  it('keeps preAllocate idle ENIs above those pods hold, and counts ENIs on their way', () => {
    const used = { '192.168.0.1': owner(1) };
    const p = plan(exclusive({ enis: [eni(1)], status: { used } }));
    expect(p.create).toEqual([{ vSwitchId: 'vsw-a', ips: 0 }]);
    expect(p.status.summary).toMatchObject({ enis: 1, available: 1, used: 1, needed: 1 });
    // A pending pod is use to come; an ENI in flight is not created twice.
    const coming = plan(exclusive({ enis: [eni(1)], status: { used }, inFlight: { enis: 1, ips: 0 } }));
    expect(coming.create).toEqual([]);
    const pending = plan(exclusive({ enis: [eni(1)], status: { used }, pendingPods: 1 }));
    expect(pending.create).toHaveLength(2);
  });

  it('leaves ENIs of others, and ours holding secondary addresses, out of what pods may have', () => {
    const foreign = eni(7, { ours: false });
    const shared = eni(8, { secondaryIps: ['192.168.0.80'] });
    const o = exclusive({ spec: { preAllocate: 8 }, enis: [foreign, shared] });
    expect(podEniCeiling(o)).toBe(1);
    const p = plan(o);
    expect(p.create).toHaveLength(1);
    expect(p.status.summary.podENIs).toBe(1);
    expect(podEniCeiling(exclusive({ spec: { maxAllocate: 2 } }))).toBe(2);
  });

  it('gives an idle ENI back through the handshake keyed by its id, and never one a pod holds', () => {
    const used = { '192.168.0.1': owner(1) };
    const enis = [eni(1), eni(2), eni(3)];
    const requested = plan(exclusive({ enis, status: { used } }));
    // One stays idle (preAllocate 1); one of the idle two is requested, none in use.
    expect(Object.keys(requested.status.releaseRequests)).toEqual(['eni-2']);
    expect(requested.deleteEnis).toEqual([]);
    // Ready for that very request: deleted whole (detached first by the shell), and its request gone.
    const releaseRequests = { 'eni-2': STAMP };
    const ready = plan(
      exclusive({
        enis,
        status: { used, releaseRequests, releaseAcks: { 'eni-2': { answer: 'ready', requestedAt: STAMP } } },
      }),
    );
    expect(ready.deleteEnis).toEqual(['eni-2']);
    expect(ready.status.releaseRequests).toEqual({});
    expect(ready.status.eniIds).toEqual(['eni-1', 'eni-3']);
    // An answer to an earlier request is no answer.
    const stale = plan(
      exclusive({
        enis,
        status: {
          used,
          releaseRequests,
          releaseAcks: { 'eni-2': { answer: 'ready', requestedAt: new Date(NOW - 90_000).toISOString() } },
        },
      }),
    );
    expect(stale.deleteEnis).toEqual([]);
    // A pod took it meanwhile: the request is withdrawn, whatever the ack said.
    const taken = plan(
      exclusive({
        enis,
        status: {
          used: { ...used, '192.168.0.2': owner(2) },
          releaseRequests,
          releaseAcks: { 'eni-2': { answer: 'ready', requestedAt: STAMP } },
        },
      }),
    );
    expect(taken.deleteEnis).toEqual([]);
    expect(taken.status.releaseRequests).toEqual({});
  });

  it('waits for the release delay, and releases nothing in a read-only or no-release operator', () => {
    const enis = [eni(1), eni(2), eni(3)];
    const delayed = planPool(exclusive({ enis, spec: { releaseDelaySeconds: 60 } }), { failures: [] });
    expect(delayed.status.releaseRequests).toEqual({});
    expect(delayed.requeueAfterMs).toBeGreaterThan(59_000);
    for (const mode of ['read-only', 'no-release'] as const) {
      const p = plan(exclusive({ enis, mode }));
      expect(p.status.releaseRequests).toEqual({});
      expect(p.deleteEnis).toEqual([]);
    }
  });

  it('publishes its attached ENIs as room when it cannot plan, and while an attach is still being confirmed', () => {
    // What the status renders (InUse ENIs with no address) is the room: the publish check compares the two.
    const unknown = plan(exclusive({ limits: undefined, enis: [eni(1), eni(2)] }));
    expect(unknown.status.summary).toMatchObject({ enis: 2, available: 2 });
    // Unknown type: no ceiling is said, so the node's advertisement stays.
    expect(unknown.status.summary.podENIs).toBeUndefined();
    const gone = plan(exclusive({ enis: [eni(1)], unservable: { reason: 'NodeGone', message: 'gone' } }));
    expect(gone.status.summary.available).toBe(1);
    const attaching = plan(exclusive({ enis: [eni(1, { attaching: true }), eni(2)] }));
    expect(attaching.status.summary.available).toBe(2);
    expect(attaching.create).toEqual([]);
  });

  it('drains what a Shared spell left: idle addresses requested at once and unassigned on ready; one a pod holds stays', () => {
    // The class switched from Shared: an ENI of ours with three secondaries, one still a pod's.
    const leftover = eni(8, { secondaryIps: ['192.168.0.80', '192.168.0.81', '192.168.0.82'] });
    const used = { '192.168.0.82': owner(82) };
    const first = plan(exclusive({ spec: { releaseDelaySeconds: 600 }, enis: [leftover], status: { used } }));
    // The release delay does not hold these back: the demand is in ENIs now.
    expect(first.status.releaseRequests).toEqual({ '192.168.0.80': STAMP_NOW, '192.168.0.81': STAMP_NOW });
    expect(first.unassign).toEqual([]);
    expect(first.deleteEnis).toEqual([]);
    const releaseRequests = { '192.168.0.80': STAMP, '192.168.0.81': STAMP };
    const acked = plan(
      exclusive({
        spec: { releaseDelaySeconds: 600 },
        enis: [leftover],
        status: {
          used,
          releaseRequests,
          releaseAcks: {
            '192.168.0.80': { answer: 'ready', requestedAt: STAMP },
            '192.168.0.81': { answer: 'do-not-release', requestedAt: STAMP },
          },
        },
      }),
    );
    expect(acked.unassign).toEqual([{ eniId: 'eni-8', ips: ['192.168.0.80'] }]);
    // A refusal (the agent had not seen the ENI yet, say) is answered by a new request; the ENI is
    // never deleted under a pod.
    expect(acked.status.releaseRequests).toEqual({ '192.168.0.81': STAMP_NOW });
    expect(acked.deleteEnis).toEqual([]);
    // Emptied, it is an ENI a pod may take: counted as room, not created anew.
    const emptied = plan(exclusive({ enis: [eni(8)], spec: { preAllocate: 1 } }));
    expect(emptied.create).toEqual([]);
    expect(emptied.status.summary).toMatchObject({ available: 1, podENIs: 3 });
  });

  it('switched back to Shared: an ENI a pod holds whole takes no secondary address and is not deleted; a free one does take', () => {
    const used = { '192.168.0.1': owner(1) };
    const p = plan(
      exclusive({
        enis: [eni(1), eni(2)],
        status: { used },
        spec: { eniMode: 'Shared', preAllocate: 4, deleteEmptyENIs: true },
      }),
    );
    // eni-1's device is in its pod: nothing goes to it, nor is it deleted under the pod.
    expect(p.assign.map((a) => a.eniId)).not.toContain('eni-1');
    // preAllocate 4 above the one used: 5, all on eni-2.
    expect(p.assign).toEqual([{ kind: 'assign', eniId: 'eni-2', vSwitchId: 'vsw-a', count: 5 }]);
    expect(p.deleteEnis).not.toContain('eni-1');
  });

  it('never offers, requests or deletes an ENI holding IPv6 addresses of a spell before, nor unassigns a cooling leftover', () => {
    const v6 = '2408:4000::80';
    const withV6 = eni(1, { ipv6: [v6] });
    const o = exclusive({ enis: [withV6], spec: { preAllocate: 0 }, status: { used: { [v6]: owner(6) } } });
    expect(podEniCeiling(o)).toBe(2);
    const first = plan(o);
    expect(first.status.releaseRequests).toEqual({});
    expect(first.status.summary.available).toBe(0);
    const acked = plan(
      exclusive({
        enis: [withV6],
        spec: { preAllocate: 0 },
        status: {
          used: { [v6]: owner(6) },
          releaseRequests: { 'eni-1': STAMP },
          releaseAcks: { 'eni-1': { answer: 'ready', requestedAt: STAMP } },
        },
      }),
    );
    expect(acked.deleteEnis).toEqual([]);
    // A leftover address still cooling is not unassigned, whatever an ack says.
    const cooling = plan(
      exclusive({
        enis: [eni(8, { secondaryIps: ['192.168.0.80'] })],
        status: {
          cooling: { '192.168.0.80': new Date(NOW + 20_000).toISOString() },
          releaseRequests: { '192.168.0.80': STAMP },
          releaseAcks: { '192.168.0.80': { answer: 'ready', requestedAt: STAMP } },
        },
      }),
    );
    expect(cooling.unassign).toEqual([]);
  });

  it('switched back to Shared with IPv6 /80s: an ENI a pod holds whole gets no /80', () => {
    const used = { '192.168.0.1': owner(1) };
    for (const ipFamilies of [['IPv4', 'IPv6'], ['IPv6']] as const) {
      const p = plan(
        exclusive({
          enis: [eni(1), eni(2)],
          limits: { ...LIMITS, ipv6PerEni: 10 },
          vSwitches: [{ ...VSW, ipv6Cidr: '2408:4000::/64' }],
          status: { used },
          spec: { eniMode: 'Shared', ipFamilies: [...ipFamilies], ipv6Mode: 'Prefix', preAllocate: 2 },
        }),
      );
      expect(p.assignIpv6Prefixes.map((a) => a.eniId)).toEqual(['eni-2']);
    }
  });

  it('counts a parked ENI of ours that holds addresses as taking a slot when it is adopted', () => {
    const parked = eni(9, { status: 'Available', instanceId: undefined, secondaryIps: ['192.168.0.90'] });
    const p = plan(exclusive({ enis: [parked], spec: { preAllocate: 3 } }));
    expect(p.adopt).toEqual([{ eniId: 'eni-9', alreadyAttaching: false }]);
    // Three secondary slots: the adopted ENI takes one, two are created.
    expect(p.create).toHaveLength(2);
  });

  // Random nodes: ENIs ours or not, attached or on their way, held by pods or cooling, with
  // requests and acks, old and current.
  const eniArb = fc.record({
    ours: fc.boolean(),
    status: fc.constantFrom('InUse', 'InUse', 'InUse', 'Attaching'),
    removing: fc.boolean(),
    secondary: fc.boolean(),
    secondaryUsed: fc.boolean(),
    used: fc.boolean(),
    cooling: fc.boolean(),
    requested: fc.boolean(),
    ack: fc.constantFrom(undefined, 'ready', 'do-not-release', 'stale'),
  });
  const caseArb = fc.record({
    enis: fc.array(eniArb, { maxLength: 6 }),
    eniQuantity: fc.integer({ min: 1, max: 6 }),
    preAllocate: fc.nat(4),
    minAllocate: fc.nat(4),
    maxAllocate: fc.nat(5),
    pendingPods: fc.nat(3),
    inFlight: fc.nat(2),
    parked: fc.nat(2),
  });
  it('never plans more ENIs than the instance holds, nor releases or requests an ENI a pod holds or cools', () => {
    fc.assert(
      fc.property(caseArb, (k) => {
        // No more ENIs attached than the instance type holds.
        const enis = k.enis.slice(0, Math.max(0, k.eniQuantity - 1)).map((x, i) =>
          eni(i + 1, {
            ours: x.ours,
            status: x.status,
            removing: x.removing,
            secondaryIps: x.secondary ? [`192.168.1.${i}`] : [],
          }),
        );
        const used = Object.fromEntries(
          k.enis.flatMap((x, i) => [
            ...(x.used && i < enis.length ? [[enis[i]!.primaryIp, owner(i)]] : []),
            // A pod of the Shared spell on a leftover address.
            ...(x.secondaryUsed && i < enis.length && enis[i]!.secondaryIps.length
              ? [[enis[i]!.secondaryIps[0]!, owner(100 + i)]]
              : []),
          ]),
        );
        const cooling = Object.fromEntries(
          k.enis.flatMap((x, i) =>
            x.cooling && i < enis.length ? [[enis[i]!.primaryIp, new Date(NOW + 5000).toISOString()]] : [],
          ),
        );
        // Requests and acks name the ENI, and its leftover address too where it has one.
        const keysOf = (i: number) => [enis[i]!.id, ...enis[i]!.secondaryIps];
        const releaseRequests = Object.fromEntries(
          k.enis.flatMap((x, i) => (x.requested && i < enis.length ? keysOf(i).map((key) => [key, STAMP]) : [])),
        );
        const releaseAcks = Object.fromEntries(
          k.enis.flatMap((x, i) =>
            x.ack && i < enis.length
              ? keysOf(i).map((key) => [
                  key,
                  {
                    answer: x.ack === 'stale' ? ('ready' as const) : x.ack!,
                    requestedAt: x.ack === 'stale' ? new Date(NOW - 90_000).toISOString() : STAMP,
                  },
                ])
              : [],
          ),
        );
        const inFlight = Math.min(k.inFlight, Math.max(0, k.eniQuantity - 1 - enis.length));
        // Ours parked (created, not attached): adopted, each takes a slot, with addresses or without.
        const parked = Array.from(
          { length: Math.min(k.parked, Math.max(0, k.eniQuantity - 1 - enis.length - inFlight)) },
          (_, i) =>
            eni(50 + i, { status: 'Available', instanceId: undefined, secondaryIps: i % 2 ? ['192.168.2.1'] : [] }),
        );
        const o = exclusive({
          enis: [...enis, ...parked],
          limits: { eniQuantity: k.eniQuantity, ipv4PerEni: 6 },
          pendingPods: k.pendingPods,
          inFlight: { enis: inFlight, ips: 0 },
          spec: {
            preAllocate: k.preAllocate,
            minAllocate: Math.min(k.minAllocate, k.maxAllocate || k.minAllocate),
            maxAllocate: k.maxAllocate,
          },
          status: { used, cooling, releaseRequests, releaseAcks },
        });
        const p = plan(o);
        // Within the instance: what is attached, on its way and created now fits its secondary ENIs.
        expect(enis.length + inFlight + parked.length + p.create.length).toBeLessThanOrEqual(
          Math.max(0, k.eniQuantity - 1),
        );
        // Nor above maxAllocate, counting only ENIs pods may take.
        if (k.maxAllocate > 0) {
          const offered = enis.filter((e) => e.ours && !e.removing && !e.secondaryIps.length).length;
          if (p.create.length)
            expect(offered - p.deleteEnis.length + inFlight + p.create.length).toBeLessThanOrEqual(k.maxAllocate);
        }
        const held = new Set(enis.filter((e) => e.primaryIp in used || e.primaryIp in cooling).map((e) => e.id));
        for (const id of p.deleteEnis) {
          expect(held.has(id)).toBe(false);
          // Deleted only on a ready answering its current request.
          expect(releaseAcks[id]).toEqual({ answer: 'ready', requestedAt: STAMP });
          expect(releaseRequests[id]).toBe(STAMP);
        }
        for (const id of Object.keys(p.status.releaseRequests)) {
          // Never a new request for an ENI a pod holds or cools; none left standing for one a pod holds.
          if (!(id in releaseRequests)) expect(held.has(id)).toBe(false);
          const e = enis.find((x) => x.id === id);
          if (e) expect(e.primaryIp in used).toBe(false);
        }
        for (const e of enis.filter((x) => !x.ours || x.secondaryIps.length)) expect(p.deleteEnis).not.toContain(e.id);
        // Leftover addresses: never one a pod holds requested or unassigned; unassigned only on a
        // ready answering its current request, and only ours.
        for (const ip of Object.keys(p.status.releaseRequests))
          expect(ip in used && !(ip in releaseRequests)).toBe(false);
        for (const u of p.unassign) {
          expect(enis.find((e) => e.id === u.eniId)?.ours).toBe(true);
          for (const ip of u.ips) {
            expect(ip in used).toBe(false);
            expect(releaseAcks[ip]).toEqual({ answer: 'ready', requestedAt: STAMP });
            expect(releaseRequests[ip]).toBe(STAMP);
          }
        }
        expect(p.assign).toEqual([]);
      }),
      { numRuns: 500 },
    );
  });
});
