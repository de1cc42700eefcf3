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
