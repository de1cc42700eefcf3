import { afterEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { Agent } from '../../src/agent/agent.js';
import { prefixAddresses } from '../../src/ipam/prefix.js';
import {
  POD_CLASS,
  conditionOf,
  poolWhere,
  ready,
  testCluster,
  deletePool,
  startAgentFor,
  writeAsAgent,
  type TestCluster,
} from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
let c: TestCluster | undefined;
let agent: Agent | undefined;
afterEach(async () => {
  await agent?.stop();
  await c?.close();
  agent = undefined;
  c = undefined;
});

/**
 * A node whose class takes /28s from vsw-h-pods-2, with one address taken in every /28 of it:
 * 236 of its 252 usable addresses are free, no /28 is.
 */
async function onFragmented(cluster: TestCluster, spec: Record<string, unknown>): Promise<string> {
  const vsw = cluster.ecs.world.vSwitches.get('vsw-h-pods-2')!;
  for (let n = 5; n < 256; n += 16) vsw.pool.takeSpecific(`192.168.32.${n}`);
  await cluster.addClass('prefix', {
    vSwitchIDs: ['vsw-h-pods-2'],
    securityGroupIDs: ['sg-demo-pods'],
    ipv4Mode: 'Prefix',
    preAllocate: 8,
    ...spec,
  });
  const node = await cluster.addNode('i-demo-04');
  await cluster.startOperator();
  return node;
}

describe('ipv4Mode Prefix on the emulators', () => {
  it('fills a node with /28 prefixes in one create, hands out the fullest prefix first, and releases only whole free prefixes', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('prefix', { ...POD_CLASS, ipv4Mode: 'Prefix', preAllocate: 40, releaseDelaySeconds: 0 });
    const node = await cluster.addNode('i-demo-24');
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, ready);
    // 40 addresses: three /28s, carried by the create itself.
    expect(cluster.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    const [eni] = pool.status!.enis!;
    const cloudEni = cluster.ecs.world.enis.get(eni!.id)!;
    expect(cloudEni.secondaryIps).toEqual([]);
    expect(cloudEni.ipv4Prefixes).toHaveLength(3);
    expect(eni!.prefixes).toEqual(cloudEni.ipv4Prefixes);
    expect(new Set(eni!.ips)).toEqual(new Set(cloudEni.ipv4Prefixes.flatMap(prefixAddresses)));
    expect(pool.status!.summary!.available).toBe(48);

    // 45 pods: they fill three prefixes, not a few addresses of each; the pool grows by prefixes.
    agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    const leases = Array.from({ length: 45 }, (_, i) =>
      agent!.allocate({ containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` }),
    );
    expect(leases.filter((l) => l === 'pool-empty')).toEqual([]);
    const ips = leases.map((l) => (l as { ip: string }).ip);
    expect(new Set(ips).size).toBe(45);
    const prefixOf = (ip: string) =>
      cluster.ecs.world.enis.get(eni!.id)!.ipv4Prefixes.find((p) => prefixAddresses(p).includes(ip));
    expect(new Set(ips.map(prefixOf)).size).toBe(3);
    const grown = await poolWhere(cluster, node, (p) => ready(p) && (p.status?.summary?.available ?? 0) >= 85);
    expect(grown.status!.summary!.available! % 16).toBe(0);
    // The growth is one assign of prefixes on the same ENI: no single IP, no new ENI.
    expect(cluster.mutatingCalls()).toEqual({
      CreateNetworkInterface: 1,
      AttachNetworkInterface: 1,
      AssignPrivateIpAddresses: 1,
    });
    expect(cluster.ecs.world.enis.get(eni!.id)!.secondaryIps).toEqual([]);

    // 40 pods leave: the free prefixes go back whole through the handshake; the 5 pods' stays.
    for (let i = 5; i < 45; i++) agent.release(`c${i}`, 'eth0');
    await cluster.custom.patchClusterCustomObject(
      { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: node, body: { spec: { preAllocate: 10 } } },
      merge,
    );
    const settled = await poolWhere(
      cluster,
      node,
      (p) => Object.keys(p.status?.releaseRequests ?? {}).length === 0 && p.status?.summary?.available === 16,
      30_000,
    );
    const left = cluster.ecs.world.enis.get(eni!.id)!;
    expect(left.secondaryIps).toEqual([]);
    expect(left.ipv4Prefixes).toEqual([prefixOf(ips[0]!)]);
    for (const ip of ips.slice(0, 5)) expect(prefixAddresses(left.ipv4Prefixes[0]!)).toContain(ip);
    expect(settled.status!.enis![0]!.ips).toHaveLength(16);
    expect(settled.status!.summary!.used).toBe(5);
  }, 90_000);

  it('a pool deleted while a pod holds an address of a prefix keeps that ENI until the agent confirms the whole prefix free', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('prefix', { ...POD_CLASS, ipv4Mode: 'Prefix', preAllocate: 20 });
    const node = await cluster.addNode('i-demo-24');
    await cluster.startOperator();
    const pool = await poolWhere(cluster, node, ready);
    const [eni] = pool.status!.enis!;
    const [held, other] = eni!.prefixes!;
    const agentPatch = (status: Record<string, unknown>) => writeAsAgent(cluster, node, status);
    const inUse = prefixAddresses(held!)[5]!;
    await agentPatch({ used: { [inUse]: { pod: 'default/web', containerID: 'c1' } } });
    await poolWhere(cluster, node, (p) => inUse in (p.status?.used ?? {}));
    await deletePool(cluster, node);
    // Each prefix is asked for by its name, once: not address by address.
    const asked = await poolWhere(cluster, node, (p) =>
      [held!, other!].every((k) => k in (p.status?.releaseRequests ?? {})),
    );
    expect(Object.keys(asked.status!.releaseRequests!).filter((k) => prefixAddresses(held!).includes(k))).toEqual([]);
    const ack = (key: string, answer: 'ready' | 'do-not-release') => ({
      answer,
      requestedAt: asked.status!.releaseRequests![key]!,
    });
    await agentPatch({ releaseAcks: { [held!]: ack(held!, 'do-not-release'), [other!]: ack(other!, 'ready') } });
    // One prefix in use keeps the ENI, whole.
    await new Promise((r) => setTimeout(r, 3000));
    expect(cluster.ecs.world.enis.get(eni!.id)?.ipv4Prefixes).toEqual([held, other]);
    expect(cluster.mutatingCalls().DeleteNetworkInterface).toBeUndefined();
    // The pod goes: its prefix is answered ready, and the ENI goes with the pool.
    await agentPatch({ used: { [inUse]: null }, releaseAcks: { [held!]: ack(held!, 'ready') } });
    await eventually(() => !cluster.ecs.world.enis.has(eni!.id), 15_000);
  }, 60_000);

  it('a vSwitch with free addresses but no aligned /28 is reported, and the pool falls back to single IPs on a new ENI', async () => {
    c = await testCluster();
    const node = await onFragmented(c, {});
    const pool = await poolWhere(c, node, ready);
    expect(conditionOf(pool, 'Fragmented')).toMatchObject({ status: 'True', reason: 'FallingBackToSecondaryIPs' });
    expect(conditionOf(pool, 'Fragmented').message).toContain('vsw-h-pods-2');
    const said = await eventually(async () => {
      const list = await c!.kc
        .makeApiClient(CoreV1Api)
        .listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${node}` });
      return list.items.find((e) => e.reason === 'VSwitchFragmented');
    });
    expect(said.type).toBe('Warning');
    expect(said.message).toMatch(/vSwitch vsw-h-pods-2 has \d+ free addresses but no aligned \/28 prefix/);
    const [eni] = pool.status!.enis!;
    const cloudEni = c.ecs.world.enis.get(eni!.id)!;
    expect(cloudEni.ipv4Prefixes).toEqual([]);
    expect(cloudEni.secondaryIps).toHaveLength(8);
    expect(eni!.prefixes ?? []).toEqual([]);
  }, 60_000);

  it('with prefixFallback false the pool waits, and its conditions say the vSwitch is fragmented', async () => {
    c = await testCluster();
    const node = await onFragmented(c, { prefixFallback: false });
    const pool = await poolWhere(c, node, (p) => conditionOf(p, 'Exhausted')?.status === 'True');
    expect(ready(pool)).toBe(false);
    expect(conditionOf(pool, 'Exhausted')).toMatchObject({ reason: 'VSwitchFragmented' });
    expect(conditionOf(pool, 'Fragmented')).toMatchObject({ status: 'True', reason: 'WaitingForPrefixes' });
    // Nothing was made with single IPs, and no ENI is left behind.
    expect(c.ecs.state().enis.filter((e) => e.tags.some((t) => t.key === 'eni-ipam.io/cluster'))).toEqual([]);
  }, 60_000);
});
