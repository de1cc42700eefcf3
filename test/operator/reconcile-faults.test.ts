/**
 * Defects found by a review of the observe -> plan -> act -> publish reshaping (each failed on the
 * code it reviewed): describes the plan needs, the status after acting, the background ENI work,
 * and failures a resync does not explain.
 */
import { describe, expect, it } from '@jest/globals';
import { CloudError, type NetworkInterface } from '../../src/cloud/index.js';
import type { EniOperation } from '../../src/operator/eni/ledger.js';
import { NODE, NOW, conditionIn, eni, fixture, pool, scriptedLifecycle, settle, type Fixture } from './fakes.js';

const forbidden = (action: string) => new CloudError(action, 'Forbidden.RAM', 'you are not authorized', 'req-0');
const throttled = (action: string) => new CloudError(action, 'Throttling.User', 'slow down', 'req-0');
const lastPatch = (f: Fixture) => f.statusWrites().at(-1)?.patch;

/** Makes the fake cloud answer a describe with an error while `failing()` says so. */
function failDescribe(f: Fixture, list: 'vSwitches' | 'securityGroups', e: () => CloudError, failing: () => boolean) {
  const d = f.describe as unknown as Record<string, unknown>;
  let value = d[list];
  Object.defineProperty(d, list, {
    get: () => {
      if (failing()) throw e();
      return value;
    },
    set: (v) => (value = v),
  });
}

describe('observe: describes the plan needs', () => {
  it('a pool that selects security groups by tag still fills its ENIs by assigns while DescribeSecurityGroups fails', async () => {
    // Nothing is to be created (eni-1 has room for the 3 IPs missing): the security groups are
    // not needed. Before the reshaping they were read only when a create was planned.
    const f = fixture({ spec: { securityGroupTags: { pods: 'yes' } }, enis: [eni(1, 5)] });
    failDescribe(
      f,
      'securityGroups',
      () => forbidden('DescribeSecurityGroups'),
      () => true,
    );
    await f.reconcile();
    expect(f.ecs.calls.map((c) => c.action)).toEqual(['AssignPrivateIpAddresses']);
    expect(f.statusWrites()).toHaveLength(1);
  });

  it('a describe that failed three times and then works again leaves the pool not Degraded', async () => {
    const f = fixture({ enis: [eni(1, 8)] });
    let failures = 3;
    failDescribe(
      f,
      'vSwitches',
      () => (failures--, throttled('DescribeVSwitches')),
      () => failures > 0,
    );
    for (let i = 0; i < 3; i++) {
      await f.reconcile();
      f.clock.now += 120_000; // past any back-off
    }
    expect(failures).toBe(0);
    await f.reconcile();
    expect(conditionIn(lastPatch(f), 'Degraded')).toMatchObject({ status: 'False', reason: 'Healthy' });
  });

  it('a describe refused for good (RAM) shows Degraded in the status soon after', async () => {
    const f = fixture({ enis: [eni(1, 8)] });
    failDescribe(
      f,
      'vSwitches',
      () => forbidden('DescribeVSwitches'),
      () => true,
    );
    for (let i = 0; i < 5; i++) {
      const r = await f.reconcile();
      f.clock.now += Math.max(100, r.requeueAfterMs ?? 0);
    }
    expect(f.events.events.map((e) => e.reason)).toContain('CloudCallFailed');
    expect(conditionIn(lastPatch(f), 'Degraded')).toMatchObject({ status: 'True' });
  });
});

