// An ENI attached by the background work (adopted, or parked after a passing attach failure)
// counts as pod IPs in flight only its secondaries, as the pool publishes them. (Found by review.)
import { describe, expect, it } from '@jest/globals';
import { NODE, eni, fixture, pool, scriptedLifecycle, settle } from './fakes.js';

describe('an ENI being attached brings its secondaries, not its primary', () => {
  it('counts 4 pod IPs in flight for a parked ENI of 4 secondaries, and a pool one short still tops up', async () => {
    // eni-1 InUse with 5 pod IPs, eni-3 parked (Available, ours) with 4; 10 free IPs wanted.
    const parked = eni(3, 4, { status: 'Available', instanceId: undefined });
    const f = fixture({ spec: { preAllocate: 10 }, enis: [eni(1, 5), parked] });
    let attached = false;
    let land!: () => void;
    const { l } = scriptedLifecycle(f, 'normal', {
      attach: () => new Promise<void>((r) => (land = r)),
      state: (id) => (id === 'eni-3' && attached ? eni(3, 4) : parked),
    });
    l.attach(pool(), parked);
    await settle();
    expect(f.enis.inFlight(NODE)).toMatchObject({ enis: 1, ips: 4 });
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
