// Found in review: the ledger names a create in flight by its ClientToken ("which names it
// before it has an ENI", ledger.ts), but nothing reads it: inFlight() derives `attaching` from
// records that have an eniId only. A create whose answer is late (no answer: createResolved waits
// 1 s, 2 s, 4 s ... and asks again with the same token) may have made its ENI already; a resync
// meanwhile (the reconciler's after an unknown outcome, the periodic full one) puts it in the
// cloud cache: ours, Available, no instance, tagged with the token. The plan then takes it for a
// parked ENI: adopts it (a second attach of an ENI its create will attach) and counts its
// addresses twice (once as the create in flight, once as parked).
import { afterAll, describe, expect, it } from '@jest/globals';
import type { NetworkInterface } from '../../src/cloud/index.js';
import { TAGS } from '../../src/operator/eni/cloud-state.js';
import { NODE, eni, fixture, pool, scriptedLifecycle, settle } from './fakes.js';

describe('a create in flight whose ENI a resync has already seen', () => {
  it('is not adopted (attached a second time) by the plan', async () => {
    const f = fixture({ spec: { preAllocate: 10 }, enis: [] });
    let answer!: (e: NetworkInterface) => void;
    const { l } = scriptedLifecycle(f, 'normal', {
      create: () => new Promise<NetworkInterface>((r) => (answer = r)),
      state: () => undefined,
    });
    // The real lifecycle starts a create of 10 addresses; its answer has not come yet.
    l.create(pool(), 'vsw-a', 10, ['sg-1']);
    await settle();
    const [op] = l.operations(NODE);
    expect(op).toMatchObject({ phase: 'creating', ips: 10 });
    // The cloud made it already; a resync of the node (by its tags) brings it into the cache.
    const made = eni(5, 10, { status: 'Available', instanceId: undefined, deviceIndex: undefined });
    made.tags[TAGS.createToken] = op!.clientToken!;
    f.cloud.upsert(made);

    await f.reconcile();
    // The create will attach it when its answer comes: the plan must not attach it too.
    expect(f.enis.calls.filter((c) => c.action === 'attach')).toEqual([]);
    answer(made);
  });

  it('is not adopted (ledger seeded as the lifecycle leaves it)', async () => {
    const made = eni(5, 10, { status: 'Available', instanceId: undefined, deviceIndex: undefined });
    made.tags[TAGS.createToken] = 'token-1';
    const f = fixture({
      spec: { preAllocate: 10 },
      enis: [made],
      inFlight: (ledger) => void ledger.beginCreate(NODE, 'token-1', 10),
    });
    await f.reconcile();
    expect(f.enis.calls).toEqual([]);
  });
});

afterAll(settle);
