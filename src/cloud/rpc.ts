import { randomUUID } from 'node:crypto';
import RPCClient from '@alicloud/pop-core';
import { answerProblem, bodyExcerpt } from './answers.js';
import { sleepOn, systemClock, type Clock } from '../clock.js';
import type { Logger } from '../observability/logger.js';
import { CredentialsError, type CredentialsProvider } from './credentials.js';
import { BAD_ANSWER, CLIENT_CODES, CloudError, TRANSPORT_CODES, scrub } from './errors.js';
import { MUTATING_ACTIONS, type ActionLimiters } from './limits.js';
import type { OpenApiMetrics } from './metrics.js';
import { backoffDelay, timeLeftHint, type RetryPolicy } from './retry.js';
import { SendGate } from './send-gate.js';

export type RpcParams = Record<
  string,
  string | number | boolean | undefined | string[] | Array<Record<string, string>>
>;

export interface CallOptions {
  /** The call creates something: it carries a ClientToken, the same on every retry. */
  idempotent?: boolean;
  /** A token chosen by the caller (for example derived from its intent, to survive restarts). */
  clientToken?: string;
  /**
   * A promise of this call's own, on top of its action's (a listing's: no NextToken twice): what is
   * wrong with an answer that has the action's shape, if anything. A problem makes it a bad answer.
   */
  check?: (answer: any) => string | undefined; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface RpcCallerOptions {
  endpoint: string;
  apiVersion: string;
  credentials: CredentialsProvider;
  limiters: ActionLimiters;
  metrics: OpenApiMetrics;
  retry: RetryPolicy;
  logger: Logger;
  random?: () => number;
  /** Retry waits and deadlines; the system's clock unless a test gives another. */
  clock?: Clock;
  /**
   * Asked right before a mutating call is sent (after its wait in the limiter): false keeps it
   * from being sent. An operator answers whether it still holds a fresh lease.
   */
  mayMutate?: () => boolean;
}

interface PopEntry {
  response?: { statusCode?: number; headers?: Record<string, unknown> };
}

interface PopError extends Error {
  code?: string;
  data?: { Code?: string; Message?: string; RequestId?: string };
  entry?: PopEntry;
}

/** pop-core built verbose: `request()` answers the body and the HTTP exchange, so the status can be checked. */
type VerboseClient = { request(action: string, params: object, opts: object): Promise<[unknown, PopEntry]> };
const VerboseRpcClient = RPCClient as unknown as new (config: object, verbose: true) => VerboseClient;

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ECONNABORTED',
]);

/** Turns whatever pop-core threw into a CloudError, dropping its URL (which carries the signature). */
function toCloudError(action: string, err: PopError, timeoutMs: number): CloudError {
  // Nothing was sent: the credentials could not be had. Said as such (the source's own words).
  if (err instanceof CredentialsError)
    return new CloudError(action, CLIENT_CODES.credentials, scrub(err.message), undefined);
  if (err.data?.Code) return new CloudError(action, err.data.Code, scrub(err.data.Message ?? ''), err.data.RequestId);
  if (err.name === 'RequestTimeoutError')
    return new CloudError(action, TRANSPORT_CODES.timeout, `no answer within ${timeoutMs} ms`, undefined);
  if (err.name === 'SyntaxError')
    return new CloudError(
      action,
      TRANSPORT_CODES.nonJson,
      'the endpoint answered with a body that is not JSON (a proxy or gateway error page?)',
      undefined,
    );
  if (err.code && CONNECTION_CODES.has(err.code))
    return new CloudError(action, TRANSPORT_CODES.connection, `connection failed: ${err.code}`, undefined);
  if (/socket hang up/i.test(err.message))
    return new CloudError(action, TRANSPORT_CODES.connection, 'connection closed by the endpoint', undefined);
  return new CloudError(action, 'Unknown', scrub(err.message), undefined);
}

/** pop-core reads `json.Code` off whatever parsed: a body of `null` throws there. */
const isNullBody = (err: unknown): boolean => err instanceof TypeError && /\(reading 'Code'\)/.test(err.message);

const LONG_WAIT_MS = 30_000;
const NO_ANSWER: ReadonlySet<string> = new Set([
  TRANSPORT_CODES.timeout,
  TRANSPORT_CODES.connection,
  TRANSPORT_CODES.nonJson,
]);

/**
 * Calls one OpenAPI product (ECS or VPC) through pop-core: each attempt takes a token from
 * its action's limiter, is measured, and is retried with jittered backoff when the code
 * says a retry can succeed. Parameters go in a POST body, so no URL carries a signature.
 */
export class RpcCaller {
  private readonly client: VerboseClient;
  private readonly random: () => number;
  /** Set by close(): no new attempt starts, so a stopped operator's retries cannot act late. */
  closed = false;
  /** Mutating calls sent and not answered yet. */
  mutationsInFlight = 0;

  private readonly longWaitLogged = new Map<string, number>();

  /** pop-core's credentials hook: the call's own credentials, after its last check. */
  private readonly sending = new SendGate();

  /** Throws for a call that must not go out now: the client is closed or the caller no longer leads. */
  private checkLeading(action: string): void {
    if (this.closed)
      throw new CloudError(action, TRANSPORT_CODES.closed, 'the client was closed before the call was sent', undefined);
    if (MUTATING_ACTIONS.has(action) && this.options.mayMutate && !this.options.mayMutate()) {
      throw new CloudError(
        action,
        CLIENT_CODES.notLeading,
        'not sent: this operator no longer holds a fresh leader lease',
        undefined,
      );
    }
  }

