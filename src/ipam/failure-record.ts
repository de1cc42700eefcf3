import type { PlannedCondition } from './conditions.js';

/** What a failure of one action on one node means until that action succeeds there again. */
export interface FailureRecord {
  action: string;
  code: string;
  /** The cloud's words and a hint, without a request id (so repeated Events fold into one). */
  message: string;
  permanent: boolean;
  count: number;
  /** No new attempt of this action for this node before this time (ms). */
  until: number;
}

/** The failure that holds this action back now, if any. */
export function heldBack(failures: readonly FailureRecord[], action: string, now: number): FailureRecord | undefined {
  return failures.find((r) => r.action === action && r.until > now);
}

/** Why a pool is degraded: a permanent failure, or a transient one that keeps coming back. */
export function degradedBy(failures: readonly FailureRecord[]): FailureRecord | undefined {
  return failures.find((r) => r.permanent || r.count >= 3);
}

/** When the earliest back-off ends (to look again then). */
export function nextAttempt(failures: readonly FailureRecord[], now: number): number | undefined {
  const ends = failures.map((r) => r.until).filter((t) => t > now);
  return ends.length ? Math.min(...ends) : undefined;
}

/** The Degraded condition the failures make: true for a permanent failure or a transient one that keeps coming back. */
export function degradedCondition(failures: readonly FailureRecord[]): PlannedCondition {
  const failing = degradedBy(failures);
  if (!failing) return { type: 'Degraded', status: 'False', reason: 'Healthy', message: '' };
  const reason = failing.permanent ? 'CloudCallRefused' : 'CloudCallsFailing';
  return { type: 'Degraded', status: 'True', reason, message: failing.message };
}

/** A failure of this node's own calls says more than a fleet-wide outage; the outage, more than nothing. */
export function degradedOrOutage(
  failures: readonly FailureRecord[],
  outage: { reason: string; message: string } | undefined,
): PlannedCondition {
  const own = degradedCondition(failures);
  return own.status === 'True' || !outage ? own : { type: 'Degraded', status: 'True', ...outage };
}

/**
 * The record after one more failure of an action: transient failures hold it back from 1 s to a
 * minute, permanent ones from 5 s to ten minutes, so that a missing permission costs a few calls
 * an hour rather than one every reconcile.
 */
export function nextFailure(
  previous: FailureRecord | undefined,
  failure: Pick<FailureRecord, 'action' | 'code' | 'message' | 'permanent'>,
  now: number,
): FailureRecord {
  const count = (previous?.count ?? 0) + 1;
  const [base, cap] = failure.permanent ? [5_000, 600_000] : [1_000, 60_000];
  return { ...failure, count, until: now + Math.min(cap, base * 2 ** (count - 1)) };
}
