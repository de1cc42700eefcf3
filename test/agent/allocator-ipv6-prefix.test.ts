import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPool } from '../../src/api/types.js';
import {
  agentStatus,
  allocate,
  emptyState,
  recoverAllocations,
  release,
  strayAllocations,
  type AgentState,
} from '../../src/agent/allocator.js';
import { inIpv6Prefix } from '../../src/ipam/ipv6-prefix.js';
import { ipv6Pool } from './ipv6-pool.js';

/*
 * The agent in a dual-stack pool of /80 prefixes (ipv6Mode Prefix): a pod interface takes an
 * IPv4 address and an IPv6 address of the same ENI's /80, never one twice, never one cooling down;
 * a release request for a /80 is answered for all its addresses at once.
 */
const v4 = (n: number) => `30.0.16.${n}`;
const PREFIX = ['2408:4005:3c0:a100:1::/80', '2408:4005:3c0:a100:2::/80'];

const pool = (
  enis: Array<{ ips: string[]; ipv6Prefixes?: string[]; ipv6s?: string[] }>,
  status: Partial<NonNullable<ENIPool['status']>> = {},
) => ipv6Pool({ ipFamilies: ['IPv4', 'IPv6'], ipv6Mode: 'Prefix' }, enis, status);

const add = (state: AgentState, p: ENIPool, c: string, now = 0) =>
  allocate(state, p, { containerId: c, ifName: 'eth0', pod: `default/${c}` }, now);

