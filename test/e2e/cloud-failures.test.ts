import { afterEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import type { ENIPool } from '../../src/api/types.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

let c: TestCluster;
afterEach(() => c?.close());

const POD_CLASS = { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'], preAllocate: 8 };
const condition = (p: ENIPool, type: string) => p.status?.conditions?.find((x) => x.type === type);
const ownedEnis = (node: string) =>
  c.ecs.state().enis.filter((e) => e.tags.some((t) => t.key === 'eni-ipam.io/node' && t.value === node));

async function events(name: string) {
  const list = await c.kc
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${name}` });
  return list.items;
}

describe('cloud failures, as a node sees them', () => {
  it('backs off a permission error, marks the pool Degraded with the missing RAM action, and folds its Events', async () => {
    c = await testCluster();
    c.ecs.setFaults({ rules: [{ action: 'CreateNetworkInterface', kind: 'error', code: 'Forbidden.RAM', rate: 1 }] });
    await c.addClass('default', POD_CLASS);
    const nodes = [await c.addNode('i-demo-04'), await c.addNode('i-demo-05')];
    await c.startOperator();
    // The class is judged, the node placed, the pool made and its first create refused: seconds on a loaded machine.
    const degraded = await eventually(async () => {
      const p = await c.pool(nodes[0]!);
      return condition(p, 'Degraded')?.status === 'True' ? p : undefined;
    }, 20_000);
    expect(condition(degraded, 'Degraded')).toMatchObject({ reason: 'CloudCallRefused' });
    expect(condition(degraded, 'Degraded')!.message).toMatch(
      /^CreateNetworkInterface: Forbidden.RAM: .*; grant the RAM action ecs:CreateNetworkInterface to the operator's identity/,
    );
    expect(condition(degraded, 'Degraded')!.message).not.toMatch(/RequestId/);
    // The second attempt comes after the 5 s back-off: its Event folds into the first one.
    const failed = await eventually(async () => {
      const list = (await events(nodes[0]!)).filter((e) => e.reason === 'CreateENIFailed');
      return (list[0]?.count ?? 0) >= 2 ? list : undefined;
    }, 15_000);
    expect(failed).toHaveLength(1);
    // Back-off of 5 s, then 10 s: by then two or three attempts per node, not one every reconcile.
    // (No call during a back-off, and the back-off doubling, are one-reconcile cases in test/operator.)
    const attempts = c.ecs.stats().calls.CreateNetworkInterface?.['Forbidden.RAM'] ?? 0;
    expect(attempts).toBeGreaterThanOrEqual(nodes.length);
    expect(attempts).toBeLessThanOrEqual(nodes.length * 3);
    c.ecs.clearFaults();
    const [pool] = await allReady(c, [nodes[0]!], 30_000);
    await eventually(async () => condition(await c.pool(nodes[0]!), 'Degraded')?.status === 'False', 5000);
    expect(pool!.status!.summary!.available).toBeGreaterThanOrEqual(8);
  }, 60_000);

  it('creates no second ENI when a create was carried out but its answer was lost', async () => {
    c = await testCluster();
    c.ecs.setFaults({ rules: [{ action: 'CreateNetworkInterface', kind: 'drop-answer', rate: 1, times: 1 }] });
    await c.addClass('default', POD_CLASS);
    const node = await c.addNode('i-demo-04'); // 15 IPs per ENI: one ENI
    // One attempt per call: the client gives up at once, and the operator must find out what happened.
    await c.startOperator({ retry: { maxAttempts: 1 } });
    const [pool] = await allReady(c, [node], 30_000);
    expect(pool!.status!.enis).toHaveLength(1);
    expect(ownedEnis(node)).toHaveLength(1);
    // Found by its token tag: not created again.
    expect(c.ecs.stats().calls.CreateNetworkInterface).toEqual({ DropAnswer: 1 });
  }, 60_000);

  it('keeps an ENI whose attach was throttled, and attaches it later instead of creating another', async () => {
    c = await testCluster();
    c.ecs.setFaults({
      rules: [{ action: 'AttachNetworkInterface', kind: 'error', code: 'Throttling.User', rate: 1, times: 1 }],
    });
    await c.addClass('default', POD_CLASS);
    const node = await c.addNode('i-demo-04');
    await c.startOperator({ retry: { maxAttempts: 1 } });
    const [pool] = await allReady(c, [node], 30_000);
    expect(pool!.status!.enis).toHaveLength(1);
    expect(ownedEnis(node)).toHaveLength(1);
    expect(c.mutatingCalls()).toEqual({ CreateNetworkInterface: 1, AttachNetworkInterface: 1 });
    expect(c.ecs.stats().calls.AttachNetworkInterface).toMatchObject({ 'Throttling.User': 1, OK: 1 });
  }, 60_000);
});
