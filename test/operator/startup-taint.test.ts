/*
 * The startup taint over fakes: one reconcile removes it from the pool's Node once the pool is
 * Ready, by index against the Node's resourceVersion (another writer's change is never lost), and
 * tries again soon when that loses a race; it is never removed from a pool that is not Ready, nor
 * by an operator that does not hold the lease.
 */
import { describe, expect, it } from '@jest/globals';
import { NODE, apiError, eni, fixture } from './fakes.js';

const STARTUP = { key: 'eniipam.io/pool-not-ready', effect: 'NoSchedule' as const };
const OTHER = { key: 'example.com/dedicated', value: 'batch', effect: 'NoSchedule' };
const taintWrites = (f: ReturnType<typeof fixture>) => f.store.writes.filter((w) => w.action === 'removeTaint');

describe('the startup taint', () => {
  it('is removed by index, against the resourceVersion read, once the pool is Ready', async () => {
    const f = fixture({ enis: [eni(1, 8)], startupTaint: STARTUP, nodeTaints: [OTHER, STARTUP] });
    await f.reconcile();
    expect(taintWrites(f)).toEqual([{ action: 'removeTaint', name: NODE, resourceVersion: '3', index: 1 }]);
    expect(f.events.events.map((e) => `${e.type} ${e.reason}: ${e.message}`)).toContain(
      `Normal StartupTaintRemoved: removed taint eniipam.io/pool-not-ready:NoSchedule from node ${NODE}: its pool is Ready (8 IPs free)`,
    );
  });

  it('is tried again soon when the Node changed meanwhile (the patch’s test failed)', async () => {
    const f = fixture({ enis: [eni(1, 8)], startupTaint: STARTUP, nodeTaints: [STARTUP] });
    f.store.failNext('removeTaint', apiError(422, 'Invalid', 'the test operation failed'));
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 1000 });
    expect(f.events.events.map((e) => e.reason)).not.toContain('StartupTaintRemoved');
    f.sync();
    await f.reconcile();
    expect(taintWrites(f)).toHaveLength(2);
    expect(f.events.events.map((e) => e.reason)).toContain('StartupTaintRemoved');
  });

  it('stays while the pool is not Ready, without the lease, and when no startup taint is configured', async () => {
    // Short of addresses: an ENI is on its way.
    const filling = fixture({
      spec: { preAllocate: 30 },
      enis: [eni(1, 2)],
      startupTaint: STARTUP,
      nodeTaints: [STARTUP],
    });
    await filling.reconcile();
    expect(taintWrites(filling)).toEqual([]);
    const follower = fixture({ enis: [eni(1, 8)], startupTaint: STARTUP, nodeTaints: [STARTUP], mayWrite: false });
    await follower.reconcile();
    expect(taintWrites(follower)).toEqual([]);
    const off = fixture({ enis: [eni(1, 8)], nodeTaints: [STARTUP] });
    await off.reconcile();
    expect(taintWrites(off)).toEqual([]);
  });
});
