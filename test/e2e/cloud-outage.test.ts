import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer } from 'node:net';
import { CoreV1Api } from '@kubernetes/client-node';
import type { ENIPoolClass } from '../../src/api/types.js';
import type { Operator } from '../../src/operator/operator.js';
import {
  allReady,
  conditionOf,
  POD_CLASS,
  shortLease,
  switchableCredentials,
  testCluster,
  WRONG_KEY,
  type TestCluster,
} from '../helpers/cluster.js';
import { DEMO_KEY, eventually, sleep } from '../helpers/ecs.js';

// A cloud the operator cannot use is visible where users look, within seconds: Degraded on pools
// and classes with the cause and the fix, an Event, metrics, and readiness. Real time, real client.
let c: TestCluster;
afterEach(() => c?.close());

const classApi = { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipoolclasses' };
async function eventsOf(name: string): Promise<string[]> {
  const list = await c.kc
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${name}` });
  return list.items.map((e) => `${e.reason}: ${e.message}`);
}
async function metrics(op: Operator): Promise<string> {
  return op.registry.metrics();
}

describe('a cloud the operator cannot use', () => {
  it('wrong AccessKey: pools and classes say so with the fix within seconds, the replica is not ready, retries back off; fixed, it recovers', async () => {
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    const node = await c.addNode('i-demo-01');
    const creds = switchableCredentials(WRONG_KEY);
    const t0 = Date.now();
    const op = await c.startOperator({ credentials: creds });
    const pool = await eventually(async () => {
      const p = (await c.pools())[0];
      return conditionOf(p, 'Degraded')?.status === 'True' ? p : undefined;
    }, 10_000);
    expect(Date.now() - t0).toBeLessThan(10_000);
    const degraded = conditionOf(pool, 'Degraded');
    expect(degraded.reason).toBe('CloudAuthFailed');
    expect(degraded.message).toMatch(/^DescribeNetworkInterfaces: SignatureDoesNotMatch: /);
    expect(degraded.message).toContain(
      "the cloud refuses the operator's credentials (files in /etc/eni-ipam/credentials): check the AccessKey id and secret",
    );
    expect(degraded.message).not.toContain(WRONG_KEY.accessKeySecret);
    const cls = await eventually(async () => {
      const x = (await c.custom.getClusterCustomObject({ ...classApi, name: 'default' })) as ENIPoolClass;
      return conditionOf(x, 'Degraded')?.status === 'True' ? x : undefined;
    }, 10_000);
    expect(conditionOf(cls, 'Degraded').reason).toBe('CloudAuthFailed');
    await eventually(async () => (await eventsOf(node)).some((e) => e.startsWith('CloudAuthFailed: ')), 5000);
    await eventually(async () => (await eventsOf('default')).some((e) => e.startsWith('CloudAuthFailed: ')), 5000);
    expect(op.ready).toBe(false);
    const text = await metrics(op);
    expect(text).toContain('eni_ipam_cloud_up 0');
    expect(text).toContain('eni_ipam_cloud_error_info{code="SignatureDoesNotMatch",reason="CloudAuthFailed"} 1');
    // Nothing was planned on a cloud never read: not one mutating call.
    expect(c.mutatingCalls()).toEqual({});

    // The full resync is retried with a growing delay (2 s doubling, jittered), not every 2 s.
    await sleep(14_000);
    const resyncs = c.ecs.calls({ since: t0, action: 'DescribeNetworkInterfaces' }).length;
    expect(resyncs).toBeGreaterThanOrEqual(3);
    expect(resyncs).toBeLessThanOrEqual(5);

    creds.set(DEMO_KEY);
    await allReady(c, [node], 40_000);
    await eventually(async () => conditionOf(await c.pool(node), 'Degraded')?.status === 'False', 10_000);
    expect(op.ready).toBe(true);
    expect(await metrics(op)).toContain('eni_ipam_cloud_up 1');
    expect(await metrics(op)).not.toContain('eni_ipam_cloud_error_info{');
  }, 90_000);

  it('a missing RAM permission names the action to grant; an unreachable endpoint says to check the endpoint', async () => {
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    await c.addNode('i-demo-02');
    c.ecs.setFaults({
      rules: [{ action: 'DescribeNetworkInterfaces', kind: 'error', code: 'Forbidden.RAM', rate: 1 }],
    });
    await c.startOperator();
    const denied = await eventually(async () => conditionOf((await c.pools())[0], 'Degraded'), 10_000);
    expect(denied).toMatchObject({ status: 'True', reason: 'CloudPermissionDenied' });
    expect(denied.message).toContain('grant the RAM action ecs:DescribeNetworkInterfaces');
    await c.close();

    // A port nobody listens on.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    await c.addNode('i-demo-03');
    const op = await c.startOperator({ ecsEndpoint: `http://127.0.0.1:${port}`, retry: { maxAttempts: 2 } });
    const unreachable = await eventually(async () => conditionOf((await c.pools())[0], 'Degraded'), 15_000);
    expect(unreachable).toMatchObject({ status: 'True', reason: 'CloudUnreachable' });
    expect(unreachable.message).toContain('the OpenAPI endpoint does not answer: check --ecs-endpoint');
    expect(op.ready).toBe(false);
  }, 60_000);

  it('a replica that cannot read the cloud leaves the lease to one that can; alone, it leads after a while to say why', async () => {
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    await c.addNode('i-demo-06');
    // The broken replica starts first (a rollout's new pod), the working one after it.
    const bad = await c.startOperator({
      leaderElection: shortLease('bad'),
      credentials: switchableCredentials(WRONG_KEY),
    });
    await sleep(500);
    const good = await c.startOperator({ leaderElection: shortLease('good') });
    await eventually(() => good.isLeader && good.ready, 10_000);
    await sleep(9000); // past the broken replica's deferral (two lease durations)
    expect(bad.isLeader).toBe(false);
    expect(good.isLeader).toBe(true);
    await good.stop();
    // No replica can read the cloud now: the broken one leads after its deferral, and says why.
    await eventually(() => bad.isLeader, 15_000);
    await eventually(async () => conditionOf((await c.pools())[0], 'Degraded')?.reason === 'CloudAuthFailed', 10_000);
  }, 60_000);

  it('a follower with wrong credentials is not ready; one with good credentials is, without leading', async () => {
    c = await testCluster();
    const leader = await c.startOperator({ leaderElection: shortLease('a') });
    await eventually(() => leader.isLeader && leader.ready, 10_000);
    const good = await c.startOperator({ leaderElection: shortLease('b') });
    const bad = await c.startOperator({
      leaderElection: shortLease('c'),
      credentials: switchableCredentials(WRONG_KEY),
    });
    await eventually(() => good.ready, 10_000);
    await sleep(1000);
    expect(good.isLeader).toBe(false);
    expect(bad.ready).toBe(false);
    expect(bad.isLeader).toBe(false);
    expect(await metrics(bad)).toContain('eni_ipam_cloud_error_info{code="SignatureDoesNotMatch"');
  }, 30_000);
});
