// An ENI attached by the background work (adopted, or parked after a passing attach failure)
// counts as pod IPs in flight only its secondaries, as the pool publishes them. (Found by review.)
import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { EcsApi, NetworkInterface } from '../../src/cloud/index.js';
import { silentLogger } from '../../src/observability/logger.js';
import { DEFAULT_OPERATOR_CONFIG } from '../../src/operator/config.js';
import { EniLifecycle } from '../../src/operator/eni/lifecycle.js';
import { OperatorMetrics } from '../../src/operator/metrics.js';
import type { StatePoller } from '../../src/operator/eni/poller.js';
import { CLUSTER, NODE, VPC, eni, fixture, pool, type Fixture } from './fakes.js';

/** The real EniLifecycle over the fixture's memory, cloud state and Events; the cloud answers as `state` says. */
function lifecycle(f: Fixture, o: { attach: () => Promise<void>; state: (id: string) => NetworkInterface }) {
  const api = {
    attachNetworkInterface: o.attach,
    describeNetworkInterfaces: async (q: { ids?: string[] }) => (q.ids ?? []).map(o.state),
  } as unknown as EcsApi;
  const poller = {
    wait: async (id: string, until: string) => {
      const e = o.state(id);
      if (e.status === until) return e;
      throw new Error(`ENI ${id} is ${e.status}`);
    },
  } as unknown as StatePoller;
  return new EniLifecycle({
    api,
    cloud: f.cloud,
    poller,
    metrics: new OperatorMetrics(new Registry()),
    config: { ...DEFAULT_OPERATOR_CONFIG, clusterId: CLUSTER, vpcId: VPC, mode: 'normal' },
    logger: silentLogger(),
    memory: f.memory,
    events: f.events,
    failures: f.failures,
    now: () => f.clock.now,
    enqueue: (name, afterMs) => void f.enqueued.push([name, afterMs]),
    published: () => undefined,
  });
}

const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

describe('an ENI being attached brings its secondaries, not its primary', () => {
  it('counts 4 pod IPs in flight for a parked ENI of 4 secondaries, and a pool one short still tops up', async () => {
    // eni-1 InUse with 5 pod IPs, eni-3 parked (Available, ours) with 4; 10 free IPs wanted.
    const parked = eni(3, 4, { status: 'Available', instanceId: undefined });
    const f = fixture({ spec: { preAllocate: 10 }, enis: [eni(1, 5), parked] });
    let attached = false;
    let land!: () => void;
    const l = lifecycle(f, {
      attach: () => new Promise<void>((r) => (land = r)),
      state: (id) => (id === 'eni-3' && attached ? eni(3, 4) : parked),
    });
    l.attach(pool(), parked);
    await settle();
    expect(f.memory.of(NODE).incoming).toEqual({ enis: 1, ips: 4 });
    // Planned while it attaches: 5 on eni-1 + 4 coming = 9 of 10, so one more goes to eni-1.
    await f.reconcile();
    expect(f.ecs.calls.filter((c) => c.action === 'AssignPrivateIpAddresses')).toHaveLength(1);
    attached = true;
    land();
    await settle();
    const said = f.events.events.find((e) => e.reason === 'AttachedENI')?.message;
    expect(said).toBe('eni-3 is InUse on i-a; its 4 IPs are published');
  });
});
