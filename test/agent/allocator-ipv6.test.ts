import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPool } from '../../src/api/types.js';
import {
  agentStatus,
  allocate,
  emptyState,
  recoverAllocations,
  release,
  type AgentState,
} from '../../src/agent/allocator.js';
import { ipv6Pool } from './ipv6-pool.js';

/*
 * The agent in pools with IPv6: a dual-stack interface takes one address of each family from one
 * ENI, or nothing; an IPv6-only one takes an IPv6 address; both survive a lost state file.
 */
const v4 = (n: number) => `30.0.16.${n}`; // a VPC CIDR that sorts after IPv6 addresses, as keys do
const v6 = (n: number) => `2408:4005:3c0:a100::${(0x100 + n).toString(16)}`;

const pool = (families: Array<'IPv4' | 'IPv6'>, enis: Array<{ ips: string[]; ipv6s: string[] }>) =>
  ipv6Pool({ ipFamilies: families }, enis);

const add = (state: AgentState, p: ENIPool, c: string) =>
  allocate(state, p, { containerId: c, ifName: 'eth0', pod: `default/${c}` }, 0);

describe('agent allocation with IPv6', () => {
  it('dual-stack: gives an interface both addresses from one ENI, skipping an ENI without a free IPv6 one', () => {
    // eni-0 has IPv4 but its only IPv6 address is taken below; eni-1 has both.
    const p = pool(
      ['IPv4', 'IPv6'],
      [
        { ips: [v4(1), v4(2)], ipv6s: [v6(1)] },
        { ips: [v4(3)], ipv6s: [v6(3)] },
      ],
    );
    const first = add(emptyState(), p, 'c1');
    if ('error' in first) throw new Error('pool empty');
    expect(first.lease).toMatchObject({
      ip: v4(1),
      eniId: 'eni-0',
      ipv6: { ip: v6(1), prefixLength: 64, gateway: 'fe80::1' },
    });
    const second = add(first.state, p, 'c2');
    if ('error' in second) throw new Error('pool empty');
    expect(second.lease).toMatchObject({ ip: v4(3), eniId: 'eni-1', ipv6: { ip: v6(3) } });
    // No ENI has a pair left: nothing, rather than half.
    expect(add(second.state, p, 'c3')).toMatchObject({ error: 'pool-empty' });
    const gone = release(second.state, 'c1', 'eth0', 0, 1000);
    expect(gone.released.sort()).toEqual([v4(1), v6(1)].sort());
  });

  it('dual-stack: after a lost state file, the same interface gets the same pair back, and a DEL frees both', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4 }), fc.boolean(), (pods, fromPods) => {
        const p = pool(['IPv4', 'IPv6'], [{ ips: [1, 2, 3, 4].map(v4), ipv6s: [1, 2, 3, 4].map(v6) }]);
        let state = emptyState();
        const leases = [];
        for (let k = 0; k < pods; k++) {
          const r = add(state, p, `c${k}`);
          if ('error' in r) throw new Error('pool empty');
          state = r.state;
          leases.push(r.lease);
        }
        // What the agent reported (keys sorted, as the API server keeps them), or only what the pods say.
        const used = Object.fromEntries(
          Object.entries(agentStatus(state, p, 0).used).sort(([a], [b]) => (a < b ? -1 : 1)),
        );
        const reported = { ...p, status: { ...p.status, used: fromPods ? {} : used } };
        const onNode = leases.map((l, k) => ({
          pod: `default/c${k}`,
          podIP: l.ip,
          interfaces: { [l.ip]: 'eth0', [l.ipv6!.ip]: 'eth0' },
        }));
        const back = recoverAllocations(emptyState(), reported, onNode, 0).state;
        for (const [k, l] of leases.entries()) {
          const containerId = fromPods ? `pod:default/c${k}` : `c${k}`;
          const again = allocate(back, reported, { containerId, ifName: 'eth0', pod: `default/c${k}` }, 0);
          if ('error' in again) throw new Error('pool empty');
          expect(again.lease.ip).toBe(l.ip);
          expect(again.lease.ipv6?.ip).toBe(l.ipv6!.ip);
          expect(release(back, containerId, 'eth0', 0, 1000).released.sort()).toEqual([l.ip, l.ipv6!.ip].sort());
        }
      }),
      { numRuns: 100 },
    );
  });

  it('a pool that stopped being dual-stack recovers an interface’s pair as a pair, and a DEL frees both', () => {
    const dual = pool(['IPv4', 'IPv6'], [{ ips: [v4(5)], ipv6s: [v6(5)] }]);
    const r = add(emptyState(), dual, 'c1');
    if ('error' in r) throw new Error('pool empty');
    const used = Object.fromEntries(
      Object.entries(agentStatus(r.state, dual, 0).used).sort(([a], [b]) => (a < b ? -1 : 1)),
    );
    const now4 = pool(['IPv4'], [{ ips: [v4(5)], ipv6s: [v6(5)] }]);
    const back = recoverAllocations(emptyState(), { ...now4, status: { ...now4.status, used } }, [], 0).state;
    const again = add(back, now4, 'c1');
    if ('error' in again) throw new Error('pool empty');
    expect(again.lease.ip).toBe(v4(5));
    expect(release(back, 'c1', 'eth0', 0, 1000).released.sort()).toEqual([v4(5), v6(5)].sort());
  });

  it('IPv6-only: gives an interface one IPv6 address and never an IPv4 one', () => {
    const p = pool(['IPv6'], [{ ips: [], ipv6s: [v6(1), v6(2)] }]);
    const r = add(emptyState(), p, 'c1');
    if ('error' in r) throw new Error('pool empty');
    expect(r.lease).toMatchObject({ ip: v6(1), prefixLength: 64, gateway: 'fe80::1', eniId: 'eni-0' });
    expect(r.lease.ipv6).toBeUndefined();
  });
});
