import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { WorkQueue, runWorkers } from '../../src/kube/workqueue.js';
import { sleep } from '../helpers/ecs.js';

describe('work queue', () => {
  it('queues a key once however often it is added', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
  });

  it('never hands a key to two workers at once, and re-queues one added during its work', async () => {
    const q = new WorkQueue();
    q.add('a');
    const key = await q.get();
    q.add('a');
    expect(q.length).toBe(0);
    let second: string | undefined;
    void q.get().then((k) => (second = k));
    await sleep(10);
    expect(second).toBeUndefined();
    q.done(key!);
    await sleep(0);
    expect(second).toBe('a');
  });

  it('backs a failing key off exponentially and forgets on success', async () => {
    const q = new WorkQueue({ baseDelayMs: 20, maxDelayMs: 1000, qps: 1000, burst: 1000 });
    const t0 = Date.now();
    q.addRateLimited('k'); // 20 ms
    expect(await q.get()).toBe('k');
    q.done('k');
    const t1 = Date.now();
    q.addRateLimited('k'); // 40 ms
    expect(await q.get()).toBe('k');
    q.done('k');
    expect(t1 - t0).toBeGreaterThanOrEqual(18);
    expect(Date.now() - t1).toBeGreaterThanOrEqual(38);
    expect(q.failuresOf('k')).toBe(2);
    q.forget('k');
    expect(q.failuresOf('k')).toBe(0);
  });

  it('keeps the earliest of several delayed adds', async () => {
    const q = new WorkQueue();
    q.addAfter('k', 200);
    q.addAfter('k', 20);
    q.addAfter('k', 500);
    const t0 = Date.now();
    expect(await q.get()).toBe('k');
    expect(Date.now() - t0).toBeLessThan(180); // the 20 ms add, not the 200 or 500 ms ones
  });

  it('a reconcile that asks for back-off (a 409) comes back after a growing delay, never sooner than the floor; success resets it', async () => {
    // 40 ms doubling: the 100 ms floor rules the first two attempts, then the back-off does.
    const q = new WorkQueue({ baseDelayMs: 40, maxDelayMs: 10_000, qps: 1000, burst: 1000 });
    const at: number[] = [];
    let conflicts = 4;
    const workers = runWorkers(
      q,
      1,
      async () => {
        at.push(Date.now());
        return conflicts-- > 0 ? { backoff: true } : {};
      },
      () => undefined,
    );
    q.add('pool/a');
    while (at.length < 5) await sleep(20);
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    // 100 (floor, above 40), 100 (floor, above 80), 160, 320: one replan per back-off, not one per 100 ms.
    expect(gaps[0]).toBeGreaterThanOrEqual(95);
    expect(gaps[1]).toBeGreaterThanOrEqual(95);
    expect(gaps[2]).toBeGreaterThanOrEqual(155);
    expect(gaps[3]).toBeGreaterThanOrEqual(315);
    expect(q.failuresOf('pool/a')).toBe(0); // the fifth reconcile succeeded
    await q.shutdown();
    await workers;
  });

  it('shuts down after the work in progress is done', async () => {
    const q = new WorkQueue();
    let finished = 0;
    q.add('a');
    const workers = runWorkers(
      q,
      2,
      async () => {
        await sleep(50);
        finished++;
      },
      () => undefined,
    );
    await sleep(10);
    await q.shutdown();
    expect(finished).toBe(1);
    await workers;
    q.add('b');
    expect(q.length).toBe(0);
  });

  it('works every added key, never two at once, under random adds (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { minLength: 1, maxLength: 40 }), async (adds) => {
        const q = new WorkQueue();
        const active = new Set<string>();
        const worked: string[] = [];
        let overlap = false;
        const workers = runWorkers(
          q,
          3,
          async (key) => {
            if (active.has(key)) overlap = true;
            active.add(key);
            await sleep(Math.random() * 3);
            worked.push(key);
            active.delete(key);
          },
          () => undefined,
        );
        for (const k of adds) {
          q.add(k);
          if (Math.random() < 0.3) await sleep(1);
        }
        await sleep(30);
        await q.shutdown();
        await workers;
        expect(overlap).toBe(false);
        expect(new Set(worked)).toEqual(new Set(adds));
      }),
      { numRuns: 30 },
    );
  });
});

describe('work queue priorities', () => {
  it('hands out the highest-priority key first, in arrival order on ties', async () => {
    const deficit: Record<string, number> = { a: 1, b: 9, c: 9, d: 3 };
    const q = new WorkQueue(undefined, {}, (k) => deficit[k] ?? 0);
    for (const k of ['a', 'b', 'c', 'd']) q.add(k);
    const order: string[] = [];
    for (let i = 0; i < 4; i++) order.push((await q.get())!);
    expect(order).toEqual(['b', 'c', 'd', 'a']);
  });
});
