import { afterEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Taint } from '@kubernetes/client-node';
import type { ENIPool } from '../../src/api/types.js';
import {
  POD_CLASS,
  eventsFor,
  poolWhere,
  ready,
  startAgentFor,
  testCluster,
  type TestCluster,
} from '../helpers/cluster.js';
import { eventually, sleep } from '../helpers/ecs.js';

/*
 * Nodes take pods only when their pool can serve them: a node registers with eni-ipam's startup
 * taint, and the operator removes it once the node's pool is first Ready, never before, never
 * adding it back, and never touching another taint.
 */
let c: TestCluster | undefined;
afterEach(async () => {
  await c?.close();
  c = undefined;
});

const STARTUP = { key: 'eniipam.io/pool-not-ready', effect: 'NoSchedule' };
const OTHER = { key: 'example.com/dedicated', value: 'batch', effect: 'NoSchedule' };
const condition = (p: ENIPool, type: string) => p.status?.conditions?.find((x) => x.type === type);

/** The node's taints but those Kubernetes keeps itself (`node.kubernetes.io/not-ready` until a kubelet reports Ready). */
async function taintsOf(cluster: TestCluster, node: string): Promise<V1Taint[]> {
  const taints = (await cluster.kc.makeApiClient(CoreV1Api).readNode({ name: node })).spec?.taints ?? [];
  return taints.filter((t) => !t.key.startsWith('node.kubernetes.io/'));
}

const strip = (t: V1Taint) => ({ key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect });

describe('the startup taint', () => {
  it('goes once the pool is Ready, the node’s other taints stay, and it is not added back when the pool falls short', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('pods', { ...POD_CLASS, preAllocate: 4 });
    await cluster.startOperator();
    const node = await cluster.addNode('i-demo-02', {}, { taints: [OTHER, STARTUP] });
    const pool = await poolWhere(cluster, node, ready);
    await eventually(async () => (await taintsOf(cluster, node)).length === 1);
    expect((await taintsOf(cluster, node)).map(strip)).toEqual([OTHER]);
    expect(pool.status!.summary!.available).toBeGreaterThanOrEqual(4);
    await eventually(async () =>
      (await eventsFor(cluster, node)).some((e) =>
        e.startsWith(`StartupTaintRemoved: removed taint eniipam.io/pool-not-ready:NoSchedule from node ${node}`),
      ),
    );
    // The pool wants more than the instance holds: not Ready, and the node keeps taking pods.
    await cluster.custom.patchClusterCustomObject(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'pods',
        body: { spec: { preAllocate: 500 } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await poolWhere(cluster, node, (p) => condition(p, 'Ready')?.status === 'False', 20_000);
    await sleep(1500);
    expect((await taintsOf(cluster, node)).map(strip)).toEqual([OTHER]);
  }, 60_000);

  it('goes while another writer keeps changing the Node, and nothing that writer added is lost', async () => {
    const cluster = (c = await testCluster());
    await cluster.addClass('pods', { ...POD_CLASS, preAllocate: 4 });
    const node = await cluster.addNode('i-demo-02', {}, { taints: [STARTUP] });
    const core = cluster.kc.makeApiClient(CoreV1Api);
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const json = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
    // A kubelet-like writer: the Node changes every 100 ms, and halfway it gets a taint of its own.
    let beats = 0;
    let writing = true;
    const writer = (async () => {
      while (writing) {
        beats++;
        await core.patchNode(
          { name: node, body: { metadata: { labels: { 'example.com/beat': String(beats) } } } },
          merge,
        );
        if (beats === 2)
          await core.patchNode({ name: node, body: [{ op: 'add', path: '/spec/taints/-', value: OTHER }] }, json);
        await sleep(100);
      }
    })();
    await cluster.startOperator();
    try {
      await poolWhere(cluster, node, ready);
      await eventually(async () => !(await taintsOf(cluster, node)).some((t) => t.key === STARTUP.key), 20_000);
      await eventually(() => beats > 6, 10_000);
      expect((await taintsOf(cluster, node)).map(strip)).toEqual([OTHER]);
    } finally {
      writing = false;
      await writer;
    }
  }, 60_000);

  it('stays while the vSwitch is exhausted, and the pool says why', async () => {
    const cluster = (c = await testCluster());
    // The class's one vSwitch has no address left.
    const small = cluster.ecs.world.vSwitches.get('vsw-i-small')!;
    const taken = small.pool.take(small.pool.free)!;
    await cluster.addClass('small', {
      vSwitchIDs: ['vsw-i-small'],
      securityGroupIDs: ['sg-demo-pods'],
      preAllocate: 4,
    });
    await cluster.startOperator();
    const node = await cluster.addNode('i-demo-02', {}, { taints: [STARTUP] });
    const pool = await poolWhere(cluster, node, (p) => condition(p, 'Exhausted')?.status === 'True', 20_000);
    expect(condition(pool, 'Ready')).toMatchObject({ status: 'False', reason: 'VSwitchExhausted' });
    expect(condition(pool, 'Ready')!.message).toContain('vsw-i-small');
    await sleep(1500);
    expect((await taintsOf(cluster, node)).map(strip)).toEqual([STARTUP]);
    // A pod that got there anyway (it tolerates the taint) is told why, in the pool's words.
    const agent = await startAgentFor(cluster, node, { cooldownMs: 100, statusIntervalMs: 200 });
    try {
      expect(agent.allocate({ containerId: 'c0', ifName: 'eth0', pod: 'default/p0' })).toBe('pool-empty');
      expect(agent.whyEmpty()).toMatch(/^the pool is exhausted \(VSwitchExhausted: .*vsw-i-small/);
    } finally {
      await agent.stop();
    }
    // Addresses come back to the vSwitch: the pool fills, and the taint goes.
    for (const ip of taken.slice(0, 8)) small.pool.release(ip);
    await cluster.operators[0]!.cloud.vSwitches({ refresh: true });
    // Looked at again (as the periodic resync would): a change to the Node enqueues its pool.
    await cluster.kc
      .makeApiClient(CoreV1Api)
      .patchNode(
        { name: node, body: { metadata: { labels: { 'example.com/touched': 'yes' } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    await poolWhere(cluster, node, ready, 30_000);
    await eventually(async () => (await taintsOf(cluster, node)).length === 0, 20_000);
  }, 60_000);
});
