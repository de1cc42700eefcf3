/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { ENIPool, ENIPoolClass } from '../../src/api/types.js';
import type { Operator } from '../../src/operator/operator.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

// Changes take effect from watch events, not from the periodic resync: every operator here
// resyncs once an hour, so anything that happens within seconds came from an event.
const NO_RESYNC = { resyncIntervalMs: 3_600_000 };
const POD_CLASS = { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'] };
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

let c: TestCluster;
afterEach(() => c?.close());

const classApi = { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipoolclasses' };
const getClass = async (name: string) => (await c.custom.getClusterCustomObject({ ...classApi, name })) as ENIPoolClass;
const condition = (o: { status?: { conditions?: any[] } }, type: string) =>
  o.status?.conditions?.find((x: any) => x.type === type);
async function nodeEvents(node: string): Promise<string[]> {
  const list = await c.kc.makeApiClient(CoreV1Api).listNamespacedEvent({
    namespace: 'default',
    fieldSelector: `involvedObject.kind=Node,involvedObject.name=${node}`,
  });
  return list.items.map((e) => `${e.reason}: ${e.message}`);
}
async function metric(op: Operator, line: string): Promise<number | undefined> {
  const text = await op.registry.metrics();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.split(' ').at(-1));
}

describe('placement follows classes, nodes and pools at once', () => {
  it('a deleted class hands its nodes to the next class that selects them, and its policy goes with it', async () => {
    c = await testCluster();
    await c.addClass('base', POD_CLASS);
    await c.addClass('big', {
      ...POD_CLASS,
      priority: 10,
      minAllocate: 12,
      nodeSelector: { matchLabels: { tier: 'big' } },
    });
    const node = await c.addNode('i-demo-01', { tier: 'big' });
    await c.startOperator({ config: NO_RESYNC });
    const [pool] = await allReady(c, [node]);
    expect(pool!.spec).toMatchObject({ className: 'big', minAllocate: 12 });
    await c.custom.deleteClusterCustomObject({ ...classApi, name: 'big' });
    const moved = await eventually(async () => {
      const p = await c.pool(node);
      return p.spec.className === 'base' ? p : undefined;
    }, 10_000);
    // The deleted class's sizing is dropped, not kept: the pool has the new class's (its default).
    expect(moved.spec.minAllocate).toBe((await getClass('base')).spec.minAllocate);
    expect(moved.spec.minAllocate).not.toBe(12);
    expect(moved.metadata.labels?.['eniipam.io/class']).toBe('base');
    await eventually(async () => (await getClass('base')).status?.matchedNodes === 1, 10_000);
  });

  it('a class whose spec changes updates its pools at once', async () => {
    c = await testCluster();
    await c.addClass('default', { ...POD_CLASS, preAllocate: 4 });
    const node = await c.addNode('i-demo-02');
    await c.startOperator({ config: NO_RESYNC });
    await allReady(c, [node]);
    await c.custom.patchClusterCustomObject(
      { ...classApi, name: 'default', body: { spec: { preAllocate: 9 } } },
      merge,
    );
    await eventually(async () => (await c.pool(node)).spec.preAllocate === 9, 10_000);
    await eventually(async () => ((await c.pool(node)).status?.summary?.available ?? 0) >= 9, 20_000);
  });

  it('a node that no class selects is told (an Event on the Node, a count, no pool); a class for it serves it at once', async () => {
    c = await testCluster();
    await c.addClass('gpu', { ...POD_CLASS, nodeSelector: { matchLabels: { gpu: 'true' } } });
    const node = await c.addNode('i-demo-03');
    const op = await c.startOperator({ config: NO_RESYNC });
    const events = await eventually(async () => {
      const e = await nodeEvents(node);
      return e.length ? e : undefined;
    }, 10_000);
    expect(events).toEqual([
      `NoENIPoolClass: no ENIPoolClass selects node ${node}: it gets no pool and no pod addresses from eni-ipam; ` +
        'create a class whose nodeSelector matches its labels',
    ]);
    expect(await metric(op, 'eni_ipam_nodes_unserved{reason="NoClass"}')).toBe(1);
    expect(await c.pools()).toEqual([]);
    await c.addClass('everyone', POD_CLASS);
    await allReady(c, [node], 15_000);
    expect(await metric(op, 'eni_ipam_nodes_unserved{reason="NoClass"}')).toBe(0);
  });

  it('a node whose winning class is invalid is told, and gets no pool from it', async () => {
    c = await testCluster();
    await c.addClass('broken', { vSwitchIDs: ['vsw-nope'], securityGroupIDs: ['sg-demo-pods'] });
    const node = await c.addNode('i-demo-04');
    const op = await c.startOperator({ config: NO_RESYNC });
    const events = await eventually(async () => {
      const e = await nodeEvents(node);
      return e.length ? e : undefined;
    }, 10_000);
    expect(events[0]).toMatch(
      new RegExp(
        `^ClassInvalid: class broken selects node ${node} but is not valid \\(VSwitchNotFound: vSwitch vsw-nope`,
      ),
    );
    expect(await metric(op, 'eni_ipam_nodes_unserved{reason="ClassInvalid"}')).toBe(1);
    expect(await c.pools()).toEqual([]);
    // Fixed: the node is served at once.
    await c.custom.patchClusterCustomObject(
      { ...classApi, name: 'broken', body: { spec: { vSwitchIDs: null, vSwitchTags: { role: 'pods' } } } },
      merge,
    );
    await allReady(c, [node], 15_000);
  });

  it('a class whose vSwitches are all outside a node’s zone says so for that zone, and so do the node and its pool', async () => {
    c = await testCluster();
    // i-demo-01 is in zone cn-hangzhou-h; vsw-i-pods is in -i.
    await c.addClass('zone-i', { vSwitchIDs: ['vsw-i-pods'], securityGroupIDs: ['sg-demo-pods'] });
    const node = await c.addNode('i-demo-01');
    const op = await c.startOperator({ config: NO_RESYNC });
    const cls = await eventually(async () => {
      const x = await getClass('zone-i');
      return condition(x, 'ZonesCovered')?.status === 'False' ? x : undefined;
    }, 10_000);
    expect(condition(cls, 'Valid')?.status).toBe('True');
    expect(condition(cls, 'ZonesCovered')).toMatchObject({
      reason: 'NoVSwitchInZone',
      message:
        `nodes in zone cn-hangzhou-h (${node}) have no vSwitch of this class (its vSwitches cover cn-hangzhou-i): ` +
        'add a vSwitch of each of these zones to vSwitchIDs or vSwitchTags',
    });
    await eventually(async () => (await nodeEvents(node)).some((e) => e.startsWith('ZoneNotCovered: class zone-i')));
    expect(await metric(op, 'eni_ipam_nodes_unserved{reason="ZoneNotCovered"}')).toBe(1);
    const pool = await eventually(async () => {
      const p = (await c.pools())[0] as ENIPool | undefined;
      return p && condition(p, 'Ready')?.reason === 'NoVSwitchInZone' ? p : undefined;
    }, 10_000);
    expect(condition(pool, 'Ready')?.message).toBe(
      'no vSwitch of class zone-i is in zone cn-hangzhou-h (its vSwitches are in cn-hangzhou-i): ' +
        'add one of zone cn-hangzhou-h to vSwitchIDs or vSwitchTags',
    );
  });

  it('a node whose labels change moves to the class that now wins, at once', async () => {
    c = await testCluster();
    await c.addClass('base', POD_CLASS);
    await c.addClass('big', {
      ...POD_CLASS,
      priority: 10,
      preAllocate: 10,
      nodeSelector: { matchLabels: { tier: 'big' } },
    });
    const node = await c.addNode('i-demo-05');
    await c.startOperator({ config: NO_RESYNC });
    await allReady(c, [node]);
    expect((await c.pool(node)).spec.className).toBe('base');
    await c.kc
      .makeApiClient(CoreV1Api)
      .patchNode({ name: node, body: { metadata: { labels: { tier: 'big' } } } }, merge);
    await eventually(async () => (await c.pool(node)).spec.className === 'big', 10_000);
    await eventually(async () => (await getClass('big')).status?.matchedNodes === 1, 10_000);
    await eventually(async () => (await getClass('base')).status?.matchedNodes === 0, 10_000);
  });
});
