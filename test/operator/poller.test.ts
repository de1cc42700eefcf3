// The shared poller, on a fake clock: one describe of up to 100 ids serves every wait, at an
// interval that starts short and grows while nothing new arrives; waits end on the state asked
// for, on a fall-back, on a disappearance, or after the timeout, to the millisecond.
import { describe, expect, it } from '@jest/globals';
import type { NetworkInterface } from '../../src/cloud/index.js';
import { silentLogger } from '../../src/observability/logger.js';
import { StatePoller } from '../../src/operator/eni/poller.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';
import { eni } from './fakes.js';

function poller(states: Map<string, NetworkInterface>, o: { timeoutMs?: number } = {}) {
  const clock = new FakeClock();
  const calls: Array<{ at: number; ids: string[] }> = [];
  const api = {
    describeNetworkInterfacesPage: async (q: { ids?: string[] }) => {
      calls.push({ at: clock.now(), ids: [...(q.ids ?? [])] });
      return { items: (q.ids ?? []).flatMap((id) => (states.has(id) ? [states.get(id)!] : [])), nextToken: '' };
    },
  };
  const p = new StatePoller({ api, logger: silentLogger(), clock, minIntervalMs: 250, maxIntervalMs: 1000, ...o });
  return { p, clock, calls, start: clock.now() };
}

describe('StatePoller', () => {
  it('serves every wait with one describe of up to 100 ids, at 250 ms growing by half to the cap', async () => {
    const states = new Map<string, NetworkInterface>();
    for (let i = 1; i <= 150; i++) states.set(`eni-${i}`, eni(i, 2, { status: 'Attaching' }));
    const { p, clock, calls, start } = poller(states);
    const done: string[] = [];
    for (const id of states.keys()) void p.wait(id, 'InUse').then(() => done.push(id));
    await clock.advance(249);
    expect(calls).toEqual([]);
    await clock.advance(1);
    expect(calls.map((c) => [c.at - start, c.ids.length])).toEqual([
      [250, 100],
      [250, 50],
    ]);
    await clock.advance(3000);
    // 250, then 375, 563, 845, 1000, 1000...: growing while nothing changes.
    expect([...new Set(calls.map((c) => c.at - start))]).toEqual([250, 625, 1188, 2033, 3033]);
    for (const [id, e] of states) states.set(id, { ...e, status: 'InUse' });
    await clock.advance(1000);
    expect(done).toHaveLength(150);
    expect(p.size).toBe(0);
    const polls = calls.length;
    await clock.advance(10_000);
    expect(calls).toHaveLength(polls); // nothing waits: no call
  });

  it('a new wait polls soon again, whatever the interval had grown to', async () => {
    const states = new Map([['eni-1', eni(1, 2, { status: 'Attaching' })]]);
    const { p, clock, calls, start } = poller(states);
    void p.wait('eni-1', 'InUse').catch(() => undefined);
    await clock.advance(2100);
    states.set('eni-2', eni(2, 2, { status: 'InUse' }));
    // Polled at 250, 625, 1188 and 2033 ms: the interval has grown to 1000 ms, the next poll is due at 3033.
    const second = p.wait('eni-2', 'InUse');
    await clock.advance(250);
    await expect(second).resolves.toMatchObject({ id: 'eni-2' });
    expect(calls.at(-1)!.at - start).toBe(2350);
    p.stop();
  });

  it('rejects a wait for InUse when the ENI falls back to Available, or disappears; resolves a wait for gone', async () => {
    const states = new Map([
      ['eni-1', eni(1, 2, { status: 'Available', instanceId: undefined })],
      ['eni-3', eni(3, 2, { status: 'Deleting' })],
    ]);
    const { p, clock } = poller(states);
    const fellBack = p.wait('eni-1', 'InUse');
    const vanished = p.wait('eni-2', 'InUse');
    const gone = p.wait('eni-3', 'gone');
    void fellBack.catch(() => undefined);
    void vanished.catch(() => undefined);
    await clock.advance(250);
    await expect(fellBack).rejects.toThrow('attaching ENI eni-1 failed: it is Available again');
    await expect(vanished).rejects.toThrow('ENI eni-2 disappeared while waiting for InUse');
    states.delete('eni-3');
    await clock.advance(1000);
    await expect(gone).resolves.toBeUndefined();
  });

  it('gives a wait up after its timeout, and not before', async () => {
    const states = new Map([['eni-1', eni(1, 2, { status: 'Attaching' })]]);
    const { p, clock } = poller(states, { timeoutMs: 10_000 });
    let outcome: string | undefined;
    p.wait('eni-1', 'InUse').then(
      () => (outcome = 'resolved'),
      (e: Error) => (outcome = e.message),
    );
    await clock.advance(10_000);
    expect(outcome).toBeUndefined();
    await clock.advance(1000);
    expect(outcome).toBe('ENI eni-1 did not become InUse within 10 s (it is Attaching)');
  });

  it('stop rejects every wait and schedules nothing', async () => {
    const states = new Map([['eni-1', eni(1, 2, { status: 'Attaching' })]]);
    const { p, clock, calls } = poller(states);
    const w = p.wait('eni-1', 'InUse');
    p.stop();
    await expect(w).rejects.toThrow('stopped while waiting for ENI eni-1');
    await settle();
    await clock.advance(5000);
    expect(calls).toEqual([]);
    expect(clock.pending).toBe(0);
  });
});
