import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import YAML from 'yaml';
import type { ENIPool } from '../../src/api/types.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { kubectlFor } from '../helpers/kube.js';
import { eventually } from '../helpers/ecs.js';

let c: TestCluster;
const nodes: string[] = [];
const BIG = new Set<string>();

beforeAll(async () => {
  // The default world has 16 instances in zones h and i; add four more so that 20 nodes fit in two zones.
  c = await testCluster((f) => {
    for (let n = 0; n < 4; n++) {
      f.instances.push({
        id: `i-extra-${n}`,
        instanceType: ['ecs.g7.large', 'ecs.g7.xlarge', 'ecs.c7.2xlarge', 'ecs.g7.large'][n]!,
        vSwitchId: n % 2 ? 'vsw-i-nodes' : 'vsw-h-nodes',
        securityGroupIds: ['sg-demo-nodes'],
        hostName: `extra-${n}`,
      });
    }
  });
  await c.addClass('general', { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'], preAllocate: 8 });
  await c.addClass('big', {
    nodeSelector: { matchLabels: { tier: 'big' } },
    priority: 10,
    vSwitchIDs: ['vsw-h-pods', 'vsw-i-pods'],
    securityGroupTags: { role: 'pods' },
    minAllocate: 20,
    preAllocate: 4,
  });
  const ids = [...c.ecs.world.instances.values()].filter((i) => i.zoneId !== 'cn-hangzhou-j').map((i) => i.id);
  for (const [k, id] of ids.entries()) {
    const big = k % 5 === 0 && c.ecs.world.instances.get(id)!.instanceType !== 'ecs.g7.large';
    const name = await c.addNode(id, big ? { tier: 'big' } : {});
    if (big) BIG.add(name);
    nodes.push(name);
  }
  await c.startOperator();
});
afterAll(() => c.close());

/** The fewest mutating calls a pool that starts empty needs: two per ENI (create, attach), ENIs as full as allowed. */
function minimumCalls(pools: ENIPool[]): number {
  let calls = 0;
  for (const p of pools) {
    const t = c.ecs.world.instanceTypes.get(p.spec.instanceType!)!;
    const capacity = (t.eniQuantity - 1) * t.eniPrivateIpAddressQuantity;
    const want = Math.min(capacity, Math.max(p.spec.preAllocate ?? 8, p.spec.minAllocate ?? 0));
    calls += 2 * Math.ceil(want / Math.min(t.eniPrivateIpAddressQuantity, 50));
  }
  return calls;
}

describe('operator at 20 nodes, 3 instance types, 2 zones, 2 classes', () => {
  it('fills every pool within its bounds', async () => {
    expect(nodes.length).toBe(20);
    expect(
      new Set(
        nodes.map(
          (n) =>
            c.ecs.world.instances.get([...c.ecs.world.instances.values()].find((i) => i.hostName === n)!.id)!
              .instanceType,
        ),
      ).size,
    ).toBeGreaterThanOrEqual(3);
    const pools = await allReady(c, nodes, 60_000);
    for (const p of pools) {
      const s = p.status!.summary!;
      expect(p.spec.className).toBe(BIG.has(p.metadata.name) ? 'big' : 'general');
      expect(s.available).toBeGreaterThanOrEqual(Math.max(p.spec.preAllocate!, p.spec.minAllocate!));
      const t = c.ecs.world.instanceTypes.get(p.spec.instanceType!)!;
      expect(s.available).toBeLessThanOrEqual((t.eniQuantity - 1) * t.eniPrivateIpAddressQuantity);
      for (const eni of p.status!.enis!) {
        expect(eni.state).toBe('InUse');
        expect(eni.gatewayIP).toBe(c.ecs.world.vSwitches.get(eni.vSwitchID!)!.pool.gateway);
        expect(eni.vSwitchCIDR).toBe(c.ecs.world.vSwitches.get(eni.vSwitchID!)!.cidr);
        const cloud = c.ecs.world.enis.get(eni.id)!;
        expect(cloud.instanceId).toBe(p.spec.instanceID);
        // Its secondaries are the pods' (its own primary is the node's).
        expect(new Set(eni.ips)).toEqual(new Set(cloud.secondaryIps));
      }
    }
  });

  it('made exactly the minimum of mutating calls and polled no ENI on its own', async () => {
    const pools = (await c.pools()).filter((p) => nodes.includes(p.metadata.name));
    const calls = c.mutatingCalls();
    const total = Object.values(calls).reduce((a, b) => a + b, 0);
    expect(total).toBe(minimumCalls(pools));
    expect(calls.CreateNetworkInterface).toBe(calls.AttachNetworkInterface);
    const stats = c.ecs.stats().calls;
    expect(stats.DescribeNetworkInterfaceAttribute).toBeUndefined();
    // Polling each attaching ENI on its own would take at least one describe per ENI; batched, it takes fewer.
    expect(stats.DescribeNetworkInterfaces!.OK!).toBeLessThan(calls.AttachNetworkInterface!);
  });

  it('shows the pools with kubectl get enipools', async () => {
    const k = kubectlFor(c.kube);
    const out = (await k(['get', 'enipools'])).stdout.trim().split('\n');
    expect(out[0]).toMatch(/^NAME\s+INSTANCE-TYPE\s+ENIS\s+AVAILABLE\s+USED\s+NEEDED\s+READY\s+AGE$/);
    expect(out).toHaveLength(21);
    for (const line of out.slice(1)) expect(line).toMatch(/^\S+\s+ecs\.\S+\s+\d+\s+\d+\s+0\s+0\s+True\s+\S+$/);
    const classes = YAML.parse((await k(['get', 'enipc', '-o', 'yaml'])).stdout);
    const byName = Object.fromEntries(
      classes.items.map((x: { metadata: { name: string }; status: { matchedNodes: number } }) => [
        x.metadata.name,
        x.status.matchedNodes,
      ]),
    );
    expect(byName).toEqual({ big: BIG.size, general: 20 - BIG.size });
    // Events are recorded asynchronously; describe shows them once stored.
    const described = await eventually(async () => {
      const out = (await k(['describe', 'enipool', nodes[0]!])).stdout;
      return /Normal\s+AttachedENI\s+.*is InUse on i-/.test(out) ? out : undefined;
    });
    expect(described).toMatch(/Normal\s+CreatedENI\s+\S+\s+eni-ipam-operator\s+created eni-\w+ with \d+ IPs in vsw-/);
  });
});
