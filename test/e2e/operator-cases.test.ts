/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { ENIPool } from '../../src/api/types.js';
import {
  CLUSTER_ID,
  eventsFor as eventsOf,
  allReady,
  ready,
  testCluster,
  deletePool,
  writeAsAgent,
  type TestCluster,
} from '../helpers/cluster.js';
import { REGION, eventually, pop } from '../helpers/ecs.js';

let c: TestCluster;
afterEach(() => c?.close());

const POD_CLASS = { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'] };
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** The agent's answer to the request outstanding for an IP in the pool. */
const ack = (p: ENIPool, ip: string, answer: 'ready' | 'do-not-release' = 'ready') => ({
  answer,
  requestedAt: p.status!.releaseRequests![ip]!,
});
const condition = (p: ENIPool, type: string) => p.status?.conditions?.find((x) => x.type === type);

const eventsFor = (name: string) => eventsOf(c, name);

describe('operator cases', () => {
  it('reports an invalid class with Valid=False and its reason, and keeps serving the others', async () => {
    c = await testCluster();
    await c.addClass('broken', {
      vSwitchIDs: ['vsw-nope'],
      securityGroupIDs: ['sg-demo-pods'],
      nodeSelector: { matchLabels: { pool: 'broken' } },
    });
    await c.addClass('fine', POD_CLASS);
    const node = await c.addNode('i-demo-01');
    await c.startOperator();
    const cls = await eventually(async () => {
      const x = (await c.custom.getClusterCustomObject({
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'broken',
      })) as any;
      return x.status?.conditions?.length ? x : undefined;
    });
    expect(cls.status.conditions.find((x: any) => x.type === 'Valid')).toMatchObject({
      type: 'Valid',
      status: 'False',
      reason: 'VSwitchNotFound',
      message: 'vSwitch vsw-nope does not exist in VPC vpc-demo',
    });
    expect(cls.status.conditions.find((x: any) => x.type === 'Degraded')).toMatchObject({ status: 'False' });
    await eventually(async () => (await eventsFor('broken')).some((e) => e.startsWith('VSwitchNotFound')));
    await allReady(c, [node]);
  });

  it('moves to another vSwitch of the zone when one runs out mid-way, and says so', async () => {
    c = await testCluster();
    await c.addClass('ordered', {
      vSwitchIDs: ['vsw-i-small', 'vsw-i-pods'],
      vSwitchSelection: 'Ordered',
      securityGroupIDs: ['sg-demo-pods'],
      preAllocate: 4,
    });
    await c.startOperator();
    await c.operators[0]!.cloud.vSwitches({ refresh: true });
    // Another tenant takes the small vSwitch's last addresses after the operator described it.
    c.ecs.world.vSwitches.get('vsw-i-small')!.pool.take(6);
    const node = await c.addNode('i-demo-02');
    const [pool] = await allReady(c, [node]);
    expect(pool!.status!.enis!.map((e) => e.vSwitchID)).toEqual(['vsw-i-pods']);
    await eventually(async () =>
      (await eventsFor(node)).some((e) => e.startsWith('VSwitchExhausted: vSwitch vsw-i-small has no free addresses')),
    );
  });

  it('stops at the instance limit with Exhausted=True and wastes no calls', async () => {
    c = await testCluster();
    await c.addClass('greedy', { ...POD_CLASS, preAllocate: 30 });
    // ecs.g7.large: 2 secondary ENIs × 6 IPs, 5 for pods on each (an ENI's own primary is the node's)
    const node = await c.addNode('i-demo-01');
    await c.startOperator();
    const pool = await eventually(async () => {
      const p = await c.pool(node).catch(() => undefined);
      return p && condition(p, 'Exhausted')?.status === 'True' && p.status?.summary?.available === 10 ? p : undefined;
    });
    expect(condition(pool, 'Exhausted')).toMatchObject({ reason: 'InstanceLimit' });
    expect(ready(pool)).toBe(true);
    expect(c.mutatingCalls()).toEqual({ CreateNetworkInterface: 2, AttachNetworkInterface: 2 });
    // That a full pool looked at again makes no call is a one-reconcile case (test/operator).
  });

  it('releases excess IPs through the handshake and never an IP in use', async () => {
    c = await testCluster();
    await c.addClass('releasing', { ...POD_CLASS, preAllocate: 10, releaseDelaySeconds: 0 });
    const node = await c.addNode('i-demo-04'); // ecs.g7.xlarge: 15 IPs per ENI
    await c.startOperator();
    const [full] = await allReady(c, [node]);
    const ips = full!.status!.enis![0]!.ips!;
    const used = ips.slice(0, 3);
    // A test agent: reports IPs in use, and answers release requests.
    const agentPatch = (status: Record<string, unknown>) => writeAsAgent(c, node, status);
    await agentPatch({
      used: Object.fromEntries(used.map((ip, i) => [ip, { pod: `default/p${i}`, containerID: `c${i}` }])),
    });
    await c.custom.patchClusterCustomObject(
      { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: node, body: { spec: { preAllocate: 2 } } },
      merge,
    );
    const requested = await eventually(async () => {
      const p = await c.pool(node);
      return Object.keys(p.status?.releaseRequests ?? {}).length ? p : undefined;
    });
    const asked = Object.keys(requested.status!.releaseRequests!);
    for (const ip of used) expect(asked).not.toContain(ip);
    // The agent refuses one (it just handed it to a pod) and acks the rest.
    const [kept, ...rest] = asked;
    await agentPatch({
      used: Object.fromEntries([...used, kept!].map((ip, i) => [ip, { pod: `default/p${i}`, containerID: `c${i}` }])),
      releaseAcks: {
        [kept!]: ack(requested, kept!, 'do-not-release'),
        ...Object.fromEntries(rest.map((ip) => [ip, ack(requested, ip)])),
      },
    });
    await eventually(async () => {
      const cloud = c.ecs.world.enis.get(full!.status!.enis![0]!.id)!;
      return rest.every((ip) => !cloud.secondaryIps.includes(ip));
    });
    const cloud = c.ecs.world.enis.get(full!.status!.enis![0]!.id)!;
    const onEni = [...cloud.secondaryIps];
    for (const ip of [...used, kept!]) expect(onEni).toContain(ip);
    const after = await eventually(async () => {
      const p = await c.pool(node);
      return Object.keys(p.status?.releaseRequests ?? {}).length === 0 ? p : undefined;
    });
    expect(after.status!.summary!.available).toBe(onEni.length);
    expect(c.mutatingCalls().UnassignPrivateIpAddresses).toBeGreaterThanOrEqual(1);
  });

  it('detaches and deletes ENIs released whole when the class deletes empty ENIs', async () => {
    c = await testCluster();
    await c.addClass('shrinking', { ...POD_CLASS, preAllocate: 10, releaseDelaySeconds: 0, deleteEmptyENIs: true });
    const node = await c.addNode('i-demo-01'); // ecs.g7.large: 6 IPs per ENI, so two ENIs
    await c.startOperator();
    const [full] = await allReady(c, [node]);
    const enis = full!.status!.enis!.map((e) => e.id);
    expect(enis).toHaveLength(2);
    await c.custom.patchClusterCustomObject(
      { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: node, body: { spec: { preAllocate: 0 } } },
      merge,
    );
    const requested = await eventually(async () => {
      const p = await c.pool(node);
      return Object.keys(p.status?.releaseRequests ?? {}).length === 10 ? p : undefined;
    });
    await writeAsAgent(c, node, {
      releaseAcks: Object.fromEntries(
        Object.keys(requested.status!.releaseRequests!).map((ip) => [ip, ack(requested, ip)]),
      ),
    });
    await eventually(() => enis.every((id) => !c.ecs.state().enis.some((e) => e.id === id)), 10_000);
    const after = await eventually(async () => {
      const p = await c.pool(node);
      return p.status?.summary?.enis === 0 && Object.keys(p.status.releaseRequests ?? {}).length === 0 ? p : undefined;
    });
    expect(ready(after)).toBe(true);
    expect(c.mutatingCalls()).toMatchObject({ DetachNetworkInterface: 2, DeleteNetworkInterface: 2 });
    expect(c.mutatingCalls().UnassignPrivateIpAddresses).toBeUndefined();
    // Events are recorded after the fact, asynchronously.
    await eventually(async () => (await eventsFor(node)).filter((e) => e.startsWith('DeletedENI')).length === 2);
    expect((await eventsFor(node)).filter((e) => e.startsWith('ENIGone'))).toEqual([]);
  });

  it('allocates in no-release mode, and makes no mutating call in read-only mode', async () => {
    c = await testCluster();
    await c.addClass('default', { ...POD_CLASS, preAllocate: 6, releaseDelaySeconds: 0 });
    const readOnlyNode = await c.addNode('i-demo-04');
    const ro = await c.startOperator({ config: { mode: 'read-only' } });
    await eventually(async () => (await c.pool(readOnlyNode)).status?.summary?.needed === 6);
    expect(c.mutatingCalls()).toEqual({});
    await ro.stop();
    await c.startOperator({ config: { mode: 'no-release' } });
    const [pool] = await allReady(c, [readOnlyNode]);
    expect(pool!.status!.summary!.available).toBe(6);
    expect(c.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    // That no-release never requests a release, however long the excess, is a one-reconcile case (test/operator).
  });

  it('deletes the ENIs of a node that goes away, then lets its pool go', async () => {
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    const node = await c.addNode('i-demo-05');
    await c.startOperator();
    const [pool] = await allReady(c, [node]);
    const enis = pool!.status!.enis!.map((e) => e.id);
    expect(pool!.metadata.finalizers).toContain('eniipam.io/release-enis');
    // The node is scaled in: its instance is released (its ENIs detach), then its Node is deleted.
    c.ecs.world.releaseInstance('i-demo-05');
    await c.kc.makeApiClient(CoreV1Api).deleteNode({ name: node });
    await eventually(async () => !(await c.pools()).some((p) => p.metadata.name === node), 15_000);
    for (const id of enis) expect(c.ecs.world.enis.has(id)).toBe(false);
    expect(c.mutatingCalls()).toMatchObject({ DeleteNetworkInterface: enis.length });
  });

  it('gives the ENIs of a pool deleted by hand back only as the agent confirms their addresses free, then makes the pool again', async () => {
    c = await testCluster();
    await c.addClass('default', { ...POD_CLASS, preAllocate: 10 });
    const node = await c.addNode('i-demo-01'); // ecs.g7.large: 6 IPs per ENI, so two ENIs
    await c.startOperator();
    const [pool] = await allReady(c, [node]);
    const [busy, idle] = pool!.status!.enis!;
    const agentPatch = (status: Record<string, unknown>) => writeAsAgent(c, node, status);
    const held = busy!.ips![1]!;
    await agentPatch({ used: { [held]: { pod: 'default/web', containerID: 'c1' } } });
    await eventually(async () => Object.keys((await c.pool(node)).status?.used ?? {}).length === 1);
    // Every address the agent was shown (the pool may have been topped up for the used address
    // meanwhile): one it was never shown is free as it is, and is not asked for.
    const shown = (p: ENIPool) =>
      (p.status?.enis ?? []).filter((e) => e.id === busy!.id || e.id === idle!.id).flatMap((e) => e.ips ?? []);
    await deletePool(c, node);
    // Every address is asked for; nothing goes before the agent answers.
    const asked = await eventually(async () => {
      const p = await c.pool(node);
      return shown(p).every((ip) => ip in (p.status?.releaseRequests ?? {})) ? p : undefined;
    });
    expect(c.mutatingCalls().DeleteNetworkInterface).toBeUndefined();
    const answers = Object.fromEntries(
      Object.keys(asked.status!.releaseRequests!).map((ip) => [
        ip,
        ack(asked, ip, ip === held ? 'do-not-release' : 'ready'),
      ]),
    );
    await agentPatch({ releaseAcks: answers });
    await eventually(() => !c.ecs.world.enis.has(idle!.id), 15_000);
    await eventually(async () =>
      (await eventsFor(node)).some((e) =>
        e.startsWith(`ENIsInUse: pool ${node} is deleted while node ${node} runs; ${busy!.id} go once`),
      ),
    );
    expect(c.ecs.world.enis.has(busy!.id)).toBe(true);
    // The pod lets its address go: the agent answers ready, and the last ENI goes with the pool.
    await agentPatch({ used: { [held]: null }, releaseAcks: { [held]: ack(asked, held) } });
    await eventually(() => !c.ecs.world.enis.has(busy!.id), 15_000);
    // The node still runs and its class still selects it: a new pool is made at once, and filled.
    const again = await eventually(async () => {
      const p = (await c.pools()).find((x) => x.metadata.name === node);
      return p && p.metadata.uid !== pool!.metadata.uid && !p.metadata.deletionTimestamp ? p : undefined;
    }, 15_000);
    expect(again.spec.className).toBe('default');
    await allReady(c, [node]);
  });

  it('keeps the ENIs of a Node deleted while its instance runs, says why, and lets them go after the grace period', async () => {
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    const node = await c.addNode('i-demo-05');
    await c.startOperator({ config: { nodeGoneGraceMs: 3000 } });
    const [pool] = await allReady(c, [node]);
    const enis = pool!.status!.enis!.map((e) => e.id);
    await c.kc.makeApiClient(CoreV1Api).deleteNode({ name: node });
    const held = await eventually(async () => {
      const p = await c.pool(node);
      return condition(p, 'Ready')?.reason === 'NodeGone' ? p : undefined;
    });
    expect(condition(held, 'Ready')!.message).toMatch(
      new RegExp(`^node ${node} is gone but instance i-demo-05 is Running; its ENIs are kept`),
    );
    for (const id of enis) expect(c.ecs.world.enis.has(id)).toBe(true);
    expect(c.mutatingCalls().DeleteNetworkInterface).toBeUndefined();
    await eventually(async () => (await eventsFor(node)).some((e) => e.startsWith('NodeGone: ')));
    await eventually(async () => !(await c.pools()).some((p) => p.metadata.name === node), 15_000);
    for (const id of enis) expect(c.ecs.world.enis.has(id)).toBe(false);
  });

  it('collects a leaked ENI that carries the cluster tags and belongs to no pool', async () => {
    c = await testCluster();
    const ecs = pop(c.ecs.url);
    const tag = (Key: string, Value: string) => ({ Key, Value });
    const leaked: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
      Tag: [tag('eni-ipam.io/cluster', CLUSTER_ID), tag('eni-ipam.io/node', 'ghost')],
    });
    const foreign: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
      Tag: [tag('eni-ipam.io/cluster', 'another-cluster')],
    });
    const op = await c.startOperator({ config: { gcMinAgeMs: 0 } });
    expect(await op.gc()).toEqual([leaked.NetworkInterfaceId]);
    expect(c.ecs.world.enis.has(leaked.NetworkInterfaceId)).toBe(false);
    expect(c.ecs.world.enis.has(foreign.NetworkInterfaceId)).toBe(true);
  });

  it('finds the instance of a node without providerID by its address, and flags a pool its class no longer selects', async () => {
    c = await testCluster();
    await c.addClass('tiered', { ...POD_CLASS, nodeSelector: { matchLabels: { tier: 'web' } } });
    const node = await c.addNode('i-demo-05', { tier: 'web' }, { withoutProviderID: true });
    await c.startOperator();
    const [pool] = await allReady(c, [node]);
    expect(pool!.spec.instanceID).toBe('i-demo-05');
    expect(c.ecs.stats().calls.DescribeInstances?.OK).toBe(1);
    await c.kc
      .makeApiClient(CoreV1Api)
      .patchNode({ name: node, body: { metadata: { labels: { tier: null } } } }, merge);
    const flagged = await eventually(async () => {
      const p = await c.pool(node);
      return p.metadata.annotations?.['eniipam.io/class-mismatch'] ? p : undefined;
    });
    expect(flagged.metadata.annotations!['eniipam.io/class-mismatch']).toBe(
      `class tiered no longer selects node ${node} (no class does)`,
    );
    expect(flagged.status!.enis!.length).toBe(pool!.status!.enis!.length);
  });

  it('corrects and reports a pool the cloud contradicts, and refills it', async () => {
    c = await testCluster();
    await c.addClass('default', { ...POD_CLASS, preAllocate: 5 });
    const node = await c.addNode('i-demo-04');
    const op = await c.startOperator();
    const [pool] = await allReady(c, [node]);
    const lost = pool!.status!.enis![0]!.id;
    // Someone detaches and deletes the ENI out of band.
    const ecs = pop(c.ecs.url);
    await ecs.request('DetachNetworkInterface', {
      RegionId: REGION,
      NetworkInterfaceId: lost,
      InstanceId: 'i-demo-04',
    });
    await eventually(() => c.ecs.state().enis.find((e) => e.id === lost)?.status === 'Available');
    await ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: lost });
    await eventually(() => !c.ecs.state().enis.some((e) => e.id === lost));
    await op.resync();
    await eventually(async () =>
      (await eventsFor(node)).some((e) => e.startsWith(`ENIGone: ENI ${lost} is no longer on i-demo-04`)),
    );
    const refilled = await eventually(async () => {
      const p = await c.pool(node);
      return ready(p) && !p.status!.enis!.some((e) => e.id === lost) ? p : undefined;
    });
    expect(refilled.status!.summary!.available).toBe(5);
  });

  it('allocates ahead for pods waiting on the node (surge)', async () => {
    c = await testCluster();
    await c.addClass('default', { ...POD_CLASS, preAllocate: 2 });
    const node = await c.addNode('i-demo-04');
    const core = c.kc.makeApiClient(CoreV1Api);
    for (let i = 0; i < 10; i++) {
      await core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: `waiting-${i}` },
          spec: { nodeName: node, containers: [{ name: 'c', image: 'x' }] },
          status: { phase: 'Pending' },
        },
      });
    }
    await c.startOperator();
    const pool = await eventually(async () => {
      const p = await c.pool(node);
      return p.status?.summary?.available === 12 ? p : undefined;
    });
    expect(ready(pool)).toBe(true);
    expect(c.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
  });

  it('usePrimaryENI: a new node is Ready after one assign on its primary ENI (no create, no attach); past its room an ENI of the class follows', async () => {
    c = await testCluster();
    await c.addClass('primary', { ...POD_CLASS, usePrimaryENI: true, preAllocate: 3 });
    await c.startOperator();
    const instance = c.ecs.world.instances.get('i-demo-04')!;
    const node = await c.addNode('i-demo-04');
    const pool = await eventually(async () => {
      const p = await c.pool(node);
      return ready(p) ? p : undefined;
    });
    expect(c.mutatingCalls()).toEqual({ AssignPrivateIpAddresses: 1 });
    const primary = c.ecs.world.enis.get(instance.primaryEniId)!;
    expect(pool.status!.enis).toEqual([
      expect.objectContaining({
        id: primary.id,
        deviceIndex: 0,
        vSwitchID: primary.vSwitchId,
        ips: primary.secondaryIps,
      }),
    ]);
    expect(primary.secondaryIps).toHaveLength(3);
    // The node's own address is never a pod's.
    expect(pool.status!.enis![0]!.ips).not.toContain(primary.primaryIp);
    // More than the primary ENI holds (ecs.g7.xlarge: 14 pod addresses): it is filled, then an ENI of the class is made.
    await c.custom.patchClusterCustomObject(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'primary',
        body: { spec: { preAllocate: 20 } },
      },
      merge,
    );
    const grown = await eventually(async () => {
      const p = await c.pool(node);
      return (p.status?.summary?.available ?? 0) >= 20 && ready(p) ? p : undefined;
    });
    expect(c.ecs.world.enis.get(primary.id)!.secondaryIps).toHaveLength(14);
    const secondary = grown.status!.enis!.filter((e) => e.id !== primary.id);
    expect(secondary).toHaveLength(1);
    expect(c.ecs.world.vSwitches.get(secondary[0]!.vSwitchID!)!.tags).toContainEqual({ key: 'role', value: 'pods' });
    expect(c.mutatingCalls()).toMatchObject({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
  });

  it('usePrimaryENI: a pool deleted gives the primary ENI’s addresses back once the agent confirms them free; one the node holds stays', async () => {
    c = await testCluster();
    await c.addClass('primary', { ...POD_CLASS, usePrimaryENI: true, preAllocate: 3 });
    await c.startOperator();
    const instance = c.ecs.world.instances.get('i-demo-04')!;
    const node = await c.addNode('i-demo-04');
    const [pool] = await allReady(c, [node]);
    const primary = c.ecs.world.enis.get(instance.primaryEniId)!;
    const given = [...primary.secondaryIps];
    expect(given).toHaveLength(3);
    await deletePool(c, node);
    // Asked for first: nothing is unassigned before the agent answers.
    const asked = await eventually(async () => {
      const p = await c!.pool(node);
      return given.every((ip) => ip in (p.status?.releaseRequests ?? {})) ? p : undefined;
    });
    expect(c.mutatingCalls().UnassignPrivateIpAddresses).toBeUndefined();
    // One the node configured on its own interface: refused, though no pod uses it.
    await writeAsAgent(c, node, {
      releaseAcks: Object.fromEntries(given.map((ip, k) => [ip, ack(asked, ip, k === 0 ? 'do-not-release' : 'ready')])),
    });
    const gone = given.slice(1);
    await eventually(() => gone.every((ip) => !c!.ecs.world.enis.get(primary.id)!.secondaryIps.includes(ip)), 15_000);
    // The node's own stays with it, and does not hold the pool back.
    expect(c.ecs.world.enis.get(primary.id)!.secondaryIps).toContain(given[0]);
    expect(c.ecs.world.enis.get(primary.id)!.primaryIp).toBe(primary.primaryIp);
    // The cloud holds the change when the call is carried out; the Event follows the answer.
    const released = `ReleasedIPs: pool ${node} is deleted: unassigned its 2 IPs from the primary ENI ${primary.id}`;
    await eventually(async () => (await eventsFor(node)).includes(released), 10_000);
    // The class still selects the node: a new pool is made and filled again.
    await eventually(async () => {
      const p = (await c!.pools()).find((x) => x.metadata.name === node);
      return p && p.metadata.uid !== pool!.metadata.uid && ready(p) ? p : undefined;
    }, 15_000);
  });

  it('adopts the ENIs an operator created but did not attach before it died: no duplicate, no leak', async () => {
    c = await testCluster();
    await c.addClass('default', { ...POD_CLASS, preAllocate: 8 });
    const nodes = [await c.addNode('i-demo-04'), await c.addNode('i-demo-07')];
    // The first operator dies right after its creates: its attaches never answer.
    c.ecs.setFaults({ rules: [{ action: 'AttachNetworkInterface', kind: 'timeout', rate: 1 }] });
    const first = await c.startOperator();
    await eventually(() => (c.ecs.stats().calls.CreateNetworkInterface?.OK ?? 0) === 2);
    // It dies: it stops, and its cloud client with its retries.
    await first.stop().catch(() => undefined);
    await c.clients[0]!.close();
    c.ecs.clearFaults();
    // Its attach calls still in the network may land now: the new operator must finish them, not replace them.
    await c.startOperator();
    await allReady(c, nodes);
    const ours = c.ecs.state().enis.filter((e) => e.tags.some((t) => t.key === 'eni-ipam.io/cluster'));
    expect(ours).toHaveLength(2);
    expect(ours.every((e) => e.status === 'InUse')).toBe(true);
    expect(c.mutatingCalls().CreateNetworkInterface).toBe(2);
  });
});