describe('agent allocation from IPv6 /80 prefixes', () => {
  it('gives each interface an IPv4 address and an IPv6 address of the same ENI’s /80', () => {
    const p = pool([
      { ips: [v4(1), v4(2)], ipv6Prefixes: [PREFIX[0]!] },
      { ips: [v4(3)], ipv6Prefixes: [PREFIX[1]!] },
    ]);
    let state = emptyState();
    const leases = [];
    for (const c of ['c1', 'c2', 'c3']) {
      const r = add(state, p, c);
      if ('error' in r) throw new Error('pool empty');
      state = r.state;
      leases.push(r.lease);
    }
    expect(leases.map((l) => l.ipv6?.ip)).toEqual([
      '2408:4005:3c0:a100:1::1',
      '2408:4005:3c0:a100:1::2',
      '2408:4005:3c0:a100:2::1',
    ]);
    for (const l of leases) expect(inIpv6Prefix(l.ipv6!.ip, PREFIX[Number(l.eniId.slice(-1))]!)).toBe(true);
    expect(leases[0]!.ipv6).toMatchObject({ prefixLength: 64, gateway: 'fe80::1' });
    // The IPv4 addresses run out first: then nothing, rather than half.
    expect(add(state, p, 'c4')).toMatchObject({ error: 'pool-empty' });
    // The same interface asks again: the same pair.
    const again = add(state, p, 'c1');
    if ('error' in again) throw new Error('pool empty');
    expect(again.lease.ipv6?.ip).toBe('2408:4005:3c0:a100:1::1');
    expect(strayAllocations(state, p)).toEqual([]);
  });

  it('trusts no malformed prefix in the status: the other ENIs still serve', () => {
    const p = pool([
      { ips: [v4(1)], ipv6Prefixes: ['bogus'] },
      { ips: [v4(2)], ipv6Prefixes: [PREFIX[1]!] },
    ]);
    const r = add(emptyState(), p, 'c1');
    if ('error' in r) throw new Error('pool empty');
    expect(r.lease).toMatchObject({ ip: v4(2), eniId: 'eni-1', ipv6: { ip: '2408:4005:3c0:a100:2::1' } });
  });

  it('hands out no IPv6 address that cools down, and none of a /80 requested for release', () => {
    const p = pool([{ ips: [v4(1), v4(2)], ipv6Prefixes: [PREFIX[0]!] }]);
    const first = add(emptyState(), p, 'c1');
    if ('error' in first) throw new Error('pool empty');
    const gone = release(first.state, 'c1', 'eth0', 0, 10_000);
    expect(gone.released).toContain('2408:4005:3c0:a100:1::1');
    const next = add(gone.state, p, 'c2', 1000);
    if ('error' in next) throw new Error('pool empty');
    expect(next.lease.ipv6?.ip).toBe('2408:4005:3c0:a100:1::2');
    const requested = pool([{ ips: [v4(1), v4(2)], ipv6Prefixes: [PREFIX[0]!] }], {
      releaseRequests: { [PREFIX[0]!]: '2026-01-01T00:00:00.000Z' },
    });
    expect(add(emptyState(), requested, 'c3')).toMatchObject({ error: 'pool-empty' });
  });

  it('answers a request for a /80 for all its addresses at once', () => {
    const at = '2026-01-01T00:00:00.000Z';
    const p = pool([{ ips: [v4(1)], ipv6Prefixes: [PREFIX[0]!] }], {
      releaseRequests: { [PREFIX[0]!]: at, [PREFIX[1]!]: at },
    });
    // Free: ready. Another's prefix (not on this pool's ENIs): not this agent's to give.
    expect(agentStatus(emptyState(), p, 0).releaseAcks).toEqual({
      [PREFIX[0]!]: { answer: 'ready', requestedAt: at },
      [PREFIX[1]!]: { answer: 'do-not-release', requestedAt: at },
    });
    // A pod holds an address of it: refused.
    const held: AgentState = {
      allocations: {
        'c1/eth0/ipv6': {
          ip: '2408:4005:3c0:a100:1::7',
          pod: 'default/c1',
          containerId: 'c1',
          ifName: 'eth0',
          eniId: 'eni-0',
          allocatedAt: 0,
        },
      },
      cooling: {},
    };
    expect(agentStatus(held, p, 0).releaseAcks[PREFIX[0]!]?.answer).toBe('do-not-release');
    // One cools down: no answer yet.
    const cooling: AgentState = { allocations: {}, cooling: { '2408:4005:3c0:a100:1::7': 5000 } };
    expect(agentStatus(cooling, p, 0).releaseAcks[PREFIX[0]!]).toBeUndefined();
    expect(agentStatus(cooling, p, 6000).releaseAcks[PREFIX[0]!]?.answer).toBe('ready');
  });

  it('takes a pod’s address of a /80 back after a lost state file, on the right ENI', () => {
    const p = pool([{ ips: [v4(1), v4(2)], ipv6Prefixes: [PREFIX[0]!] }], {
      used: {
        [v4(1)]: { pod: 'default/a', containerID: 'c1', ifName: 'eth0' },
        '2408:4005:3c0:a100:1::1': { pod: 'default/a', containerID: 'c1', ifName: 'eth0' },
      },
    });
    const { state, recovered } = recoverAllocations(emptyState(), p, [], 0);
    expect(recovered.map((a) => a.eniId)).toEqual(['eni-0', 'eni-0']);
    const next = add(state, p, 'c2');
    if ('error' in next) throw new Error('pool empty');
    expect(next.lease).toMatchObject({ ip: v4(2), ipv6: { ip: '2408:4005:3c0:a100:1::2' } });
  });

  it('property: over any run of ADDs and DELs, no address is held twice and every IPv6 one is of its IPv4 one’s ENI', () => {
    const p = pool([
      { ips: [v4(1), v4(2), v4(3)], ipv6Prefixes: [PREFIX[0]!] },
      { ips: [v4(4), v4(5)], ipv6Prefixes: [PREFIX[1]!] },
    ]);
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 6 })), { maxLength: 40 }), (steps) => {
        let state = emptyState();
        let now = 0;
        for (const [adding, c] of steps) {
          now += 500;
          if (adding) {
            const r = add(state, p, `c${c}`, now);
            if ('error' in r) continue;
            state = r.state;
          } else state = release(state, `c${c}`, 'eth0', now, 2000).state;
          const ips = Object.values(state.allocations).map((a) => a.ip);
          expect(new Set(ips).size).toBe(ips.length);
          for (const a of Object.values(state.allocations))
            if (a.ip.includes(':')) expect(inIpv6Prefix(a.ip, PREFIX[Number(a.eniId.slice(-1))]!)).toBe(true);
          for (const ip of ips) expect(state.cooling[ip] ?? 0).toBeLessThanOrEqual(now);
        }
      }),
      { numRuns: 300 },
    );
  });
});
