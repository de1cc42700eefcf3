import { afterEach, describe, expect, it } from '@jest/globals';
import type { Agent } from '../../src/agent/agent.js';
import type { ENIPool } from '../../src/api/types.js';
import {
  POD_CLASS,
  conditionOf,
  poolWhere,
  ready,
  startAgentFor,
  testCluster,
  type TestCluster,
} from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';
import { kubectlFor } from '../helpers/kube.js';
import { inIpv6Prefix } from '../../src/ipam/ipv6-prefix.js';
import { prefixAddresses } from '../../src/ipam/prefix.js';

const inPrefix = (ip: string, prefix: string) => prefixAddresses(prefix).includes(ip);

let c: TestCluster | undefined;
let agent: Agent | undefined;
afterEach(async () => {
  await agent?.stop();
  await c?.close();
  agent = undefined;
  c = undefined;
});

const DUAL = { ...POD_CLASS, vSwitchIDs: ['vsw-j-pods'], ipFamilies: ['IPv4', 'IPv6'] as Array<'IPv4' | 'IPv6'> };
const ipv6Of = (p: ENIPool) => (p.status?.enis ?? []).flatMap((e) => e.ipv6s ?? []);

describe('IPv6: dual-stack (ipFamilies [IPv4, IPv6]) and IPv6-only ([IPv6]) on the emulators', () => {
  it('fills a node with an IPv6 address beside each IPv4 one, in the create itself, and hands each pod one of each from one ENI', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('dual', { ...DUAL, preAllocate: 6, releaseDelaySeconds: 0 });
    // i-demo-03: ecs.c7.2xlarge in zone j (14 pod IPv4 and 15 IPv6 per ENI).
    const node = await cluster.addNode('i-demo-03');
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, (p) => ready(p) && ipv6Of(p).length >= 6);
    // One create carries both families: no AssignIpv6Addresses.
    expect(cluster.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    const [eni] = pool.status!.enis!;
    expect(eni).toMatchObject({ vSwitchIPv6CIDR: '2408:4005:3c0:a100::/64', gatewayIPv6: 'fe80::ecff:ffff:feff:ffff' });
    expect(eni!.ipv6s).toEqual(cluster.ecs.world.enis.get(eni!.id)!.ipv6);
    expect(eni!.ipv6s).toHaveLength(eni!.ips!.length);
    expect(pool.status!.summary).toMatchObject({ available: 6, availableIPv6: 6 });

    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    const leases = Array.from({ length: 4 }, (_, i) =>
      agent!.allocate({ containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` }),
    );
    for (const l of leases) {
      if (l === 'pool-empty') throw new Error('pool empty');
      expect(l.ipv6).toMatchObject({ prefixLength: 64, gateway: 'fe80::1' });
      expect(eni!.ipv6s).toContain(l.ipv6!.ip);
      expect(eni!.ips).toContain(l.ip);
    }
    expect(new Set(leases.map((l) => (l as { ipv6: { ip: string } }).ipv6.ip)).size).toBe(4);
    // Both addresses are reported in use; a pod counts once toward the pool's size.
    const after = await poolWhere(cluster, node, (p) => Object.keys(p.status?.used ?? {}).length === 8);
    expect(Object.keys(after.status!.used!).sort()).toEqual(
      leases.flatMap((l) => (l === 'pool-empty' ? [] : [l.ip, l.ipv6!.ip])).sort(),
    );
    await poolWhere(cluster, node, (p) => p.status!.summary!.used === 4 && p.status!.summary!.usedIPv6 === 4);
    // The pool grows for the pods: every IPv4 address it adds gets its IPv6 companion.
    const grown = await poolWhere(cluster, node, (p) => (p.status?.summary?.available ?? 0) >= 10 && ready(p));
    await poolWhere(cluster, node, (p) => ipv6Of(p).length === p.status!.summary!.available);
    expect(grown.status!.summary!.needed).toBe(0);

    // A DEL frees both; the surplus IPv6 addresses go back with their IPv4 ones, through the agent's acks.
    for (let i = 0; i < 4; i++) agent.release(`c${i}`, 'eth0');
    const shrunk = await poolWhere(
      cluster,
      node,
      (p) => p.status!.summary!.available === 6 && ipv6Of(p).length === 6 && !Object.keys(p.status?.used ?? {}).length,
      20_000,
    );
    const cloud = cluster.ecs.world.enis.get(shrunk.status!.enis![0]!.id)!;
    expect(cloud.ipv6).toHaveLength(cloud.secondaryIps.length);
    expect(cluster.mutatingCalls().UnassignIpv6Addresses).toBeGreaterThan(0);

    // Where users look: kubectl's wide columns and the operator's metrics count the IPv6 addresses.
    const k = kubectlFor(cluster.kube);
    const [header, row] = (await k(['get', 'enipools', '-o', 'wide'])).stdout.trim().split('\n');
    // Cells by the header's column positions (an empty cell, PREFIXES here, is only spaces).
    const cell = (name: string) => {
      const start = header!.search(new RegExp(`(^|\\s)${name}(\\s|$)`)) + (header!.startsWith(name) ? 0 : 1);
      const next = header!.slice(start + name.length).search(/\S/);
      return row!.slice(start, next < 0 ? undefined : start + name.length + next).trim();
    };
    expect(cell('IPV6')).toBe('6');
    expect(cell('FAMILIES')).toBe('["IPv4","IPv6"]');
    const metrics = await cluster.operators[0]!.registry.metrics();
    expect(metrics).toMatch(new RegExp(`^eni_ipam_pool_ipv6_addresses\\{node="${node}",kind="available"\\} 6$`, 'm'));
    expect(metrics).toMatch(new RegExp(`^eni_ipam_pool_ipv6_addresses\\{node="${node}",kind="used"\\} 0$`, 'm'));
  }, 60_000);

  it('dual-stack under lost answers and errors of the IPv6 calls: no IPv6 address leaked, doubled or released in use', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('dual', { ...DUAL, preAllocate: 4, releaseDelaySeconds: 0 });
    const node = await cluster.addNode('i-demo-03');
    await cluster.startOperator();
    const first = await poolWhere(cluster, node, (p) => ready(p) && ipv6Of(p).length === p.status!.summary!.available);
    const start = first.status?.summary?.available ?? 0;
    // Every IPv6 call from now on: the first two carried out with their answers lost, then one refused.
    cluster.ecs.setFaults({
      rules: [
        { action: 'AssignIpv6Addresses', kind: 'drop-answer', rate: 1, times: 2 },
        { action: 'UnassignIpv6Addresses', kind: 'drop-answer', rate: 1, times: 2 },
        { action: 'AssignIpv6Addresses', kind: 'error', code: 'InternalError', rate: 1, times: 1 },
      ],
    });
    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    const take = (k: number) => agent!.allocate({ containerId: `c${k}`, ifName: 'eth0', pod: `default/p${k}` });
    const held = [0, 1, 2, 3].map(take);
    // The cloud and the pool agree, ENI by ENI: one IPv6 address per IPv4 one, none twice.
    const agrees = (p: ENIPool) =>
      ready(p) &&
      (p.status?.enis ?? []).every((e) => {
        const cloud = cluster.ecs.world.enis.get(e.id)!;
        return (
          cloud.ipv6.length === cloud.secondaryIps.length && JSON.stringify(e.ipv6s) === JSON.stringify(cloud.ipv6)
        );
      });
    const grown = await poolWhere(
      cluster,
      node,
      (p) => agrees(p) && (p.status?.summary?.available ?? 0) >= start + 4,
      30_000,
    );
    const all = grown.status!.enis!.flatMap((e) => e.ipv6s ?? []);
    expect(new Set(all).size).toBe(all.length);
    // Pods keep theirs while the surplus goes back through lost answers too.
    for (const k of [2, 3]) agent.release(`c${k}`, 'eth0');
    const shrunk = await poolWhere(
      cluster,
      node,
      (p) =>
        agrees(p) && ipv6Of(p).length < ipv6Of(grown).length && !Object.keys(p.status!.releaseRequests ?? {}).length,
      30_000,
    );
    for (const l of held.slice(0, 2)) {
      if (l === 'pool-empty') throw new Error('pool empty');
      expect(shrunk.status!.enis!.some((e) => e.ipv6s?.includes(l.ipv6!.ip))).toBe(true);
    }
    // (Lost answers do not count as calls made: the cloud says what went.)
    expect(ipv6Of(shrunk).length).toBeLessThan(ipv6Of(grown).length);
  }, 60_000);

  it('an IPv4 pool in a vSwitch with IPv6 takes no IPv6 address and publishes no IPv6 route for its node', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('four', { ...POD_CLASS, vSwitchIDs: ['vsw-j-pods'], preAllocate: 4 });
    const node = await cluster.addNode('i-demo-03');
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, ready);
    for (const e of pool.status!.enis!) {
      expect(e.gatewayIPv6).toBeUndefined();
      expect(e.ipv6s).toBeUndefined();
      expect(cluster.ecs.world.enis.get(e.id)!.ipv6).toEqual([]);
    }
    expect(pool.status!.summary!.availableIPv6).toBeUndefined();
  }, 30_000);

  it('IPv6-only: fills a node with IPv6 addresses and no IPv4 one, hands pods IPv6 addresses, grows and shrinks with the IPv6 calls', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('six', { ...DUAL, ipFamilies: ['IPv6'], preAllocate: 6, releaseDelaySeconds: 0 });
    const node = await cluster.addNode('i-demo-03');
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, (p) => ready(p) && ipv6Of(p).length >= 6);
    expect(cluster.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    const [eni] = pool.status!.enis!;
    const cloud = cluster.ecs.world.enis.get(eni!.id)!;
    expect(cloud.secondaryIps).toEqual([]);
    expect(eni!.ips).toEqual([]);
    expect(eni!.ipv6s).toEqual(cloud.ipv6);
    expect(pool.status!.summary).toMatchObject({ available: 6, availableIPv6: 6, used: 0 });

    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    const leases = Array.from({ length: 5 }, (_, i) =>
      agent!.allocate({ containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` }),
    );
    for (const l of leases) {
      if (l === 'pool-empty') throw new Error('pool empty');
      expect(l).toMatchObject({ prefixLength: 64, gateway: 'fe80::1', eniId: eni!.id });
      expect(l.ip).toMatch(/^2408:4005:3c0:a100:/);
      expect(l.ipv6).toBeUndefined();
    }
    await poolWhere(cluster, node, (p) => (p.status?.summary?.available ?? 0) >= 11 && ready(p));
    const calls = cluster.mutatingCalls();
    expect(calls.AssignIpv6Addresses).toBeGreaterThan(0);
    expect(calls.AssignPrivateIpAddresses).toBeUndefined();
    for (let i = 0; i < 5; i++) agent.release(`c${i}`, 'eth0');
    await poolWhere(
      cluster,
      node,
      (p) => p.status!.summary!.available === 6 && !Object.keys(p.status?.used ?? {}).length,
      20_000,
    );
    expect(cluster.mutatingCalls().UnassignIpv6Addresses).toBeGreaterThan(0);
    expect(cluster.mutatingCalls().UnassignPrivateIpAddresses).toBeUndefined();
  }, 60_000);

  it('usePrimaryENI with IPv6: an IPv6-only node is served by AssignIpv6Addresses on its primary ENI alone (no create, no attach), a dual-stack one by both assigns', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('six', {
      ...DUAL,
      ipFamilies: ['IPv6'],
      usePrimaryENI: true,
      preAllocate: 4,
      releaseDelaySeconds: 0,
      nodeSelector: { matchLabels: { family: 'six' } },
    });
    await cluster.addClass('dual', {
      ...DUAL,
      usePrimaryENI: true,
      preAllocate: 4,
      nodeSelector: { matchLabels: { family: 'dual' } },
    });
    const six = await cluster.addNode('i-demo-03', { family: 'six' });
    const dual = await cluster.addNode('i-demo-06', { family: 'dual' });
    await cluster.startOperator();
    const primaryOf = (instance: string) => cluster.ecs.world.instances.get(instance)!.primaryEniId;
    const pool = await poolWhere(cluster, six, (p) => ready(p) && ipv6Of(p).length >= 4);
    const dualPool = await poolWhere(cluster, dual, (p) => ready(p) && ipv6Of(p).length >= 4);
    expect(cluster.mutatingCalls()).toEqual({ AssignIpv6Addresses: 2, AssignPrivateIpAddresses: 1 });
    const primary = cluster.ecs.world.enis.get(primaryOf('i-demo-03'))!;
    expect(primary.ipv6).toHaveLength(4);
    expect(primary.ipv6[0]).toMatch(/^2408:4005:3c0:a000:/);
    expect(pool.status!.enis!.map((e) => e.id)).toEqual([primary.id]);
    expect(pool.status!.enis![0]).toMatchObject({
      deviceIndex: 0,
      ipv6s: primary.ipv6,
      gatewayIPv6: 'fe80::ecff:ffff:feff:ffff',
    });
    const dualPrimary = cluster.ecs.world.enis.get(primaryOf('i-demo-06'))!;
    expect(dualPrimary.secondaryIps).toHaveLength(4);
    expect(dualPrimary.ipv6).toHaveLength(4);
    expect(dualPool.status!.enis!.map((e) => e.id)).toEqual([dualPrimary.id]);

    agent = await startAgentFor(cluster, six, { cooldownMs: 100, statusIntervalMs: 200 });
    const lease = await agent.allocate({ containerId: 'c1', ifName: 'eth0', pod: 'default/p1' });
    if (lease === 'pool-empty') throw new Error('pool empty');
    expect(lease).toMatchObject({ eniId: primary.id, gateway: 'fe80::1' });
    expect(primary.ipv6).toContain(lease.ip);
  }, 60_000);

  it('dual-stack with both prefixes: an ENI is created with /28s and one /80, pods take one of each from it, and growth costs no IPv6 call', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('dense', {
      ...DUAL,
      ipv4Mode: 'Prefix',
      ipv6Mode: 'Prefix',
      preAllocate: 20,
      releaseDelaySeconds: 0,
    });
    const node = await cluster.addNode('i-demo-03');
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, (p) => ready(p) && (p.status?.summary?.available ?? 0) >= 20);
    expect(cluster.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    const [eni] = pool.status!.enis!;
    const cloud = cluster.ecs.world.enis.get(eni!.id)!;
    expect(cloud.ipv4Prefixes).toHaveLength(2);
    expect(cloud.ipv6Prefixes).toHaveLength(1);
    expect(cloud.ipv6).toEqual([]);
    expect(pool.status!.summary).toMatchObject({ available: 32, availableIPv6: 32, ipv6Prefixes: 1 });

    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    const leases = [];
    for (let i = 0; i < 20; i++) {
      const l = await agent.allocate({ containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` });
      if (l === 'pool-empty') throw new Error(`pool empty at pod ${i}`);
      leases.push(l);
    }
    for (const l of leases) {
      expect(l.eniId).toBe(eni!.id);
      expect(cloud.ipv4Prefixes.some((p) => inPrefix(l.ip, p))).toBe(true);
      expect(inIpv6Prefix(l.ipv6!.ip, cloud.ipv6Prefixes[0]!)).toBe(true);
    }
    expect(new Set(leases.map((l) => l.ipv6!.ip)).size).toBe(20);
    // 20 in use + preAllocate 20: a third /28 by one assign, and still no IPv6 call.
    await poolWhere(cluster, node, (p) => (p.status?.summary?.available ?? 0) >= 48 && ready(p));
    const calls = cluster.mutatingCalls();
    expect(calls.AssignPrivateIpAddresses).toBe(1);
    expect(calls.AssignIpv6Addresses).toBeUndefined();
  }, 60_000);

  it('IPv6-only with a /80: one ENI made for it, or one assign on the primary ENI, then no call as pods come', async () => {
    const cluster = (c = await testCluster());
    const six80 = { ...DUAL, ipFamilies: ['IPv6'] as Array<'IPv4' | 'IPv6'>, ipv6Mode: 'Prefix' as const };
    await cluster.addClass('six80', { ...six80, nodeSelector: { matchLabels: { family: 'six80' } } });
    await cluster.addClass('six80p', {
      ...six80,
      usePrimaryENI: true,
      nodeSelector: { matchLabels: { family: 'six80p' } },
    });
    const node = await cluster.addNode('i-demo-03', { family: 'six80' });
    const onPrimary = await cluster.addNode('i-demo-06', { family: 'six80p' });
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, (p) => ready(p) && (p.status?.summary?.ipv6Prefixes ?? 0) === 1);
    const primaryPool = await poolWhere(
      cluster,
      onPrimary,
      (p) => ready(p) && (p.status?.summary?.ipv6Prefixes ?? 0) === 1,
    );
    expect(cluster.mutatingCalls()).toEqual({
      CreateNetworkInterface: 1,
      AttachNetworkInterface: 1,
      AssignIpv6Addresses: 1,
    });
    const [eni] = pool.status!.enis!;
    const cloud = cluster.ecs.world.enis.get(eni!.id)!;
    expect([cloud.secondaryIps, cloud.ipv6, cloud.ipv6Prefixes.length]).toEqual([[], [], 1]);
    const primary = cluster.ecs.world.enis.get(cluster.ecs.world.instances.get('i-demo-06')!.primaryEniId)!;
    expect(primary.ipv6Prefixes).toHaveLength(1);
    expect(primaryPool.status!.enis!.map((e) => e.id)).toEqual([primary.id]);
    expect(pool.status!.summary!.available).toBeGreaterThanOrEqual(40);

    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    const ips = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const l = await agent.allocate({ containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` });
      if (l === 'pool-empty') throw new Error(`pool empty at pod ${i}`);
      expect(l).toMatchObject({ eniId: eni!.id, gateway: 'fe80::1' });
      expect(inIpv6Prefix(l.ip, cloud.ipv6Prefixes[0]!)).toBe(true);
      ips.add(l.ip);
    }
    expect(ips.size).toBe(40);
    await poolWhere(cluster, node, (p) => Object.keys(p.status?.used ?? {}).length === 40 && ready(p));
    expect(cluster.mutatingCalls()).toEqual({
      CreateNetworkInterface: 1,
      AttachNetworkInterface: 1,
      AssignIpv6Addresses: 1,
    });
  }, 60_000);

  it('refuses a dual-stack class whose vSwitches have no IPv6 CIDR, and the API server IPv6 with /28 prefixes', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('dual', {
      vSwitchIDs: ['vsw-h-pods'],
      securityGroupIDs: ['sg-demo-pods'],
      ipFamilies: ['IPv4', 'IPv6'],
    });
    await cluster.startOperator();
    const valid = await eventually(async () => {
      const k = (await cluster.custom.getClusterCustomObject({
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'dual',
      })) as { status?: { conditions?: Array<{ type: string; status: string }> } };
      const v = conditionOf(k, 'Valid');
      return v?.status === 'False' ? v : undefined;
    });
    expect(valid).toMatchObject({ reason: 'InvalidIPFamilies' });
    expect(valid.message).toContain('IPv6 CIDR');
    // IPv6-only as well.
    await cluster.addClass('six', {
      vSwitchIDs: ['vsw-h-pods'],
      securityGroupIDs: ['sg-demo-pods'],
      ipFamilies: ['IPv6'],
    });
    await eventually(async () => {
      const k = (await cluster.custom.getClusterCustomObject({
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'six',
      })) as { status?: { conditions?: Array<{ type: string; status: string; reason?: string }> } };
      return conditionOf(k, 'Valid')?.reason === 'InvalidIPFamilies';
    });
    const families = 'ipFamilies must be [IPv4], [IPv4, IPv6] or [IPv6]';
    const prefixes = 'ipv6Mode Prefix needs ipFamilies [IPv4, IPv6]';
    const refused: Array<[Parameters<TestCluster['addClass']>[1], string]> = [
      [{ ipFamilies: ['IPv6', 'IPv4'] }, families],
      [{ ipFamilies: ['IPv6'], ipv4Mode: 'Prefix' }, families],
      [{ ipFamilies: ['IPv4', 'IPv6'], ipv4Mode: 'Prefix' }, families],
      [{ ipv6Mode: 'Prefix' }, prefixes],
    ];
    for (const [spec, message] of refused) {
      const err = (await cluster.addClass('refused', { ...POD_CLASS, ...spec }).catch((e: unknown) => e)) as {
        code: number;
        body: string;
      };
      expect(err.code).toBe(422);
      expect(JSON.parse(err.body).message).toContain(message);
    }
  }, 30_000);
});
