import { describe, expect, it } from '@jest/globals';
import { refused, retryDelay, shouldLog, type StatusBackoffPolicy } from '../../src/agent/status-outage.js';

const policy: StatusBackoffPolicy = { baseMs: 1000, maxMs: 30_000, staleAfterMs: 30_000, logEveryMs: 60_000 };

describe('the agent’s status write back-off', () => {
  it('grows to the cap with full jitter, never under the status interval, and takes a Retry-After as a floor', () => {
    const ceilings = [1, 2, 3, 4, 5, 6, 7, 20].map((n) => retryDelay(n, policy, () => 1));
    expect(ceilings).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
    expect(retryDelay(6, policy, () => 0)).toBe(1000);
    expect(retryDelay(6, policy, () => 0.5)).toBe(15_000);
    // A hint of 2 s: at least 2 s, spread over up to one more hint.
    expect(retryDelay(1, policy, () => 0, 2000)).toBe(2000);
    expect(retryDelay(6, policy, () => 1, 2000)).toBe(32_000);
    expect(retryDelay(1, policy, () => 1, 60_000)).toBe(61_000);
  });

  it('keeps one outage from the first refusal, and logs a reason when it changes or once a minute', () => {
    const r403 = { reason: 'forbidden' as const, code: 403, message: 'no' };
    let o = refused(undefined, r403, 1000, policy, () => 1);
    expect(o).toMatchObject({ since: 1000, failures: 1, delayMs: 1000, stale: false });
    expect(shouldLog(o, 1000, policy)).toBe(true);
    o = { ...o, loggedAt: 1000, loggedReason: 'forbidden' };
    o = refused(o, r403, 2000, policy, () => 1);
    expect(o).toMatchObject({ since: 1000, failures: 2, delayMs: 2000 });
    expect(shouldLog(o, 2000, policy)).toBe(false);
    expect(shouldLog(o, 61_000, policy)).toBe(true);
    o = refused(o, { reason: 'throttled', code: 429, message: 'slow', retryAfterMs: 5000 }, 4000, policy, () => 0);
    expect(o).toMatchObject({ failures: 3, delayMs: 5000 });
    expect(shouldLog(o, 4000, policy)).toBe(true);
  });
});
