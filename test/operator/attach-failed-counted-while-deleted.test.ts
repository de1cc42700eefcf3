// Found in review: an attach that fell back (normal mode) deletes its ENI inside
// attachRecorded, and its 'attaching' record ends only in the finally, after the detach, the
// delete, the wait until gone and the failure's response. All that while inFlight(node) counts
// the ENI as coming (enis 1, its addresses as ips) and as attaching, though it is being removed:
// the plan waits for addresses that will never land (an assign into another ENI is held off).
import { afterAll, describe, expect, it } from '@jest/globals';
import type { NetworkInterface } from '../../src/cloud/index.js';
import { NODE, eni, fixture, pool, scriptedLifecycle, settle } from './fakes.js';

describe('an ENI whose attach fell back, while it is being deleted', () => {
  it('is not counted as work in flight that brings addresses', async () => {
    const f = fixture({ enis: [eni(1, 10)] });
    const parked = eni(5, 6, { status: 'Available', instanceId: undefined });
    let detached!: (e: NetworkInterface) => void;
    const { l } = scriptedLifecycle(f, 'normal', {
      attach: async () => undefined,
      // The attach fell back: the ENI is Available, on no instance.
      state: () => parked,
      wait: (_id, until) =>
        until === 'InUse'
          ? Promise.reject(new Error('attaching failed: it is Available again'))
          : until === 'Available'
            ? new Promise<NetworkInterface>((r) => (detached = r)) // the detach takes its time
            : Promise.resolve(undefined),
    });
    l.attach(pool(), parked);
    await settle();
    // It is being deleted now (the attach failed and said so).
    expect(f.events.events.map((e) => e.reason)).toContain('AttachFailed');
    expect(l.inFlight(NODE).removing.has(parked.id)).toBe(true);
    expect(l.inFlight(NODE)).toMatchObject({ enis: 0, ips: 0 });
    expect(l.inFlight(NODE).attaching.has(parked.id)).toBe(false);
    detached({ ...parked });
  });
});

afterAll(settle);
