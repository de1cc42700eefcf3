/**
 * What a failed cloud call means, in one place: which failures no retry fixes, how long an action
 * is held back on a node (the schedule is pure, in ipam/failure-record.ts), what the user is told
 * and can do, and why the cloud as a whole is unusable.
 */
import { CLIENT_CODES, CloudError, type CloudErrorKind } from '../cloud/index.js';
import { nextFailure, type FailureRecord } from '../ipam/failure-record.js';
import type { ENIPool } from '../api/types.js';
import { PREFIX_SIZE } from '../ipam/prefix.js';
import type { Logger } from '../observability/logger.js';
import type { NodeMemories, NodeMemory } from './pool/node-memory.js';
import type { CloudView, PoolEvents } from './pool/ports.js';

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

/** Holds the failed action back on the node for its back-off (see `nextFailure`). */
export function recordFailure(m: NodeMemory, e: CloudError, now: number): FailureRecord {
  const failure = { action: e.action, code: e.code, message: describeFailure(e), permanent: PERMANENT.has(e.kind) };
  const r = nextFailure(m.failures.get(e.action), failure, now);
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

export interface CloudFailureDeps {
  cloud: CloudView;
  events: PoolEvents;
  memory: NodeMemories;
  logger: Logger;
  now: () => number;
  enqueue: (name: string, afterMs?: number) => void;
}

/** A deposed leader's calls, or a client that is closing: nothing to hold back, nothing to say. */
export const isShutdown = (e: unknown): boolean =>
  e instanceof CloudError && (e.code === 'Client.NotLeading' || e.code === 'Transport.Closed');

/**
 * What a failed change to a node's ENIs means, shared by the reconcile and the background ENI
 * work: an exhausted vSwitch is skipped, an instance limit is resynced, a spent quota is a
 * shortfall; any other failure holds the action back on the node for its back-off.
 */
export class CloudFailures {
  constructor(private readonly deps: CloudFailureDeps) {}

  /**
   * Handles the failure: answers the back-off the action is now held to (if any) and whether the
   * user was told already (an Event of its own kind); otherwise the caller says it. With
   * `prefix` the call asked for /28 prefixes: a vSwitch that still has a /28's worth of free
   * addresses but refused is fragmented, not exhausted.
   */
  async respond(pool: ENIPool, e: CloudError, vSwitchId?: string, prefix = false): Promise<FailureResponse> {
    const { cloud, events } = this.deps;
    const name = pool.metadata.name;
    // Marked either way: once the free count is refreshed, the addresses left are usable singly.
    if (e.kind === 'vswitch-exhausted' && vSwitchId && prefix) cloud.fragment(vSwitchId);
    const free = cloud.knownVSwitches.find((v) => v.id === vSwitchId)?.availableIpCount ?? 0;
    if (e.kind === 'vswitch-exhausted' && vSwitchId && prefix && free >= PREFIX_SIZE) {
      const then =
        pool.spec.prefixFallback === false
          ? 'the pool waits for a /28 there (prefixFallback is false)'
          : 'new ENIs there take single secondary IPs instead';
      const message = `vSwitch ${vSwitchId} has ${free} free addresses but no aligned /28 prefix (${e.code}): ${then}`;
      events.record(pool, 'Warning', 'VSwitchFragmented', message);
      this.deps.enqueue(name, 100);
      return { told: true };
    }
    if (e.kind === 'vswitch-exhausted' && vSwitchId) {
      cloud.block(vSwitchId);
      const message = `vSwitch ${vSwitchId} has no free addresses (${e.code}); trying the zone's other vSwitches`;
      events.record(pool, 'Warning', 'VSwitchExhausted', message);
      this.deps.enqueue(name, 100);
      return { told: true };
    }
    if (e.kind === 'instance-limit') {
      const message = `${e.action} on ${pool.spec.instanceID}: ${e.code}; resyncing the instance`;
      events.record(pool, 'Warning', 'InstanceLimit', message);
      await cloud.resyncInstance(pool.spec.instanceID!, name);
      await cloud.instanceType(pool.spec.instanceType!, { refresh: true });
      // Held back too: a limit the resync does not explain would otherwise be asked for every second.
      return { held: this.hold(pool, e), told: true };
    }
    const held = this.hold(pool, e);
    if (e.kind === 'quota-exceeded') {
      // No retry frees a regional quota soon: the action is held back like a permanent failure.
      this.deps.memory.of(name).shortfall = { reason: 'QuotaExceeded', message: held.message };
      events.record(pool, 'Warning', 'QuotaExceeded', held.message);
      return { held, told: true };
    }
    return { held, told: false };
  }

  private hold(pool: ENIPool, e: CloudError): FailureRecord {
    const name = pool.metadata.name;
    const r = recordFailure(this.deps.memory.of(name), e, this.deps.now());
    const retryInMs = r.until - this.deps.now();
    this.deps.logger.warn(
      { node: name, action: e.action, code: e.code, requestId: e.requestId, retryInMs },
      'cloud call failed',
    );
    return r;
  }
}

/** What a failure meant: the back-off the action is held to, and whether an Event said so already. */
export interface FailureResponse {
  held?: FailureRecord;
  told: boolean;
}
