import { afterEach, describe, expect, it } from '@jest/globals';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Agent } from '../../src/agent/agent.js';
import type { ENIPool } from '../../src/api/types.js';
import { inIpv6Prefix } from '../../src/ipam/ipv6-prefix.js';
import { POD_CLASS, poolWhere, ready, startAgentFor, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';
import { kubectlFor } from '../helpers/kube.js';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

let c: TestCluster | undefined;
let agent: Agent | undefined;
afterEach(async () => {
  await agent?.stop();
  await c?.close();
  agent = undefined;
  c = undefined;
});

const PREFIX_CLASS = {
  ...POD_CLASS,
  vSwitchIDs: ['vsw-j-pods'],
  ipFamilies: ['IPv4', 'IPv6'] as Array<'IPv4' | 'IPv6'>,
  ipv6Mode: 'Prefix' as const,
};
const prefixesOf = (p: ENIPool) => (p.status?.enis ?? []).flatMap((e) => e.ipv6Prefixes ?? []);

describe('IPv6 /80 prefixes (dual-stack, ipv6Mode Prefix) on the emulators', () => {
  it('gives each ENI one /80 at its creation, grows with IPv4 calls alone, hands pods IPv6 addresses of it, and gives it back whole once the class drops IPv6', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('dual', { ...PREFIX_CLASS, preAllocate: 4, releaseDelaySeconds: 0, maxBatch: 0 });
    // i-demo-03: ecs.c7.2xlarge in zone j (14 pod IPv4 and 15 IPv6 entries per ENI).
    const node = await cluster.addNode('i-demo-03');
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, (p) => ready(p) && prefixesOf(p).length === 1);
    // The create carries the /80: no IPv6 call.
    expect(cluster.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    const [eni] = pool.status!.enis!;
    const cloud = cluster.ecs.world.enis.get(eni!.id)!;
    expect(eni!.ipv6Prefixes).toEqual(cloud.ipv6Prefixes);
    expect(cloud.ipv6).toEqual([]);
    const [prefix] = eni!.ipv6Prefixes!;
    expect(prefix).toMatch(/^2408:4005:3c0:a100:[0-9a-f]+::\/80$/);
    expect(eni).toMatchObject({ vSwitchIPv6CIDR: '2408:4005:3c0:a100::/64', gatewayIPv6: 'fe80::ecff:ffff:feff:ffff' });
    expect(pool.status!.summary).toMatchObject({ available: 4, availableIPv6: 4, ipv6Prefixes: 1 });

    // Pods beyond preAllocate: the pool grows by AssignPrivateIpAddresses only.
    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    const leases = [];
    for (let i = 0; i < 10; i++) {
      const req = { containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` };
      leases.push(
        await eventually(() => {
          const l = agent!.allocate(req);
          return l === 'pool-empty' ? undefined : l;
        }, 20_000),
      );
    }
    const ipv6 = leases.map((l) => l.ipv6!.ip);
    expect(new Set(ipv6).size).toBe(10);
    for (const l of leases) {
      expect(inIpv6Prefix(l.ipv6!.ip, prefix!)).toBe(true);
      expect(l.ipv6).toMatchObject({ prefixLength: 64, gateway: 'fe80::1' });
      expect(l.eniId).toBe(eni!.id);
    }
    await poolWhere(cluster, node, (p) => p.status!.summary!.usedIPv6 === 10 && p.status!.summary!.used === 10);
    const calls = cluster.mutatingCalls();
    expect(calls.AssignPrivateIpAddresses).toBeGreaterThan(0);
    expect(calls.AssignIpv6Addresses).toBeUndefined();

    // Where users look.
    const k = kubectlFor(cluster.kube);
    const wide = (await k(['get', 'enipools', node, '-o', 'jsonpath={.status.summary.ipv6Prefixes}'])).stdout;
    expect(wide).toBe('1');
    const metrics = await cluster.operators[0]!.registry.metrics();
    expect(metrics).toMatch(new RegExp(`^eni_ipam_pool_ipv6_prefixes\\{node="${node}"\\} 1$`, 'm'));

    // The class drops IPv6: the /80 stays while a pod holds an address of it, then goes whole.
    await cluster.custom.patchClusterCustomObject(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'dual',
        body: { spec: { ipFamilies: ['IPv4'], ipv6Mode: 'SecondaryIP' } },
      },
      merge,
    );
    for (let i = 1; i < 10; i++) agent.release(`c${i}`, 'eth0');
    // The other pods' IPv4 addresses go back; the /80 is not even asked for while p0 holds an address of it.
    const held = await poolWhere(
      cluster,
      node,
      (p) => p.status?.summary?.used === 1 && (p.status?.summary?.available ?? 99) <= 5,
      20_000,
    );
    expect(held.status!.releaseRequests?.[prefix!]).toBeUndefined();
    expect(held.status!.enis![0]!.ipv6Prefixes).toEqual([prefix]);
    expect(cluster.ecs.world.enis.get(eni!.id)!.ipv6Prefixes).toEqual([prefix]);
    expect(cluster.mutatingCalls().UnassignIpv6Addresses).toBeUndefined();
    agent.release('c0', 'eth0');
    const after = await poolWhere(cluster, node, (p) => prefixesOf(p).length === 0, 20_000);
    expect(cluster.ecs.world.enis.get(eni!.id)!.ipv6Prefixes).toEqual([]);
    expect(cluster.mutatingCalls().UnassignIpv6Addresses).toBe(1);
    expect(after.status!.releaseRequests?.[prefix!]).toBeUndefined();
  }, 90_000);

  it('gives an ENI of single IPv6 addresses one /80 when the class moves to Prefix, though the answer of its assign is lost', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('dual', {
      ...PREFIX_CLASS,
      ipv6Mode: 'SecondaryIP',
      preAllocate: 4,
      releaseDelaySeconds: 0,
      maxBatch: 0,
    });
    const node = await cluster.addNode('i-demo-03');
    await cluster.startOperator();
    const first = await poolWhere(cluster, node, (p) => ready(p) && (p.status?.enis?.[0]?.ipv6s?.length ?? 0) > 0);
    const eniId = first.status!.enis![0]!.id;
    // The next IPv6 assign is carried out and its answer lost.
    cluster.ecs.setFaults({ rules: [{ action: 'AssignIpv6Addresses', kind: 'drop-answer', rate: 1, times: 1 }] });
    await cluster.custom.patchClusterCustomObject(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'dual',
        body: { spec: { ipv6Mode: 'Prefix' } },
      },
      merge,
    );
    const moved = await poolWhere(cluster, node, (p) => prefixesOf(p).length > 0 && ready(p), 30_000);
    // Whatever answers were lost, the ENI holds exactly one /80, and the pool says which.
    const cloud = cluster.ecs.world.enis.get(eniId)!;
    // The lost answer was of a call carried out; its retry named the same ClientToken, so the cloud
    // answered it without a second /80.
    const assigns = cluster.ecs.calls({ action: 'AssignIpv6Addresses' });
    expect(assigns[0]).toMatchObject({ code: 'DropAnswer', eniId });
    expect(assigns.every((a) => a.clientToken === assigns[0]!.clientToken)).toBe(true);
    expect(cloud.ipv6Prefixes).toHaveLength(1);
    expect(moved.status!.enis![0]!.ipv6Prefixes).toEqual(cloud.ipv6Prefixes);
    // Its free single addresses go back through the agent's acks; no pod held one.
    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    await poolWhere(cluster, node, () => cluster.ecs.world.enis.get(eniId)!.ipv6.length === 0, 30_000);
    expect(cluster.ecs.world.enis.get(eniId)!.ipv6Prefixes).toHaveLength(1);
  }, 90_000);
});
