// The agent's status writer on a fake clock: writes coalesced to one per interval, refused writes
// backed off (the server's Retry-After a floor), the outage said after staleAfterMs (a Warning
// Event and the condition alone), its end said once a write is taken; all to the millisecond.
import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { AgentMetrics } from '../../src/agent/metrics.js';
import { StatusWriter } from '../../src/agent/status-writer.js';
import { silentLogger } from '../../src/observability/logger.js';
import { FakeClock } from '../helpers/fake-clock.js';

function writer(answers: Array<'ok' | 'throttled' | 'forbidden'>) {
  const clock = new FakeClock();
  const start = clock.now();
  const writes: Array<{ at: number; status: Record<string, unknown> }> = [];
  const events: string[] = [];
  let version = 0;
  let written = 0;
  const w = new StatusWriter({
    node: 'node-a',
    clock,
    policy: { baseMs: 1000, maxMs: 30_000, staleAfterMs: 30_000, logEveryMs: 60_000 },
    random: () => 1, // the full delay: the longest a retry waits
    logger: silentLogger(),
    metrics: new AgentMetrics(new Registry(), {
      free: () => 0,
      inUse: () => 0,
      cooling: () => 0,
      stray: () => 0,
      statusUnsentSeconds: () => 0,
    }),
    plan: () => {
      const text = `v${version}`;
      return { fields: { used: text }, changed: written !== version, written: () => (written = Number(text.slice(1))) };
    },
    serverConditions: () => [],
    patch: async (status) => {
      writes.push({ at: clock.now() - start, status });
      const answer = answers.shift() ?? 'ok';
      if (answer === 'throttled')
        throw new ApiException(429, 'Too Many Requests', '', { 'retry-after': '5' } as Record<string, string>);
      if (answer === 'forbidden') throw new ApiException(403, 'Forbidden', '', {});
    },
    event: (type, reason) => events.push(`${type} ${reason}`),
  });
  const change = () => {
    version++;
    w.schedule();
  };
  return { w, clock, writes, events, change };
}

describe('StatusWriter', () => {
  it('coalesces changes into one write per interval', async () => {
    const { clock, writes, change } = writer([]);
    change();
    change();
    await clock.advance(999);
    expect(writes).toEqual([]);
    await clock.advance(1);
    expect(writes.map((x) => [x.at, x.status.used])).toEqual([[1000, 'v2']]);
    change();
    change();
    await clock.advance(1000);
    expect(writes.map((x) => x.at)).toEqual([1000, 2000]);
    await clock.advance(10_000);
    expect(writes).toHaveLength(2); // nothing changed since
  });

  it('backs refused writes off, never sooner than Retry-After, and says a long outage and its end', async () => {
    // Two 429s with Retry-After: 5, then 403s; the eleventh write is taken.
    const refusals: Array<'throttled' | 'forbidden'> = ['throttled', 'throttled', ...Array(8).fill('forbidden')];
    const { clock, writes, events, change } = writer(refusals);
    change();
    await clock.advance(1000); // the first write, refused with Retry-After: 5
    await clock.advance(5999);
    expect(writes.map((x) => x.at)).toEqual([1000]); // not sooner than the hint and its spread (5 s + 1 s)
    await clock.advance(1);
    expect(writes.map((x) => x.at)).toEqual([1000, 7000]);
    // The outage began at 1000 ms: at 31000 it is stale: a Warning Event, then the condition alone.
    await clock.advance(23_999);
    expect(events).toEqual([]);
    await clock.advance(1);
    expect(events).toEqual(['Warning StatusNotReported']);
    expect(writes.at(-1)).toEqual({
      at: 31_000,
      status: { agentConditions: [expect.objectContaining({ type: 'StatusReported', status: 'False' })] },
    });
    await clock.advance(200_000);
    // Full delays (random 1): 2 s and 4 s past the hint, then 4, 8, 16 s and the 30 s cap.
    const full = writes.filter((x) => 'used' in x.status).map((x) => x.at);
    expect(full).toEqual([1000, 7000, 14_000, 18_000, 26_000, 42_000, 72_000, 102_000, 132_000, 162_000]);
    expect(events).toEqual(['Warning StatusNotReported', 'Normal StatusReported']);
    await clock.advance(300_000);
    expect(writes.filter((x) => 'used' in x.status)).toHaveLength(10); // taken: nothing more to write
  });

  it('stop writes what is pending at once, and schedules nothing after', async () => {
    const { w, clock, writes, change } = writer([]);
    change();
    await w.stop();
    expect(writes.map((x) => x.at)).toEqual([0]);
    change();
    await clock.advance(10_000);
    expect(writes).toHaveLength(1);
    expect(clock.pending).toBe(0);
  });
});
