import { afterAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api, V1MicroTime } from '@kubernetes/client-node';
import { POD_CLASS, allReady, shortLease, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

// Only the leader reads the cloud, so only it may say how much room a vSwitch has left: a standby's
// list is what it knew when it last led, and alerts take the least across replicas.
let c: TestCluster;
afterAll(() => c?.close());

const vSwitchSeries = async (registry: { metrics(): Promise<string> }) =>
  (await registry.metrics()).split('\n').filter((l) => /^eni_ipam_vswitch_\w+\{/.test(l));

describe('vSwitch headroom across replicas', () => {
  it('the leader exports each vSwitch’s room; once another holds the Lease, the replica that led exports none', async () => {
    c = await testCluster();
    await c.addClass('default', { ...POD_CLASS, preAllocate: 2 });
    const first = await c.startOperator({ leaderElection: shortLease('first') });
    await eventually(() => first.isLeader, 10_000);
    const node = await c.addNode('i-demo-02');
    await allReady(c, [node]);
    expect((await vSwitchSeries(first.registry)).some((l) => l.startsWith('eni_ipam_vswitch_free_ips{'))).toBe(true);
    // Another holder takes the Lease: the first, still running, steps down and stands by.
    const leases = c.kc.makeApiClient(CoordinationV1Api);
    const lease = await leases.readNamespacedLease({ name: 'eni-ipam-operator', namespace: 'default' });
    await leases.replaceNamespacedLease({
      name: 'eni-ipam-operator',
      namespace: 'default',
      body: {
        ...lease,
        spec: { ...lease.spec, holderIdentity: 'another', renewTime: new V1MicroTime(), leaseDurationSeconds: 60 },
      },
    });
    await eventually(() => !first.isLeader, 15_000);
    expect(await vSwitchSeries(first.registry)).toEqual([]);
  }, 60_000);
});
