import Bottleneck from 'bottleneck';

export interface ActionLimit {
  perMinute: number;
  /** Calls that may go at once after a quiet spell; the per-minute figure when absent. */
  burst?: number;
}

/**
 * Terway's published per-action defaults, in calls per minute (burst = the same figure).
 * Keyed on the exact Action string: Terway once misspelled two keys and those actions
 * silently fell back to the default bucket.
 */
export const DEFAULT_API_LIMITS: Readonly<Record<string, number>> = {
  CreateNetworkInterface: 500,
  AttachNetworkInterface: 500,
  DeleteNetworkInterface: 500,
  DetachNetworkInterface: 400,
  AssignPrivateIpAddresses: 400,
  UnassignPrivateIpAddresses: 400,
  AssignIpv6Addresses: 400,
  UnassignIpv6Addresses: 400,
  DescribeNetworkInterfaces: 800,
  DescribeNetworkInterfaceAttribute: 2000,
  DescribeVSwitches: 300,
  DescribeInstanceTypes: 400,
  DescribeInstances: 500,
  DescribeSecurityGroups: 500,
  DescribeVpcs: 500,
};

/** Actions that change the cloud: only a leader with a fresh lease may send them. */
export const MUTATING_ACTIONS: ReadonlySet<string> = new Set([
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
  'AssignPrivateIpAddresses',
  'UnassignPrivateIpAddresses',
  'AssignIpv6Addresses',
  'UnassignIpv6Addresses',
]);

/** The limit of an action not listed above (Terway's fallback). */
export const FALLBACK_API_LIMIT = 500;

// The bucket is topped up on every tick; a tick of 200 ms keeps timers cheap while the
// top-up (perMinute / 300 tokens) stays below one burst for any sensible quota.
const TICK_MS = 200;

/** Resolves the limit of every action from the defaults, per-action overrides and one scale factor. */
export function resolveLimits(
  overrides: Record<string, ActionLimit> = {},
  scale = 1,
): Record<string, Required<ActionLimit>> {
  const out: Record<string, Required<ActionLimit>> = {};
  for (const action of new Set([...Object.keys(DEFAULT_API_LIMITS), ...Object.keys(overrides)])) {
    const o = overrides[action];
    const perMinute = (o?.perMinute ?? DEFAULT_API_LIMITS[action] ?? FALLBACK_API_LIMIT) * scale;
    const burst = Math.max(
      1,
      Math.floor((o?.burst ?? o?.perMinute ?? DEFAULT_API_LIMITS[action] ?? FALLBACK_API_LIMIT) * scale),
    );
    out[action] = { perMinute, burst };
  }
  return out;
}

/** One Bottleneck token bucket per OpenAPI action; every call takes a token from its action's bucket. */
export class ActionLimiters {
  private readonly limiters = new Map<string, Bottleneck>();
  readonly limits: Record<string, Required<ActionLimit>>;

  constructor(
    overrides: Record<string, ActionLimit> = {},
    private readonly scale = 1,
  ) {
    this.limits = resolveLimits(overrides, scale);
  }

  limitOf(action: string): Required<ActionLimit> {
    return this.limits[action] ?? resolveLimits({ [action]: { perMinute: FALLBACK_API_LIMIT } }, this.scale)[action]!;
  }

  private limiter(action: string): Bottleneck {
    let l = this.limiters.get(action);
    if (!l) {
      const { perMinute, burst } = this.limitOf(action);
      l = new Bottleneck({
        reservoir: burst,
        reservoirIncreaseAmount: (perMinute * TICK_MS) / 60_000,
        reservoirIncreaseInterval: TICK_MS - 10,
        reservoirIncreaseMaximum: burst,
        heartbeatInterval: TICK_MS,
      });
      this.limiters.set(action, l);
    }
    return l;
  }

  /** Runs `fn` once the action's bucket has a token; `waitedMs` is the time spent waiting. */
  schedule<T>(action: string, fn: (waitedMs: number) => Promise<T>): Promise<T> {
    const queuedAt = Date.now();
    return this.limiter(action).schedule(() => fn(Date.now() - queuedAt));
  }

  /**
   * Empties an action's bucket after the API throttled it: the calls queued behind it then
   * go at the refill rate instead of all retrying at once.
   */
  async drain(action: string): Promise<void> {
    const l = this.limiters.get(action);
    if (!l) return;
    // Not updateSettings(): in Bottleneck 2.19.5 it stops the refill timer for good.
    const left = (await l.currentReservoir()) ?? 0;
    if (left > 0) await l.incrementReservoir(-left);
  }

  /** Tokens left per action (only actions used so far). */
  async tokensLeft(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const [action, l] of this.limiters) out[action] = Math.floor((await l.currentReservoir()) ?? 0);
    return out;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.limiters.values()].map((l) => l.disconnect(false)));
    this.limiters.clear();
  }
}
