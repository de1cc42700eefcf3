/** A token bucket per action, in calls per minute with a burst, over the emulator's clock. */
export class ActionQuotas {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly quotas: Record<string, { perMinute: number; burst?: number }>) {}

  /** Takes one call's token; when the bucket is empty, returns how long until one is back. */
  take(action: string, now: number): { ok: true } | { ok: false; waitMs: number; limit: number } {
    const q = this.quotas[action];
    if (!q) return { ok: true };
    const burst = q.burst ?? q.perMinute;
    const perMs = q.perMinute / 60_000;
    const b = this.buckets.get(action) ?? { tokens: burst, at: now };
    b.tokens = Math.min(burst, b.tokens + (now - b.at) * perMs);
    b.at = now;
    this.buckets.set(action, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, waitMs: Math.ceil((1 - b.tokens) / perMs), limit: q.perMinute };
  }

  remaining(action: string): number | undefined {
    const b = this.buckets.get(action);
    return b ? Math.floor(b.tokens) : (this.quotas[action]?.burst ?? this.quotas[action]?.perMinute);
  }
}
