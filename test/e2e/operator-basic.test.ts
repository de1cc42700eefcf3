import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';

let c: TestCluster;
beforeAll(async () => {
  c = await testCluster();
});
afterAll(() => c.close());

describe('operator, basic convergence', () => {
  it('fills every pool with one create and one attach per node', async () => {
    await c.addClass('default', { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'], preAllocate: 5 });
    const nodes: string[] = [];
    for (const id of ['i-demo-01', 'i-demo-02', 'i-demo-03', 'i-demo-04']) nodes.push(await c.addNode(id));
    await c.startOperator();
    const pools = await allReady(c, nodes);
    for (const p of pools) {
      expect(p.status!.summary!.available).toBeGreaterThanOrEqual(5);
      expect(p.status!.enis![0]!.ips!.length).toBe(5);
    }
    expect(c.mutatingCalls()).toEqual({ CreateNetworkInterface: 4, AttachNetworkInterface: 4 });
  });
});