describe('publish: the status as the cloud is after acting', () => {
  it('summary.available equals the IPs of the published InUse ENIs when an attach lands while the reconcile assigns', async () => {
    // eni-2 is being attached by the background work (its 10 IPs in flight); eni-1 gets 5 more.
    let attach!: EniOperation;
    const f = fixture({
      spec: { preAllocate: 20 },
      enis: [eni(1, 5), eni(2, 10, { status: 'Attaching' })],
      inFlight: (l) => void (attach = l.beginAttach(NODE, 'eni-2', 10)),
    });
    const assign = f.ecs.assignPrivateIpAddresses.bind(f.ecs);
    f.ecs.assignPrivateIpAddresses = async (id, o) => {
      // Meanwhile the attach lands (EniLifecycle.attach: upsert InUse, then its finally).
      f.cloud.upsert(eni(2, 10));
      f.enis.ledger.end(attach);
      return assign(id, o);
    };
    // The cloud changed under the plan: nothing is written, the pool is planned again soon.
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 100 });
    expect(f.ecs.calls.map((c) => c.action)).toEqual(['AssignPrivateIpAddresses']);
    expect(f.statusWrites()).toHaveLength(0);
    await f.reconcile();
    const patch = lastPatch(f)!;
    const published = (patch.enis as Array<{ state: string; ips: string[] }>)
      .filter((e) => e.state === 'InUse')
      .reduce((n, e) => n + e.ips.length, 0);
    expect((patch.summary as { available: number }).available).toBe(published);
  });
});

// ---------------------------------------------------------------------------------------------
// The background ENI work (the real EniLifecycle) over the fixture's memory, cloud state and Events.

describe('background ENI work', () => {
  it('no-release mode: an attach refused for good is held back, not adopted again at once', async () => {
    const parked = eni(3, 4, { status: 'Available', instanceId: undefined });
    const f = fixture({ mode: 'no-release', enis: [eni(1, 8), parked] });
    await f.reconcile();
    expect(f.enis.calls.map((c) => c.action)).toEqual(['attach']); // adopted
    const { l, calls } = scriptedLifecycle(f, 'no-release', {
      attach: () => Promise.reject(forbidden('AttachNetworkInterface')),
      state: () => parked,
    });
    l.attach(pool(), parked);
    await settle();
    expect(calls).toEqual(['AttachNetworkInterface']);
    // The pool is enqueued at once; the next plan must not attach again right away.
    f.clearRecords();
    await f.reconcile();
    expect(f.enis.calls.map((c) => c.action)).toEqual([]);
  });

  it('a create started after stop() leaves nothing counted in flight', async () => {
    const f = fixture();
    const { l, calls } = scriptedLifecycle(f, 'normal', {});
    l.stop();
    l.create(pool(), 'vsw-a', 8, ['sg-1']);
    await settle();
    expect(calls).toEqual([]);
    expect(f.enis.ledger.records()).toEqual([]);
  });

  it('a create in flight when the node memory is forgotten does not count down the new record', async () => {
    const f = fixture();
    let answer!: (e: NetworkInterface) => void;
    const created = eni(4, 8, { status: 'Available', instanceId: undefined });
    const { l } = scriptedLifecycle(f, 'normal', {
      create: () => new Promise((r) => (answer = r)),
      state: () => ({ ...created, status: 'InUse', instanceId: 'i-a' }),
    });
    l.create(pool(), 'vsw-a', 8, ['sg-1']);
    await settle();
    expect(f.enis.inFlight(NODE)).toMatchObject({ enis: 1, ips: 8 });
    // The pool goes (its finalizer removed by hand) and comes back: a fresh record for node-a.
    const cached = f.cache.poolList;
    f.cache.poolList = [];
    await f.reconcile(); // the pool is gone: its node's records are forgotten
    f.cache.poolList = cached;
    expect(f.enis.inFlight(NODE)).toMatchObject({ enis: 0, ips: 0 });
    answer(created);
    await settle();
    expect(f.enis.inFlight(NODE)).toMatchObject({ enis: 0, ips: 0 });
    expect(f.enis.ledger.records()).toEqual([]);
  });
});

