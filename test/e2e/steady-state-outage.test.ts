/**
 * Found in review (it failed before the fix): a cloud that stops working once the
 * operator runs (the AccessKey in the mounted Secret rotated to a wrong one, the RAM policy
 * detached) is not visible within a minute: pools and classes keep Degraded=False and
 * `eni_ipam_cloud_up` stays 1 until the next full resync, up to `--resync-interval` (5 min) later,
 * so EniIpamCloudUnavailable (for: 1m) fires after up to 6 minutes.
 *
 * Only fleet-wide reads move CloudHealth (operator.ts: the leader's full resync, scheduled every
 * resyncIntervalMs while reads work; a follower's probe, likewise), and a pool with nothing to do
 * makes no cloud call, so nothing else notices.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  allReady,
  conditionOf,
  POD_CLASS,
  switchableCredentials,
  testCluster,
  WRONG_KEY,
  type TestCluster,
} from '../helpers/cluster.js';
import { DEMO_KEY, eventually } from '../helpers/ecs.js';

let c: TestCluster;
afterEach(() => c?.close());

describe('the cloud breaks while the operator runs', () => {
  it('pools say Degraded (and eni_ipam_cloud_up says 0) within a minute', async () => {
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    const node = await c.addNode('i-demo-01');
    const creds = switchableCredentials(DEMO_KEY);
    const op = await c.startOperator({ credentials: creds }); // the default 5-minute resync
    await allReady(c, [node], 30_000);
    creds.set(WRONG_KEY); // the Secret's files now hold a wrong key
    // Before the fix: Degraded stays False, cloud_up 1, for up to the resync interval.
    await eventually(async () => conditionOf(await c.pool(node), 'Degraded')?.status === 'True', 60_000, 1000);
    expect(await op.registry.metrics()).toContain('eni_ipam_cloud_up 0');
  }, 120_000);
});
