import type { Condition } from '../api/types.js';
import type { Refusal, RefusalReason } from '../kube/refusal.js';

/** How the agent retries its status writes. */
export interface StatusBackoffPolicy {
  /** The first retry waits at least this (the status interval). */
  baseMs: number;
  /** The jittered part of a retry's delay grows up to this. */
  maxMs: number;
  /** Unsent for this long, the status is stale: a Warning Event and the agent's condition say so. */
  staleAfterMs: number;
  /** While one reason lasts, it is logged at most once per this. */
  logEveryMs: number;
}

export const DEFAULT_STATUS_BACKOFF: Omit<StatusBackoffPolicy, 'baseMs'> = {
  maxMs: 30_000,
  staleAfterMs: 30_000,
  logEveryMs: 60_000,
};

/** A run of refused status writes, from the first refusal until a write is taken. */
export interface Outage {
  /** When the first write of the run was refused. */
  since: number;
  /** Writes refused in a row. */
  failures: number;
  last: Refusal;
  /** The delay before the next attempt. */
  delayMs: number;
  /** Said so (Event, condition) once unsent for staleAfterMs. */
  stale: boolean;
  loggedAt?: number;
  loggedReason?: RefusalReason;
}

/**
 * Full-jitter exponential back-off: uniform in [0, min(max, base * 2^(failures-1))], but never
 * sooner than the status interval. A server's Retry-After is a floor (sooner is sure to be refused
 * again), and the jitter on top spreads the agents it refused together over up to one more hint,
 * so they do not all come back at once.
 */
export function retryDelay(failures: number, p: StatusBackoffPolicy, random: () => number, hintMs?: number): number {
  const ceiling = Math.min(p.maxMs, p.baseMs * 2 ** Math.max(0, failures - 1));
  const jittered = Math.max(p.baseMs, random() * ceiling);
  return hintMs === undefined ? jittered : Math.max(hintMs, jittered) + random() * Math.min(ceiling, hintMs);
}

/** The outage after one more refused write. */
export function refused(
  outage: Outage | undefined,
  r: Refusal,
  now: number,
  p: StatusBackoffPolicy,
  random: () => number,
): Outage {
  const failures = (outage?.failures ?? 0) + 1;
  return {
    since: outage?.since ?? now,
    failures,
    last: r,
    delayMs: retryDelay(failures, p, random, r.retryAfterMs),
    stale: outage?.stale ?? false,
    loggedAt: outage?.loggedAt,
    loggedReason: outage?.loggedReason,
  };
}

/** Log this refusal: the reason changed, or it has lasted logEveryMs since it was last logged. */
export const shouldLog = (o: Outage, now: number, p: StatusBackoffPolicy): boolean =>
  o.loggedReason !== o.last.reason || o.loggedAt === undefined || now - o.loggedAt >= p.logEveryMs;

export const STATUS_REPORTED = 'StatusReported';

const CONDITION_REASONS: Record<RefusalReason, string> = {
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  'not-found': 'NotFound',
  conflict: 'Conflict',
  invalid: 'Invalid',
  throttled: 'Throttled',
  unavailable: 'Unavailable',
  rejected: 'Rejected',
  unreachable: 'Unreachable',
};

const stamp = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
/** A duration for people: `0.4 s`, `12 s`. */
export const seconds = (ms: number): string => `${ms < 10_000 ? (ms / 1000).toFixed(1) : Math.round(ms / 1000)} s`;

/** `StatusReported` False: what the agent says once its status has been unsent for too long. */
export function staleCondition(o: Outage, now: number): Condition {
  return {
    type: STATUS_REPORTED,
    status: 'False',
    reason: CONDITION_REASONS[o.last.reason],
    message:
      `the agent has not written this pool's status for ${seconds(now - o.since)} ` +
      `(${o.failures} writes refused; last: ${o.last.message}); it serves pods from its own records and retries with back-off`,
    lastTransitionTime: stamp(o.since),
  };
}

/**
 * The agent's conditions to write with a status write that is about to be taken, or undefined
 * when the server's are right already. After a stale outage the condition says how long it
 * lasted; otherwise an existing True one is left as it is.
 */
export function reportedConditions(
  server: Condition[] | undefined,
  ending: Outage | undefined,
  now: number,
): Condition[] | undefined {
  const mine = server?.find((c) => c.type === STATUS_REPORTED);
  if (!ending?.stale && mine?.status === 'True') return undefined;
  const condition: Condition = {
    type: STATUS_REPORTED,
    status: 'True',
    reason: 'Reported',
    message: ending?.stale
      ? `the agent's status is current again after ${seconds(now - ending.since)} unsent ` +
        `(${ending.failures} writes refused; last: ${ending.last.message})`
      : 'the agent writes used, releaseAcks and cooling of this pool',
    lastTransitionTime: stamp(now),
  };
  return [...(server ?? []).filter((c) => c.type !== STATUS_REPORTED), condition];
}
