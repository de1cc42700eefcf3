// Found in review: a removal that fails still moves its record to 'removed' (lifecycle.ts
// deleteEni, finally), where it stays until a publish no longer lists the ENI. A failed removal
// leaves the ENI in the cloud (and in the pool), so its record does not end; every new attempt
// (a teardown retried after its error, a deleteEmptyENIs removal planned again, remove() skipping
// only phase 'removing') adds one more. While the removal keeps failing the ledger grows without
// bound (NodeMemory's removedByUs was a Set: one entry per ENI, however many attempts). A teardown
// never publishes, so there not even listed() ends them.
import { afterAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { silentLogger } from '../../src/observability/logger.js';
import { OperatorMetrics } from '../../src/operator/metrics.js';
import { PoolReconciler } from '../../src/operator/pool/reconciler.js';
import { RequestStamps } from '../../src/operator/pool/status.js';
import { NODE, eni, fixture, pool, scriptedLifecycle, settle } from './fakes.js';

describe('an ENI whose removal keeps failing', () => {
  it('remove(): leaves at most one record in the ledger, however many times it is tried', async () => {
    const f = fixture({ enis: [eni(1, 10), eni(3, 0)] });
    const stuck = eni(3, 0);
    // The detach is taken, but the ENI never leaves InUse: the wait for Available fails.
    const { l } = scriptedLifecycle(f, 'normal', { state: (id) => (id === stuck.id ? stuck : undefined) });
    for (let attempt = 0; attempt < 5; attempt++) {
      l.remove(pool(), stuck);
      await settle();
      // The pool is published again, still listing the ENI (it is still there).
      l.listed(NODE, ['eni-1', 'eni-3']);
    }
    expect(f.events.events.filter((e) => e.reason === 'DeleteENIFailed')).toHaveLength(5);
    expect(l.inFlight(NODE).removing.size).toBe(0);
    expect(l.operations(NODE).length).toBeLessThanOrEqual(1);
  });

  it('teardown retried: leaves at most one record in the ledger', async () => {
    const stuck = eni(3, 0);
    const f = fixture({
      metadata: { deletionTimestamp: '2026-03-01T11:59:00Z' },
      enis: [stuck],
      liveNodes: [],
    });
    const { l } = scriptedLifecycle(f, 'normal', { state: (id) => (id === stuck.id ? stuck : undefined) });
    // The fixture's reconciler over the real lifecycle (its ledger is the fixture's).
    const reconciler = new PoolReconciler({
      cache: f.cache,
      store: f.store,
      cloud: f.cloud,
      ecs: f.ecs,
      enis: l,
      events: f.events,
      health: { resynced: true, outage: () => undefined },
      failures: f.failures,
      memory: f.memory,
      metrics: new OperatorMetrics(new Registry()),
      config: { clusterId: 'c-test', vpcId: 'vpc-1', mode: 'normal', nodeGoneGraceMs: 600_000 },
      logger: silentLogger(),
      now: () => f.clock.now,
      enqueue: () => undefined,
      mayWrite: () => true,
      stamps: new RequestStamps(),
    });
    for (let attempt = 0; attempt < 5; attempt++) {
      // Each attempt fails (the ENI never leaves InUse) and the key is retried after its back-off.
      await expect(reconciler.reconcile(NODE)).rejects.toThrow();
    }
    expect(l.inFlight(NODE).removing.size).toBe(0);
    expect(l.operations(NODE).length).toBeLessThanOrEqual(1);
  });
});

afterAll(settle);
