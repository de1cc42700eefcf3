/*
 * IPv6 /80 prefixes through the real reconciler and teardown over fakes (defects found by review):
 * a pool whose ENIs hold a /80 lets go when deleted; an IPv6-only pool with a /80 left from a
 * dual-stack class publishes and gives the leftovers back (no loop on its publish check); a
 * dual-stack pool withdraws a /80 request left from a spell without IPv6.
 */
import { describe, expect, it } from '@jest/globals';
import type { ENIPool, ENIPoolStatus } from '../../src/api/types.js';
import { agentStatus, emptyState } from '../../src/agent/allocator.js';
import { FINALIZER } from '../../src/operator/config.js';
import { NODE, TYPE, eni, fixture, ipsOf, vSwitch } from './fakes.js';

const PFX = '2408:4005:3c0:a100:1::/80';
const CIDR6 = '2408:4005:3c0:a100::/64';
const in80 = (n: number) => `2408:4005:3c0:a100:1::${n}`;
const single = (n: number) => `2408:4005:3c0:a100::${200 + n}`;
const TYPE6 = { id: TYPE, eniQuantity: 3, ipv4PerEni: 11, ipv6PerEni: 10 };
const VSW6 = vSwitch('vsw-a', 100, { ipv6Cidr: CIDR6 });
const owner = (k: number) => ({ pod: `default/p${k}`, containerID: `c${k}`, ifName: 'eth0' });

/** The agent answers the pool's requests as it does (nothing of the node in use unless `used`). */
function agentAnswers(live: ENIPool, used: Record<string, ReturnType<typeof owner>> = {}): void {
  const mine = agentStatus(emptyState(), live, Date.parse('2026-03-01T12:00:00.000Z'));
  const acks = Object.fromEntries(
    Object.entries(mine.releaseAcks).map(([key, a]) =>
      Object.keys(used).some((ip) => key === PFX && ip.startsWith('2408:4005:3c0:a100:1:'))
        ? [key, { ...a, answer: 'do-not-release' as const }]
        : [key, a],
    ),
  );
  live.status = { ...(live.status ?? {}), releaseAcks: acks, used } as ENIPoolStatus;
  live.metadata.resourceVersion = String(Number(live.metadata.resourceVersion) + 1);
}

function deletedPool(used: Record<string, ReturnType<typeof owner>> = {}) {
  const cloudEni = eni(1, 3, { ipv6Prefixes: [PFX] });
  return {
    cloudEni,
    f: fixture({
      metadata: { deletionTimestamp: '2026-03-01T11:59:00Z' },
      spec: { ipFamilies: ['IPv4', 'IPv6'], ipv6Mode: 'Prefix' },
      instanceTypes: [TYPE6],
      vSwitches: [VSW6],
      enis: [cloudEni],
      status: {
        used,
        enis: [
          {
            id: cloudEni.id,
            mac: cloudEni.mac,
            vSwitchID: 'vsw-a',
            vSwitchCIDR: '10.0.0.0/16',
            gatewayIP: '10.0.0.253',
            primaryIP: cloudEni.primaryIp,
            state: 'InUse',
            ips: ipsOf(cloudEni),
            ipv6s: [],
            ipv6Prefixes: [PFX],
            vSwitchIPv6CIDR: CIDR6,
          },
        ],
      },
    }),
  };
}

async function teardownRounds(f: ReturnType<typeof fixture>, used = {}): Promise<boolean> {
  for (let round = 0; round < 6; round++) {
    f.sync();
    await f.reconcile();
    const live = f.store.live.get(NODE)!;
    if (!live.metadata.finalizers?.includes(FINALIZER)) return true;
    agentAnswers(live, used);
  }
  return false;
}

