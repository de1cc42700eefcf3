import { CloudError, type CloudErrorKind } from '../cloud/index.js';

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

/** Kinds that no retry fixes: a missing permission, a bad request, an error nobody classified. */
const PERMANENT: ReadonlySet<CloudErrorKind> = new Set([
  'permission',
  'invalid-request',
  'unknown',
  'quota-exceeded',
  'invalid-state',
  'not-found',
]);

/** What a user can do about a failure the cloud reported. */
export function hintFor(e: CloudError): string {
  if (e.code.startsWith('Forbidden') || e.code === 'NoPermission') {
    return `grant the RAM action ecs:${e.action} to the operator's identity (see the README's RAM policy)`;
  }
  if (e.kind === 'permission') return "check the operator's credentials (AccessKey, RAM role or RRSA)";
  if (e.kind === 'throttled')
    return `the account's ${e.action} quota is used up; lower --api-limits or --api-limit-scale if another tool shares it`;
  if (e.kind === 'transient') return 'the cloud or the network failed; the operator retries with a growing delay';
  return 'the operator retries with a growing delay';
}

/** A failure as an Event or condition message: action, code, the cloud's message, a hint; no request id. */
export function describeFailure(e: CloudError): string {
  return `${e.action}: ${e.code}: ${e.cloudMessage}; ${hintFor(e)}`;
}

/**
 * Per node and action, the failures of cloud calls that no retry inside the client absorbed,
 * and when to try that action again there: transient ones back off from 1 s to a minute,
 * permanent ones from 5 s to ten minutes, so that a missing permission costs a few calls an
 * hour rather than one every reconcile.
 */
export class FailureMemory {
  private readonly byNode = new Map<string, Map<string, FailureRecord>>();

  record(node: string, e: CloudError, now: number): FailureRecord {
    const mine = this.byNode.get(node) ?? this.byNode.set(node, new Map()).get(node)!;
    const permanent = PERMANENT.has(e.kind);
    const count = (mine.get(e.action)?.count ?? 0) + 1;
    const [base, cap] = permanent ? [5_000, 600_000] : [1_000, 60_000];
    const r: FailureRecord = {
      action: e.action,
      code: e.code,
      message: describeFailure(e),
      permanent,
      count,
      until: now + Math.min(cap, base * 2 ** (count - 1)),
    };
    mine.set(e.action, r);
    return r;
  }

  succeeded(node: string, action: string): void {
    this.byNode.get(node)?.delete(action);
  }

  /** The failure that holds this action back on this node now, if any. */
  blocked(node: string, action: string, now: number): FailureRecord | undefined {
    const r = this.byNode.get(node)?.get(action);
    return r && r.until > now ? r : undefined;
  }

  /** Why the node's pool is degraded: a permanent failure, or a transient one that keeps coming back. */
  degraded(node: string): FailureRecord | undefined {
    return [...(this.byNode.get(node)?.values() ?? [])].find((r) => r.permanent || r.count >= 3);
  }

  /** When the earliest back-off of the node ends (to look again then). */
  nextAttempt(node: string, now: number): number | undefined {
    const ends = [...(this.byNode.get(node)?.values() ?? [])].map((r) => r.until).filter((t) => t > now);
    return ends.length ? Math.min(...ends) : undefined;
  }

  forget(node: string): void {
    this.byNode.delete(node);
  }
}
