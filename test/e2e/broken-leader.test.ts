/**
 * Found in review (it failed before the fix): a replica that cannot read the cloud
 * keeps the Lease for good once it has it, while a replica that can read it stands by.
 *
 * operator.ts campaignOnceVerified lets a replica whose cloud reads fail campaign after two lease
 * durations "should none of them read the cloud"; nothing ever makes such a leader step aside when
 * another replica can read the cloud. A stalled `helm upgrade` with a wrong AccessKey (the new pod
 * not ready, the old ReplicaSet's pods kept) is enough: once the working leader restarts or is
 * drained, the broken pod, past its deferral, takes the released Lease; the working pod that comes
 * back is ready and verified, but a follower forever. Nothing is planned on any pool (all say
 * CloudAuthFailed) although a working replica runs.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  conditionOf,
  POD_CLASS,
  shortLease,
  switchableCredentials,
  testCluster,
  WRONG_KEY,
  type TestCluster,
} from '../helpers/cluster.js';
import { eventually, sleep } from '../helpers/ecs.js';

let c: TestCluster;
afterEach(() => c?.close());

describe('a leader that cannot read the cloud, beside a replica that can', () => {
  it('hands the Lease to the replica that can read the cloud', async () => {
    c = await testCluster();
    await c.addClass('default', POD_CLASS);
    const node = await c.addNode('i-demo-06');
    const good = await c.startOperator({ leaderElection: shortLease('good-1') });
    const bad = await c.startOperator({
      leaderElection: shortLease('bad'),
      credentials: switchableCredentials(WRONG_KEY),
    });
    await eventually(() => good.isLeader && good.ready, 10_000);
    await sleep(9000); // the broken replica is past its deferral (two lease durations)
    expect(bad.isLeader).toBe(false); // held: it does not take the Lease from a working leader

    // The working leader restarts (a drain, an OOM kill): it releases the Lease on the way out.
    await good.stop();
    await eventually(() => bad.isLeader, 10_000);
    const back = await c.startOperator({ leaderElection: shortLease('good-2') });
    await eventually(() => back.ready, 10_000);

    // Within a few lease durations the replica that reads the cloud leads and plans. The broken one steps aside
    // when a failed read finds it past its deferral, and its reads back off: on a loaded machine that can take
    // longer than three lease durations, so wait for it (up to 30 s) and say who leads if it never comes.
    await eventually(() => back.isLeader && !bad.isLeader, 30_000).catch(() => {
      throw new Error(`after 30 s: back leads ${back.isLeader}, the broken replica leads ${bad.isLeader}`);
    });
    await eventually(async () => conditionOf(await c.pool(node), 'Degraded')?.status === 'False', 20_000);
  }, 120_000);
});