describe('IPv6 /80 prefixes in the reconciler and teardown', () => {
  it('a deleted pool whose ENI holds a /80 lets go once the agent confirms it free, its ENI deleted', async () => {
    const { f, cloudEni } = deletedPool();
    expect(await teardownRounds(f)).toBe(true);
    expect(f.enis.calls.map((c) => c.action)).toContain('deleteEni');
    expect(JSON.stringify(f.enis.calls)).toContain(cloudEni.id);
  });

  it('a deleted pool waits while a pod holds an address of the /80', async () => {
    const used = { [in80(1)]: owner(0) };
    const { f } = deletedPool(used);
    expect(await teardownRounds(f, used)).toBe(false);
    expect(f.enis.calls.map((c) => c.action)).not.toContain('deleteEni');
  });

  it('an IPv6-only pool with a /80 left from dual-stack publishes, and asks the leftovers back once free', async () => {
    const e1 = eni(1, 4, { ipv6Prefixes: [PFX] });
    const e2 = eni(2, 0, { ipv6: Array.from({ length: 10 }, (_, k) => single(k)) });
    const f = fixture({
      spec: { ipFamilies: ['IPv6'], preAllocate: 2 },
      instanceTypes: [TYPE6],
      vSwitches: [VSW6],
      enis: [e1, e2],
      status: { used: {}, releaseRequests: {}, releaseAcks: {} },
    });
    const results = [];
    for (let i = 0; i < 3; i++) {
      results.push(await f.reconcile());
      f.sync();
    }
    expect(results).not.toContainEqual({ requeueAfterMs: 100 });
    expect(f.statusWrites().length).toBeGreaterThan(0);
    const requested = Object.keys(f.cache.pool(NODE)!.status?.releaseRequests ?? {});
    expect(requested).toEqual(expect.arrayContaining([PFX, ...e1.secondaryIps]));
    // The ENI with the /80 takes no IPv6 address meanwhile: the /80 holds one of its entries.
    expect(f.ecs.calls.filter((c) => c.action === 'AssignIpv6Addresses' && c.args[0] === e1.id)).toEqual([]);
  });

  it('a dual-stack pool withdraws a /80 request left from a spell without IPv6, whatever its ack', async () => {
    const f = fixture({
      spec: { ipFamilies: ['IPv4', 'IPv6'], ipv6Mode: 'Prefix', preAllocate: 2 },
      instanceTypes: [TYPE6],
      vSwitches: [VSW6],
      enis: [eni(1, 4, { ipv6Prefixes: [PFX] })],
      status: {
        used: {},
        releaseRequests: { [PFX]: '2026-03-01T11:50:00.000Z' },
        releaseAcks: { [PFX]: { answer: 'ready', requestedAt: '2026-03-01T11:50:00.000Z' } },
      },
    });
    await f.reconcile();
    f.sync();
    expect(f.cache.pool(NODE)!.status?.releaseRequests?.[PFX]).toBeUndefined();
    expect(f.ecs.calls.filter((c) => c.action === 'UnassignIpv6Addresses')).toEqual([]);
  });
});

