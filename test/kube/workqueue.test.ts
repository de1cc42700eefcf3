import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { WorkQueue, runWorkers } from '../../src/kube/workqueue.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';

describe('work queue', () => {
  it('queues a key once however often it is added', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
  });

  it('never hands a key to two workers at once, and re-queues one added during its work', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    const key = await q.get();
    q.add('a');
    expect(q.length).toBe(0);
    let second: string | undefined;
    void q.get().then((k) => (second = k));
    await settle();
    expect(second).toBeUndefined();
    q.done(key!);
    await settle();
    expect(second).toBe('a');
  });

  it('backs a failing key off exponentially, to the millisecond, and forgets on success', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ limits: { baseDelayMs: 20, maxDelayMs: 1000, qps: 1000, burst: 1000 }, clock });
    q.addRateLimited('k'); // 20 ms
    let got: string | undefined;
    void q.get().then((k) => (got = k));
    await clock.advance(19);
    expect(got).toBeUndefined();
    await clock.advance(1);
    expect(got).toBe('k');
    q.done('k');
    q.addRateLimited('k'); // 40 ms
    got = undefined;
    void q.get().then((k) => (got = k));
    await clock.advance(39);
    expect(got).toBeUndefined();
    await clock.advance(1);
    expect(got).toBe('k');
    q.done('k');
    expect(q.failuresOf('k')).toBe(2);
    q.forget('k');
    expect(q.failuresOf('k')).toBe(0);
  });

  it('keeps the earliest of several delayed adds, and adds the key once', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('k', 200);
    q.addAfter('k', 20);
    q.addAfter('k', 500);
    await clock.advance(19);
    expect(q.length).toBe(0);
    await clock.advance(1);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe('k');
    q.done('k');
    await clock.advance(1000);
    expect(q.length).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('the overall bucket spaces rate-limited adds once its burst is spent', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ limits: { baseDelayMs: 1, maxDelayMs: 1, qps: 10, burst: 2 }, clock });
    for (const k of ['a', 'b', 'c', 'd']) q.addRateLimited(k);
    await clock.advance(1);
    expect(q.length).toBe(2); // the burst
    await clock.advance(99);
    expect(q.length).toBe(3); // then one per 100 ms (10 qps)
    await clock.advance(100);
    expect(q.length).toBe(4);
  });

  it('a reconcile that asks for back-off (a 409) comes back after a growing delay, never sooner than the floor; success resets it', async () => {
    // 40 ms doubling: the 100 ms floor rules the first two attempts, then the back-off does.
    const clock = new FakeClock();
    const q = new WorkQueue({ limits: { baseDelayMs: 40, maxDelayMs: 10_000, qps: 1000, burst: 1000 }, clock });
    const at: number[] = [];
    let conflicts = 4;
    const workers = runWorkers(
      q,
      1,
      async () => {
        at.push(clock.now());
        return conflicts-- > 0 ? { backoff: true } : {};
      },
      () => undefined,
    );
    q.add('pool/a');
    await clock.advance(2000);
    // 100 (floor, above 40), 100 (floor, above 80), 160, 320: one replan per back-off, not one per 100 ms.
    expect(at.slice(1).map((t, i) => t - at[i]!)).toEqual([100, 100, 160, 320]);
    expect(q.failuresOf('pool/a')).toBe(0); // the fifth reconcile succeeded
    await q.shutdown();
    await workers;
  });

  it('shuts down after the work in progress is done, and takes no key after', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    let finish!: () => void;
    let finished = 0;
    q.add('a');
    const workers = runWorkers(
      q,
      2,
      async () => {
        await new Promise<void>((r) => (finish = r));
        finished++;
      },
      () => undefined,
    );
    await settle();
    let down = false;
    const shutdown = q.shutdown().then(() => (down = true));
    await settle();
    expect(down).toBe(false); // 'a' is still being worked on
    finish();
    await shutdown;
    expect(finished).toBe(1);
    await workers;
    q.add('b');
    expect(q.length).toBe(0);
  });

  it('works every added key, never two at once, under random adds and random work times (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ key: fc.constantFrom('a', 'b', 'c', 'd'), workMs: fc.nat(5), gapMs: fc.nat(3) }), {
          minLength: 1,
          maxLength: 40,
        }),
        async (adds) => {
          const clock = new FakeClock();
          const q = new WorkQueue({ clock });
          const active = new Set<string>();
          const worked: string[] = [];
          let overlap = false;
          const workMs = new Map<string, number>();
          const workers = runWorkers(
            q,
            3,
            async (key) => {
              if (active.has(key)) overlap = true;
              active.add(key);
              await new Promise<void>((r) => void clock.after(workMs.get(key) ?? 0, r));
              worked.push(key);
              active.delete(key);
            },
            () => undefined,
          );
          for (const a of adds) {
            workMs.set(a.key, a.workMs);
            q.add(a.key);
            await clock.advance(a.gapMs);
          }
          await clock.advance(100);
          await q.shutdown();
          await workers;
          expect(overlap).toBe(false);
          expect(new Set(worked)).toEqual(new Set(adds.map((a) => a.key)));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('on the system clock, a delayed add arrives once real time has passed', async () => {
    const q = new WorkQueue();
    const t0 = Date.now();
    q.addAfter('k', 30);
    await settle();
    expect(q.length).toBe(0);
    expect(await q.get()).toBe('k');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(29);
  });
});

describe('work queue priorities', () => {
  it('hands out the highest-priority key first, in arrival order on ties', async () => {
    const deficit: Record<string, number> = { a: 1, b: 9, c: 9, d: 3 };
    const q = new WorkQueue({ priority: (k) => deficit[k] ?? 0, clock: new FakeClock() });
    for (const k of ['a', 'b', 'c', 'd']) q.add(k);
    const order: string[] = [];
    for (let i = 0; i < 4; i++) order.push((await q.get())!);
    expect(order).toEqual(['b', 'c', 'd', 'a']);
  });
});
