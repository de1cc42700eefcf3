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

  it('exports pool, node, ENI and vSwitch metrics', async () => {
    const text = await c.operators[0]!.registry.metrics();
    expect(text).toMatch(/^eni_ipam_nodes\{state="ready"\} 4$/m);
    expect(text).toMatch(/^eni_ipam_enis\{state="InUse"\} 4$/m);
    expect(text).toMatch(/^eni_ipam_pool_ips\{node="node-01",kind="available"\} 5$/m);
    expect(text).toMatch(/^eni_ipam_vswitch_free_ips\{vswitch="vsw-i-small",zone="cn-hangzhou-i"\} 6$/m);
    expect(text).toMatch(/^eni_ipam_deficit_to_published_seconds_count 4$/m);
    expect(text).toMatch(/^eni_ipam_leader 1$/m);
  });
});