describe('IPv6-only pools of /80s in the reconciler and teardown (found by review)', () => {
  const ONLY80 = { ipFamilies: ['IPv6'] as Array<'IPv4' | 'IPv6'>, ipv6Mode: 'Prefix' as const };
  const PFX_NODE = '2408:4005:3c0:a200:1::/80';
  const NODES6 = vSwitch('vsw-nodes', 100, { ipv6Cidr: '2408:4005:3c0:a200::/64' });

  it('with deleteEmptyENIs, keeps the /80’s ENI once its leftover singles are confirmed free, unassigns them, and publishes', async () => {
    const singles = [single(0), single(1)];
    const at = '2026-03-01T11:50:00.000Z';
    const f = fixture({
      spec: { ...ONLY80, deleteEmptyENIs: true, releaseDelaySeconds: 0 },
      instanceTypes: [TYPE6],
      vSwitches: [VSW6],
      enis: [eni(1, 0, { ipv6Prefixes: [PFX], ipv6: singles })],
      status: {
        used: {},
        releaseRequests: Object.fromEntries(singles.map((s) => [s, at])),
        releaseAcks: Object.fromEntries(singles.map((s) => [s, { answer: 'ready' as const, requestedAt: at }])),
      },
    });
    const results = [];
    for (let i = 0; i < 3; i++) {
      results.push(await f.reconcile());
      f.sync();
    }
    expect(results).not.toContainEqual({ requeueAfterMs: 100 });
    expect(f.enis.calls.map((c) => c.action)).not.toContain('deleteEni');
    expect(f.ecs.calls).toContainEqual({ action: 'UnassignIpv6Addresses', args: ['eni-1', singles] });
    expect(f.cache.pool(NODE)!.status?.enis?.map((e) => e.id)).toEqual(['eni-1']);
  });

  it('a deleted pool gives back the /80 it had on the primary ENI, and none of the primary’s IPv4 (the node’s)', async () => {
    const f = fixture({
      metadata: { deletionTimestamp: '2026-03-01T11:59:00Z' },
      spec: { ...ONLY80, usePrimaryENI: true },
      instanceTypes: [TYPE6],
      vSwitches: [VSW6, NODES6],
      liveNodes: [],
      status: {
        used: {},
        enis: [
          {
            id: 'eni-primary',
            state: 'InUse',
            deviceIndex: 0,
            vSwitchID: 'vsw-nodes',
            vSwitchCIDR: '10.0.0.0/16',
            gatewayIP: '10.0.0.253',
            // As an older operator published it: the primary's IPv4 secondaries among the pool's.
            ips: ['10.0.0.50'],
            ipv6s: [],
            ipv6Prefixes: [PFX_NODE],
            vSwitchIPv6CIDR: '2408:4005:3c0:a200::/64',
          },
        ],
      },
    });
    const held = { ...f.cloud.get('eni-primary')!, secondaryIps: ['10.0.0.50'], ipv6Prefixes: [PFX_NODE] };
    f.cloud.upsert(held);
    f.describe.enis = f.describe.enis.map((e) => (e.id === 'eni-primary' ? held : e));
    await f.reconcile();
    const unassigns = f.ecs.calls.filter((c) => c.action.startsWith('Unassign'));
    expect(unassigns).toEqual([{ action: 'UnassignIpv6Addresses', args: ['eni-primary', { prefixes: [PFX_NODE] }] }]);
  });
});

describe('the node’s own addresses on the primary ENI (its Node’s InternalIPs)', () => {
  it('are neither published nor counted: a dual-stack primary pool publishes, tops its IPv6 up past them, and asks none back', async () => {
    const own6 = '2408:4005:3c0:a200::5';
    const f = fixture({
      spec: { ipFamilies: ['IPv4', 'IPv6'], usePrimaryENI: true, preAllocate: 2, releaseDelaySeconds: 0 },
      instanceTypes: [TYPE6],
      vSwitches: [VSW6, vSwitch('vsw-nodes', 100, { ipv6Cidr: '2408:4005:3c0:a200::/64' })],
      status: { used: {}, releaseRequests: {}, releaseAcks: {} },
    });
    const held = { ...f.cloud.get('eni-primary')!, ipv6: [own6] };
    f.cloud.upsert(held);
    f.describe.enis = f.describe.enis.map((e) => (e.id === 'eni-primary' ? held : e));
    const node = f.cache.node(NODE)!;
    node.status = { addresses: [{ type: 'InternalIP', address: own6 }] };
    const results = [];
    for (let i = 0; i < 3; i++) {
      results.push(await f.reconcile());
      f.sync();
    }
    expect(results).not.toContainEqual({ requeueAfterMs: 100 });
    const assigned6 = f.ecs.calls.filter((c) => c.action === 'AssignIpv6Addresses' && c.args[0] === 'eni-primary');
    expect(assigned6).toHaveLength(1);
    const published = f.cache.pool(NODE)!.status!.enis!.find((e) => e.id === 'eni-primary')!;
    expect(published.ipv6s).toHaveLength(2);
    expect(published.ipv6s).not.toContain(own6);
    expect(Object.keys(f.cache.pool(NODE)!.status?.releaseRequests ?? {})).not.toContain(own6);
  });
});
