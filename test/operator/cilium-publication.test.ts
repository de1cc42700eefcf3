import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { ENIPool } from '../../src/api/types.js';
import { omitEmpty, sameForAgent } from '../../src/operator/cilium/omit-empty.js';
import {
  ciliumEni,
  ciliumPool,
  newReadyAnswer,
  ciliumStatus,
  poolAgentPatch,
  releaseStates,
  unservableByCilium,
} from '../../src/operator/cilium/publication.js';
import { ciliumSpecFields } from '../../src/operator/cilium/node-spec.js';
import { VSW, eniFixture } from '../helpers/cilium-fixtures.js';
import type { AllocationMap, CiliumNode, ReleaseState } from '../../src/operator/cilium/types.js';

const vsw = VSW;
const eni = (id: string, deviceIndex: number | undefined, ips: string[], type = 'Secondary') =>
  eniFixture(id, deviceIndex, ips, { type });
const poolOf = (enis: Array<{ id: string; ips: string[]; state?: string }>, extra: Partial<ENIPool['status']> = {}) =>
  ({
    metadata: { name: 'n' },
    spec: { nodeName: 'n' },
    status: { enis: enis.map((e) => ({ id: e.id, state: e.state ?? 'InUse', ips: e.ips })), ...extra },
  }) as unknown as ENIPool;
const nodeOf = (o: Partial<CiliumNode['spec']> = {}, status: CiliumNode['status'] = {}): CiliumNode => ({
  metadata: { name: 'n' },
  spec: { 'instance-id': 'i-1', 'alibaba-cloud': { 'cidr-block': '10.0.0.0/8' }, ...o },
  status,
});