  /** Throws for a call that must not go out now: checkLeading's reasons, or it waited too long. */
  private checkSendable(action: string, waitedMs: number): void {
    this.checkLeading(action);
    if (waitedMs > LONG_WAIT_MS && this.clock.now() - (this.longWaitLogged.get(action) ?? 0) > 10_000) {
      this.longWaitLogged.set(action, this.clock.now());
      this.options.logger.warn(
        { action, waitedMs, limit: this.options.limiters.limitOf(action) },
        'OpenAPI call waited long in its rate limiter',
      );
    }
    if (waitedMs > this.options.retry.maxQueueMs) {
      throw new CloudError(
        action,
        CLIENT_CODES.queueTimeout,
        `not sent: it waited ${(waitedMs / 1000).toFixed(1)} s in the ${action} rate limiter, ` +
          `more than ${(this.options.retry.maxQueueMs / 1000).toFixed(1)} s`,
        undefined,
      );
    }
  }

  private readonly clock: Clock;

  constructor(private readonly options: RpcCallerOptions) {
    this.random = options.random ?? Math.random;
    this.clock = options.clock ?? systemClock;
    // pop-core asks its provider for credentials right before it signs and sends: the gate.
    this.client = new VerboseRpcClient(
      { endpoint: options.endpoint, apiVersion: options.apiVersion, credentialsProvider: this.sending },
      true,
    );
  }

  /** A bad answer, logged with what a person needs to see it: the status and the start of the body. */
  private badAnswer(action: string, problem: string, httpStatus: number | undefined, body: unknown): CloudError {
    const requestId = (body as { RequestId?: unknown } | null)?.RequestId;
    const error = new CloudError(action, BAD_ANSWER, problem, typeof requestId === 'string' ? requestId : undefined);
    this.options.logger.warn(
      { action, code: BAD_ANSWER, httpStatus, requestId: error.requestId, problem, body: bodyExcerpt(body) },
      'OpenAPI answer rejected: not what the action promises',
    );
    return error;
  }

  async call<T>(action: string, params: RpcParams, opts: CallOptions = {}): Promise<T> {
    const { retry, limiters, metrics } = this.options;
    const body: RpcParams = { ...params };
    if (opts.idempotent || opts.clientToken) body.ClientToken = opts.clientToken ?? randomUUID();
    // The retry budget starts when the first attempt is sent: time in the limiter is bounded apart.
    let sentAt: number | undefined;
    let outcomeUnknown = false;
    for (let attempt = 1; ; attempt++) {
      let error: CloudError;
      let hint: number | undefined;
      try {
        return await limiters.schedule(action, async (waitedMs) => {
          metrics.limiterWait.observe({ action }, waitedMs / 1000);
          // Credentials first (without valid ones, a fetch may take seconds): the checks come after.
          const credentials = await this.options.credentials.getCredentials();
          this.checkSendable(action, waitedMs);
          sentAt ??= this.clock.now();
          const mutating = MUTATING_ACTIONS.has(action);
          if (mutating) this.mutationsInFlight++;
          const timeoutMs = Math.max(
            1000,
            Math.min(retry.attemptTimeoutMs, sentAt + retry.maxElapsedMs + retry.attemptTimeoutMs - this.clock.now()),
          );
          const endTimer = metrics.duration.startTimer({ action });
          metrics.inFlight.inc({ action });
          try {
            // Checked again as pop-core takes the credentials, right before it signs and sends.
            this.sending.arm(credentials, () => this.checkLeading(action));
            const [answer, entry] = await this.client.request(action, body, {
              method: 'POST',
              timeout: timeoutMs,
              formatParams: false,
            });
            const httpStatus = entry.response?.statusCode;
            const problem = answerProblem(action, httpStatus, answer, body) ?? opts.check?.(answer);
            if (problem) throw this.badAnswer(action, problem, httpStatus, answer);
            metrics.requests.inc({ action, code: 'OK' });
            return answer as T;
          } catch (e) {
            // Refused by the last check: never sent, nothing to count.
            if (e instanceof CloudError && e.code !== BAD_ANSWER) throw e;
            const ce =
              e instanceof CloudError
                ? e
                : isNullBody(e)
                  ? this.badAnswer(action, 'the body is not a JSON object', undefined, null)
                  : toCloudError(action, e as PopError, timeoutMs);
            metrics.requests.inc({ action, code: ce.code });
            if (ce.kind === 'throttled') {
              metrics.throttled.inc({ action });
              void limiters.drain(action);
            }
            hint = timeLeftHint((e as PopError).entry?.response?.headers);
            throw ce;
          } finally {
            endTimer();
            metrics.inFlight.dec({ action });
            if (mutating) this.mutationsInFlight--;
          }
        });
      } catch (e) {
        error = e instanceof CloudError ? e : toCloudError(action, e as PopError, retry.attemptTimeoutMs);
      }
      // A call that went out and got no answer may have been carried out, whatever later attempts say;
      // so may a mutating one whose answer was not one.
      if (
        sentAt !== undefined &&
        (NO_ANSWER.has(error.code) || (error.code === BAD_ANSWER && MUTATING_ACTIONS.has(action)))
      )
        outcomeUnknown = true;
      const elapsed = sentAt === undefined ? 0 : this.clock.now() - sentAt;
      const delay = backoffDelay(attempt, retry, this.random, hint);
      if (!error.retryable || this.closed || attempt >= retry.maxAttempts || elapsed + delay > retry.maxElapsedMs) {
        throw error.withAttempts(attempt, outcomeUnknown);
      }
      metrics.retries.inc({ action, code: error.code });
      this.options.logger.warn(
        { action, code: error.code, requestId: error.requestId, attempt, delayMs: Math.round(delay) },
        'OpenAPI call failed; retrying',
      );
      await sleepOn(this.clock, delay);
    }
  }
}
