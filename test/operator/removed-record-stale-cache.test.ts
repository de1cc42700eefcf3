// Found in review: a removal's ledger record ends when OUR publish no longer lists the ENI
// (EniWork.listed after patchStatus), but the next plan reads the pool from the informer's
// cache, which may still be the pool from before that write ("the cache lags our own last
// write", reconciler.ts). Planned on it, the ENI we removed is no longer in removedByUs, and the
// plan says it was removed behind our back: an ENIGone Warning for our own removal.
import { describe, expect, it } from '@jest/globals';
import type { PoolENI } from '../../src/api/types.js';
import { NODE, eni, fixture } from './fakes.js';

const listed = (id: string, n: number): PoolENI => ({
  id,
  mac: `00:16:3e:00:00:0${n}`,
  vSwitchID: 'vsw-a',
  vSwitchCIDR: '10.0.0.0/16',
  gatewayIP: '10.0.0.253',
  primaryIP: `10.0.${n}.1`,
  securityGroupIDs: ['sg-1'],
  state: 'InUse',
  deviceIndex: n,
  ips: [`10.0.${n}.2`],
});

describe('an ENI removed by us, planned on a cache that lags our own publish', () => {
  it('is not reported as removed behind our back (no ENIGone)', async () => {
    const f = fixture({
      spec: { preAllocate: 10 },
      enis: [eni(1, 10)],
      // The pool as last published: eni-2 still listed; we have since detached and deleted it.
      status: { enis: [listed('eni-1', 1), listed('eni-2', 2)] },
      inFlight: (ledger) => ledger.removed(ledger.beginRemove(NODE, 'eni-2')),
    });
    // First reconcile: planned on the pool that lists eni-2; our removal is known, nothing said.
    await f.reconcile();
    expect(f.events.events.filter((e) => e.reason === 'ENIGone')).toEqual([]);
    expect(f.statusWrites()).toHaveLength(1);
    // The pool is enqueued again (a background ENI landed, an agent wrote ...) before the
    // informer delivered our own write: the cache still has the pool listing eni-2.
    f.clearRecords();
    await f.reconcile();
    expect(f.events.events.filter((e) => e.reason === 'ENIGone')).toEqual([]);
  });
});
