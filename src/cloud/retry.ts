export interface RetryPolicy {
  /** Attempts per call, the first included. */
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** No retry starts after this long since the first attempt was sent (time queued in the limiter excluded). */
  maxElapsedMs: number;
  /** One attempt's connect + read timeout. */
  attemptTimeoutMs: number;
  /** A call that waited this long in its action's limiter is not sent (its reason may be stale). */
  maxQueueMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 8,
  baseDelayMs: 200,
  maxDelayMs: 10_000,
  maxElapsedMs: 60_000,
  attemptTimeoutMs: 10_000,
  maxQueueMs: 15 * 60_000,
};

/**
 * Full-jitter exponential backoff: uniform in [0, min(max, base * 2^(attempt-1))].
 * A server hint (`TimeLeft`) is a floor, since retrying sooner is sure to be throttled
 * again; the jitter on top keeps the callers it throttled together from coming back together.
 */
export function backoffDelay(attempt: number, policy: RetryPolicy, random: () => number, hintMs?: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  const jittered = random() * ceiling;
  return hintMs === undefined
    ? jittered
    : Math.max(hintMs, jittered) + random() * Math.min(ceiling, hintMs + policy.baseDelayMs);
}

/** Reads `TimeLeft` (milliseconds) from `x-ratelimit-user-api` or `x-ratelimit-user` (`Key:Value,...`). */
export function timeLeftHint(headers: Record<string, unknown> | undefined): number | undefined {
  for (const name of ['x-ratelimit-user-api', 'x-ratelimit-user']) {
    const v = headers?.[name];
    if (typeof v !== 'string') continue;
    for (const pair of v.split(',')) {
      const [k, n] = pair.split(':').map((s) => s.trim());
      if (k === 'TimeLeft' && n && /^\d+$/.test(n)) return Number(n);
    }
  }
  return undefined;
}
