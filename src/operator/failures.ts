import { CLIENT_CODES, CloudError, type CloudErrorKind } from '../cloud/index.js';
import type { FailureRecord } from '../ipam/failure-record.js';
import type { NodeMemory } from './node-memory.js';

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
    return (
      `the account's ${e.action} quota is used up; ` +
      'lower --api-limits or --api-limit-scale if another tool shares it'
    );
  if (e.kind === 'transient') return 'the cloud or the network failed; the operator retries with a growing delay';
  return 'the operator retries with a growing delay';
}

/** A failure as an Event or condition message: action, code, the cloud's message, a hint; no request id. */
export function describeFailure(e: CloudError): string {
  return `${e.action}: ${e.code}: ${e.cloudMessage}; ${hintFor(e)}`;
}

/**
 * Holds the failed action back on the node: transient failures from 1 s to a minute,
 * permanent ones from 5 s to ten minutes, so that a missing permission costs a few calls an
 * hour rather than one every reconcile.
 */
export function recordFailure(m: NodeMemory, e: CloudError, now: number): FailureRecord {
  const permanent = PERMANENT.has(e.kind);
  const count = (m.failures.get(e.action)?.count ?? 0) + 1;
  const [base, cap] = permanent ? [5_000, 600_000] : [1_000, 60_000];
  const until = now + Math.min(cap, base * 2 ** (count - 1));
  const r: FailureRecord = { action: e.action, code: e.code, message: describeFailure(e), permanent, count, until };
  m.failures.set(e.action, r);
  return r;
}

const AUTH_CODES =
  /^(SignatureDoesNotMatch|IncompleteSignature|InvalidAccessKeyId|InvalidSecurityToken|Client\.Credentials)/;

/**
 * Why no OpenAPI read works (a wrong AccessKey, a missing RAM permission, an endpoint that does
 * not answer), as a condition reason and a message that names the fix. `credentials` says where
 * the credentials come from (never their values).
 */
export function cloudFailureCause(e: unknown, credentials: string): { reason: string; code: string; message: string } {
  if (!(e instanceof CloudError) || e.code === CLIENT_CODES.credentials) {
    const text = e instanceof CloudError ? e.cloudMessage : e instanceof Error ? e.message : String(e);
    return {
      reason: 'CloudCredentialsUnavailable',
      code: CLIENT_CODES.credentials,
      message:
        `no credentials from ${credentials}: ${text}; check the credentials Secret (credentials.secret.name), ` +
        'the RAM role the nodes carry (credentials.ramRole.name) or the RRSA settings',
    };
  }
  const say = (reason: string, fix: string) => ({
    reason,
    code: e.code,
    message: `${e.action}: ${e.code}: ${e.cloudMessage}; ${fix}`,
  });
  if (AUTH_CODES.test(e.code))
    return say(
      'CloudAuthFailed',
      `the cloud refuses the operator's credentials (${credentials}): check the AccessKey id and secret ` +
        '(the chart: credentials.secret.name), or the RAM role / RRSA settings',
    );
  if (e.kind === 'permission') return say('CloudPermissionDenied', hintFor(e));
  if (e.code === 'Transport.Connection' || e.code === 'Transport.Timeout')
    return say(
      'CloudUnreachable',
      'the OpenAPI endpoint does not answer: check --ecs-endpoint / --vpc-endpoint (the chart: endpoints.*) and ' +
        'that this node reaches it (VPC-internal endpoints answer only inside the VPC)',
    );
  if (e.code === 'Transport.NonJsonBody' || e.code === 'Cloud.BadAnswer')
    return say(
      'CloudBadAnswer',
      'the endpoint answers, but not as the ECS OpenAPI does (a proxy or gateway in between?): check the endpoint URL',
    );
  return say('CloudCallsFailing', hintFor(e));
}