describe('CiliumNode publication', () => {
  it('lists every attached ENI with a unique index, the primary at 0, before any of its addresses is pooled', () => {
    const node = nodeOf();
    const pool = poolOf([{ id: 'eni-2', ips: ['10.1.2.11'] }]);
    const status = ciliumStatus({
      node,
      pool,
      instanceEnis: [eni('eni-1', 0, [], 'Primary'), eni('eni-2', 1, ['10.1.2.11']), eni('eni-3', undefined, [])],
      vSwitches: [vsw],
    });
    const enis = status['alibaba-cloud']!.enis!;
    expect(Object.keys(enis).sort()).toEqual(['eni-1', 'eni-2']);
    expect(enis['eni-1']!.tags['cilium-eni-index']).toBe('0');
    expect(enis['eni-2']!).toMatchObject({
      'network-interface-id': 'eni-2',
      type: 'Secondary',
      vswitch: { 'vswitch-id': 'vsw-1', cidr: '10.1.2.0/24' },
      vpc: { 'vpc-id': 'vpc-1', cidr: '10.0.0.0/8' },
      tags: { 'cilium-eni-index': '1' },
    });
    // The pool as read had no status yet: nothing is pooled before the status is written.
    expect(ciliumPool(node, pool)).toEqual({});
    expect(ciliumPool({ ...node, status }, pool)).toEqual({ '10.1.2.11': { resource: 'eni-2' } });
  });

  it('marks a requested address once, keeps the answer, and says released once it is unassigned', () => {
    const inPool = { ipam: { pool: { '10.1.2.11': { resource: 'eni-2' } } } };
    const requested = poolOf([{ id: 'eni-2', ips: ['10.1.2.11'] }], { releaseRequests: { '10.1.2.11': 't1' } });
    expect(releaseStates(nodeOf(inPool), requested)).toEqual({ '10.1.2.11': 'marked-for-release' });
    for (const answer of ['ready-for-release', 'do-not-release'] as const) {
      // A refusal comes with the address in used (the agent writes both at once).
      const used: AllocationMap =
        answer === 'do-not-release' ? { '10.1.2.11': { owner: 'ns/p', resource: 'eni-2' } } : {};
      const answered = nodeOf(inPool, { ipam: { used, 'release-ips': { '10.1.2.11': answer } } });
      expect(releaseStates(answered, requested)).toEqual({ '10.1.2.11': answer });
    }
    const ready = nodeOf(inPool, { ipam: { 'release-ips': { '10.1.2.11': 'ready-for-release' } } });
    // Unassigned: no longer published, no longer requested.
    expect(releaseStates(ready, poolOf([{ id: 'eni-2', ips: [] }]))).toEqual({ '10.1.2.11': 'released' });
    // Withdrawn: still published, no longer requested.
    expect(releaseStates(ready, poolOf([{ id: 'eni-2', ips: ['10.1.2.11'] }]))).toEqual({});
  });

  it('acks ready only from a live read, and never for an address the agent says is used', () => {
    const requested = poolOf([{ id: 'eni-2', ips: ['10.1.2.11'] }], { releaseRequests: { '10.1.2.11': 't1' } });
    const ready = nodeOf({}, { ipam: { 'release-ips': { '10.1.2.11': 'ready-for-release' } } });
    expect(poolAgentPatch(ready, requested, { live: false })).toBeUndefined();
    expect(poolAgentPatch(ready, requested, { live: true })).toEqual({
      releaseAcks: { '10.1.2.11': { answer: 'ready', requestedAt: 't1' } },
    });
    const used = nodeOf(
      {},
      {
        ipam: {
          used: { '10.1.2.11': { owner: 'ns/p', resource: 'eni-2' } },
          'release-ips': { '10.1.2.11': 'ready-for-release' },
        },
      },
    );
    expect(poolAgentPatch(used, requested, { live: true })).toEqual({ used: { '10.1.2.11': { pod: 'ns/p' } } });
  });

  it('never drops a used or handshaking address from the pool, nor pools one whose ENI is not listed', () => {
    const ip = fc.integer({ min: 2, max: 30 }).map((n) => `10.1.2.${n}`);
    const state = fc.constantFrom<ReleaseState | undefined>(
      undefined,
      'marked-for-release',
      'ready-for-release',
      'do-not-release',
      'released',
    );
    fc.assert(
      fc.property(
        fc.uniqueArray(ip, { maxLength: 12 }),
        fc.array(fc.tuple(ip, state), { maxLength: 12 }),
        fc.array(ip, { maxLength: 6 }),
        fc.array(ip, { maxLength: 12 }),
        fc.boolean(),
        (published, states, used, before, listed) => {
          const releaseIps = Object.fromEntries(states.filter(([, s]) => s !== undefined)) as Record<
            string,
            ReleaseState
          >;
          const node = nodeOf(
            { ipam: { pool: Object.fromEntries(before.map((a) => [a, { resource: 'eni-2' }])) } },
            {
              'alibaba-cloud': listed
                ? { enis: { 'eni-2': { 'network-interface-id': 'eni-2', vswitch: { cidr: '10.1.2.0/24' } } as never } }
                : { enis: {} },
              ipam: {
                used: Object.fromEntries(used.map((a) => [a, { owner: 'ns/p', resource: 'eni-2' }])),
                'release-ips': releaseIps,
              },
            },
          );
          const out = ciliumPool(node, poolOf([{ id: 'eni-2', ips: published }]));
          for (const a of before) {
            const handshaking = releaseIps[a] !== undefined && releaseIps[a] !== 'released';
            if (used.includes(a) || handshaking) expect(out[a]).toBeDefined();
          }
          for (const a of Object.keys(out))
            if (!before.includes(a)) {
              expect(listed).toBe(true);
              expect(releaseIps[a]).not.toBe('released');
            }
        },
      ),
    );
  });

  it('takes the agent\u2019s non-zero sizing and non-empty placement over the class, and nothing else', () => {
    const node = nodeOf({
      'alibaba-cloud': { 'instance-type': 'ecs.g7.large', vswitches: [], 'security-groups': ['sg-9'] },
      ipam: { 'pre-allocate': 0, 'min-allocate': 4 },
    });
    expect(ciliumSpecFields(node)).toEqual({
      instanceID: 'i-1',
      instanceType: 'ecs.g7.large',
      minAllocate: 4,
      securityGroupIDs: ['sg-9'],
    });
    expect(ciliumSpecFields(undefined)).toEqual({});
  });

  it('says which pools cilium-agents cannot use', () => {
    const spec = { nodeName: 'n', className: 'c' } as ENIPool['spec'];
    expect(unservableByCilium(spec)).toBeUndefined();
    expect(unservableByCilium({ ...spec, usePrimaryENI: true })).toContain('usePrimaryENI');
    expect(unservableByCilium({ ...spec, eniMode: 'Exclusive' })).toContain('eniMode Exclusive');
    expect(unservableByCilium({ ...spec, ipv4Mode: 'Prefix' })).toContain('ipv4Mode Prefix');
    expect(unservableByCilium({ ...spec, ipFamilies: ['IPv4', 'IPv6'] })).toContain('IPv6');
  });

  const ip = '10.1.2.11';
  const inPool = { ipam: { pool: { [ip]: { resource: 'eni-2' } } } };
  const used = { [ip]: { owner: 'ns/p', resource: 'eni-2' } };
  const listedEni = ciliumEni(eni('eni-2', 1, [ip]), [vsw]);

  it('withdraws a refusal once the address is free, and asks afresh on a later write, not the same one', () => {
    // The planner withdrew the refused request and asked again for the freed address at once.
    const again = poolOf([{ id: 'eni-2', ips: [ip] }], {
      releaseRequests: { [ip]: 't2' },
      releaseAcks: { [ip]: { answer: 'do-not-release', requestedAt: 't1' } },
    });
    const refusedInUse = nodeOf(inPool, { ipam: { used, 'release-ips': { [ip]: 'do-not-release' } } });
    expect(releaseStates(refusedInUse, again)).toEqual({ [ip]: 'do-not-release' });
    const refusedFree = nodeOf(inPool, { ipam: { 'release-ips': { [ip]: 'do-not-release' } } });
    expect(releaseStates(refusedFree, again)).toEqual({});
    expect(poolAgentPatch(nodeOf(inPool, {}), again, { live: false })).toEqual({ releaseAcks: { [ip]: null } });
    expect(releaseStates(nodeOf(inPool, {}), again)).toEqual({ [ip]: 'marked-for-release' });
  });

  it('keeps an address confirmed free on a CiliumNode made anew out of its pool, and the confirmation with it', () => {
    const confirmed = poolOf([{ id: 'eni-2', ips: [ip, '10.1.2.12'] }], {
      releaseRequests: { [ip]: 't1' },
      releaseAcks: { [ip]: { answer: 'ready', requestedAt: 't1' } },
    });
    const fresh = nodeOf({}, { 'alibaba-cloud': { enis: { 'eni-2': listedEni } } });
    expect(ciliumPool(fresh, confirmed)).toEqual({ '10.1.2.12': { resource: 'eni-2' } });
    expect(poolAgentPatch(fresh, confirmed, { live: true })).toBeUndefined();
    // Once the pool reconciler gave the request up, the address is the agent's to use again.
    const withdrawn = poolOf([{ id: 'eni-2', ips: [ip, '10.1.2.12'] }]);
    expect(Object.keys(ciliumPool(fresh, withdrawn)).sort()).toEqual([ip, '10.1.2.12']);
    // In the agent's pool with no entry, the old answer holds nothing: it is withdrawn.
    const held = nodeOf(inPool, { 'alibaba-cloud': { enis: { 'eni-2': listedEni } } });
    expect(poolAgentPatch(held, confirmed, { live: true })).toEqual({ releaseAcks: { [ip]: null } });
  });

  it('pools no address of an ENI whose vSwitch CIDR is unknown (the agent would have no gateway)', () => {
    const unknown = ciliumEni(eni('eni-2', 1, [ip]), []);
    expect(unknown.vswitch.cidr).toBe('');
    const node = nodeOf({}, { 'alibaba-cloud': { enis: { 'eni-2': unknown } } });
    expect(ciliumPool(node, poolOf([{ id: 'eni-2', ips: [ip] }]))).toEqual({});
  });

  it('writes the status as the agent writes it back, so an agent write is no reason to write again', () => {
    const pool = poolOf([{ id: 'eni-2', ips: [ip] }]);
    const input = { pool, instanceEnis: [eni('eni-1', 0, [], 'Primary'), eni('eni-2', 1, [ip])], vSwitches: [vsw] };
    const status = ciliumStatus({ node: nodeOf(), ...input });
    expect(status.ipam).toEqual({});
    expect(status['alibaba-cloud']!.enis!['eni-2']!['private-ipsets']).toEqual([
      { 'private-ip-address': '10.1.2.101', primary: true },
      { 'private-ip-address': ip },
    ]);
    // A Go agent drops every empty and false field it sends back (omitempty).
    const echoed = omitEmpty({ ...status, ipam: { used: {}, 'release-ips': {} } });
    expect(echoed.ipam).toBeUndefined();
    expect(sameForAgent(ciliumStatus({ node: nodeOf({}, echoed), ...input }), echoed)).toBe(true);
    expect(sameForAgent(status, { ...status, ipam: { 'release-ips': { [ip]: 'released' } } })).toBe(false);
  });

  it('says on the node why its pool is Degraded, and nothing once it is not', () => {
    const degraded = poolOf([{ id: 'eni-2', ips: [ip] }], {
      conditions: [
        { type: 'Degraded', status: 'True', reason: 'VSwitchExhausted', message: 'vsw-1 has no address left' },
      ],
    } as Partial<ENIPool['status']>);
    const input = { instanceEnis: [eni('eni-2', 1, [ip])], vSwitches: [vsw] };
    const said = ciliumStatus({ node: nodeOf(), pool: degraded, ...input });
    expect(said.ipam?.['operator-status']).toEqual({ error: 'VSwitchExhausted: vsw-1 has no address left' });
    const healthy = poolOf([{ id: 'eni-2', ips: [ip] }]);
    expect(ciliumStatus({ node: nodeOf({}, said), pool: healthy, ...input }).ipam?.['operator-status']).toBeUndefined();
  });

  it('answers for the agent an address it was never offered (its ENI attached without a device index): free on a live read', () => {
    // eni-3 never reached the agent (its status does not list it: no device index): the planner asks for its addresses first.
    const asked = poolOf(
      [
        { id: 'eni-2', ips: [ip] },
        { id: 'eni-3', ips: ['10.1.2.21', '10.1.2.22'] },
      ],
      { releaseRequests: { '10.1.2.21': 't1', '10.1.2.22': 't1' } },
    );
    const node = nodeOf(inPool, { 'alibaba-cloud': { enis: { 'eni-2': listedEni } } });
    const unindexed = new Set(['eni-3']);
    expect(releaseStates(node, asked)).toEqual({});
    expect(newReadyAnswer(node, asked, unindexed)).toBe(true);
    expect(poolAgentPatch(node, asked, { live: false, unindexed })).toBeUndefined();
    const ready = { answer: 'ready', requestedAt: 't1' };
    expect(poolAgentPatch(node, asked, { live: true, unindexed })).toEqual({
      releaseAcks: { '10.1.2.21': ready, '10.1.2.22': ready },
    });
    // An ENI the status merely does not list (a CiliumNode made anew, a cold cache) may carry
    // addresses a running agent holds: only the agent answers for them.
    expect(newReadyAnswer(node, asked)).toBe(false);
    expect(poolAgentPatch(node, asked, { live: true })).toBeUndefined();
    // Once its ENI is listed, an address may have reached the agent: only the agent answers for it.
    const both = nodeOf(inPool, {
      'alibaba-cloud': { enis: { 'eni-2': listedEni, 'eni-3': ciliumEni(eni('eni-3', 2, ['10.1.2.21']), [vsw]) } },
    });
    expect(newReadyAnswer(both, asked, unindexed)).toBe(false);
    expect(poolAgentPatch(both, asked, { live: true, unindexed })).toBeUndefined();
    // Confirmed free while it was never offered, it is not offered now: it may go at any moment.
    const confirmed = { ...asked, status: { ...asked.status!, releaseAcks: { '10.1.2.21': ready } } } as ENIPool;
    expect(Object.keys(ciliumPool(both, confirmed)).sort()).toEqual([ip, '10.1.2.22']);
  });

  it('keeps an ENI’s vSwitch CIDR and its free addresses offered when the vSwitch list leaves it out', () => {
    const pool = poolOf([{ id: 'eni-2', ips: [ip, '10.1.2.12'] }]);
    const instanceEnis = [eni('eni-2', 1, [ip, '10.1.2.12'])];
    const offered = { ipam: { pool: { [ip]: { resource: 'eni-2' }, '10.1.2.12': { resource: 'eni-2' } } } };
    const first = ciliumStatus({ node: nodeOf(offered), pool, instanceEnis, vSwitches: [vsw] });
    const node = nodeOf(offered, first);
    const blind = ciliumStatus({ node, pool, instanceEnis, vSwitches: [] });
    expect(blind['alibaba-cloud']!.enis!['eni-2']!.vswitch.cidr).toBe('10.1.2.0/24');
    expect(Object.keys(ciliumPool(nodeOf(offered, blind), pool)).sort()).toEqual([ip, '10.1.2.12']);
    // And an offered address stays while the pool publishes it, whatever the status says of its ENI.
    expect(Object.keys(ciliumPool(nodeOf(offered, {}), pool)).sort()).toEqual([ip, '10.1.2.12']);
  });
});