describe('failures the resync does not explain', () => {
  it('an instance limit the cloud keeps answering is backed off and said in the status', async () => {
    // DescribeInstanceTypes says 10 IPs per ENI; the instance refuses more than 5 (the cache,
    // resynced after each refusal, still shows eni-1 with 5 of 10).
    const f = fixture({ enis: [eni(1, 5), eni(2, 10, { ours: false })] });
    f.ecs.fail('AssignPrivateIpAddresses', 'MaxEniPrivateIpsCountExceeded', { times: 100 });
    for (let i = 0; i < 6; i++) {
      await f.reconcile();
      f.clock.now += 1000; // the handler enqueued the pool in a second
    }
    const assigns = f.ecs.calls.filter((c) => c.action === 'AssignPrivateIpAddresses').length;
    expect(assigns).toBeLessThan(6);
    expect(f.statusWrites().length).toBeGreaterThan(0);
  });
});

describe('observe failures of the kinds the handler enqueues itself', () => {
  it('a describe answered with a QuotaExceed* code is not retried every 100 ms', async () => {
    const f = fixture({ enis: [eni(1, 8)] });
    const quota = () => new CloudError('DescribeVSwitches', 'QuotaExceed.ApiCalls', 'quota spent', 'req-0');
    failDescribe(f, 'vSwitches', quota, () => true);
    const delays: Array<number | undefined> = [];
    for (let i = 0; i < 5; i++) {
      f.enqueued.length = 0;
      const r = await f.reconcile();
      f.sync(); // the informer brings the Degraded write back
      // The next look: the result's requeue, or the handler's own enqueue.
      const next = r.requeueAfterMs ?? f.enqueued.find(([n]) => n === NODE)?.[1];
      delays.push(next);
      f.clock.now += next ?? 0;
    }
    // Held back (permanent, from 5 s): no describe again within a second, five times over.
    expect(delays.every((d) => d !== undefined && d >= 1000)).toBe(true);
    expect(f.describe.calls.filter((c) => c.action === 'DescribeVSwitches')).toHaveLength(5);
  });
});

describe('the shell’s own branches', () => {
  it('a finalizer write that finds the pool gone plans nothing', async () => {
    const f = fixture({ metadata: { finalizers: [] }, enis: [eni(1, 5)] });
    f.store.live.delete(NODE); // deleted on the API server; the cache has not seen it yet
    expect(await f.reconcile()).toEqual({});
    expect(f.ecs.calls).toEqual([]);
    expect(f.statusWrites()).toEqual([]);
  });

  it('security groups held back after a failure: not described again, assigns go on, nothing created', async () => {
    // 20 IPs wanted on a fresh ENI of 2: an assign fills eni-1; a new ENI would need the groups.
    const f = fixture({
      spec: { securityGroupTags: { pods: 'yes' }, preAllocate: 20 },
      enis: [eni(1, 2)],
      memory: (m) =>
        m.failures.set('DescribeSecurityGroups', {
          action: 'DescribeSecurityGroups',
          code: 'Forbidden.RAM',
          message: 'DescribeSecurityGroups: Forbidden.RAM: no; grant it',
          permanent: true,
          count: 1,
          until: NOW + 60_000,
        }),
    });
    await f.reconcile();
    expect(f.describe.calls.map((c) => c.action)).not.toContain('DescribeSecurityGroups');
    expect(f.ecs.calls.map((c) => c.action)).toEqual(['AssignPrivateIpAddresses']);
    expect(f.enis.calls).toEqual([]);
    expect(conditionIn(lastPatch(f), 'Degraded')).toMatchObject({ status: 'True', reason: 'CloudCallRefused' });
  });

  it('an ENI the plan would publish that left the cache while it acted: nothing written, planned again', async () => {
    const f = fixture({ spec: { preAllocate: 20 }, enis: [eni(1, 5), eni(2, 10)] });
    const assign = f.ecs.assignPrivateIpAddresses.bind(f.ecs);
    f.ecs.assignPrivateIpAddresses = async (id, o) => {
      f.cloud.forget('eni-2'); // a resync found it gone meanwhile
      return assign(id, o);
    };
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 100 });
    expect(f.statusWrites()).toEqual([]);
  });
});
