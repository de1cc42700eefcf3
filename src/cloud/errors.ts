/** What a failed OpenAPI call means to the caller. */
export type CloudErrorKind =
  | 'throttled'
  | 'vswitch-exhausted'
  | 'instance-limit'
  | 'quota-exceeded'
  | 'not-found'
  | 'invalid-state'
  | 'invalid-request'
  | 'permission'
  | 'transient'
  | 'unknown';

/** The cloud's codes that a retry can cure. */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set([
  'Throttling',
  'Throttling.User',
  'Throttling.Api',
  'ServiceUnavailable',
  'InternalError',
  'Operation.Conflict',
]);

/** Codes for calls that never got an answer from the API (ours, not the cloud's). */
export const TRANSPORT_CODES = {
  timeout: 'Transport.Timeout',
  connection: 'Transport.Connection',
  nonJson: 'Transport.NonJsonBody',
  closed: 'Transport.Closed',
} as const;

/** Codes for calls this client decided not to send (never retried: their outcome is known). */
export const CLIENT_CODES = {
  notLeading: 'Client.NotLeading',
  queueTimeout: 'Client.QueueTimeout',
  /** The credentials provider could not give credentials (a metadata service, STS, a mounted Secret). */
  credentials: 'Client.Credentials',
} as const;

/**
 * An answer that is not what its action promises (see answers.ts): a non-2xx status without a Code,
 * a missing or malformed field, a NextToken that comes back. Retried like a 5xx; to a mutating call
 * it means the call may have been carried out.
 */
export const BAD_ANSWER = 'Cloud.BadAnswer';

export function isRetryableCode(code: string): boolean {
  return (
    RETRYABLE_CODES.has(code) ||
    code === BAD_ANSWER ||
    (code.startsWith('Transport.') && code !== TRANSPORT_CODES.closed)
  );
}

export function classify(code: string): CloudErrorKind {
  if (code.startsWith('Throttling')) return 'throttled';
  if (code === 'InvalidVSwitchId.IpNotEnough' || code === 'QuotaExceeded.PrivateIpAddress') return 'vswitch-exhausted';
  if (
    code === 'EniPerInstanceLimitExceeded' ||
    code === 'MaxEniPrivateIpsCountExceeded' ||
    code === 'MaxEniIpv6IpsCountExceeded' ||
    code === 'InvalidOperation.Ipv4CountExceeded' ||
    code === 'InvalidOperation.Ipv6CountExceeded'
  ) {
    return 'instance-limit';
  }
  if (code === 'MaxEniCountExceeded' || code.startsWith('QuotaExceed')) return 'quota-exceeded';
  if (code.endsWith('.NotFound') && !code.startsWith('InvalidAccessKeyId') && !code.startsWith('InvalidAction'))
    return 'not-found';
  if (
    code === 'InvalidOperation.InvalidEniState' ||
    code === 'InvalidOperation.InvalidEcsState' ||
    code === 'IncorrectInstanceStatus'
  ) {
    return 'invalid-state';
  }
  if (
    code.startsWith('Forbidden') ||
    code.startsWith('InvalidAccessKeyId') ||
    code.startsWith('InvalidSecurityToken') ||
    code === 'SignatureDoesNotMatch' ||
    code === 'IncompleteSignature' ||
    code === 'NoPermission'
  ) {
    return 'permission';
  }
  if (
    RETRYABLE_CODES.has(code) ||
    code === BAD_ANSWER ||
    code.startsWith('Transport.') ||
    code.startsWith('ServiceUnavailable') ||
    code.startsWith('Client.')
  )
    return 'transient';
  if (/^(Invalid|Missing|Duplicate|Unsupported|Idempotent|IllegalTimestamp|SignatureNonceUsed)/.test(code))
    return 'invalid-request';
  return 'unknown';
}

/**
 * A classified OpenAPI failure. The message names the action, the code, the cloud's own
 * message and the request id, and never a URL, signature or secret.
 */
export class CloudError extends Error {
  readonly kind: CloudErrorKind;
  readonly retryable: boolean;

  constructor(
    readonly action: string,
    readonly code: string,
    readonly cloudMessage: string,
    readonly requestId: string | undefined,
    readonly attempts = 1,
  ) {
    super(
      `${action}: ${code}: ${cloudMessage}` +
        (requestId ? ` (RequestId ${requestId})` : '') +
        (attempts > 1 ? ` after ${attempts} attempts` : ''),
    );
    this.name = 'CloudError';
    this.kind = classify(code);
    this.retryable = isRetryableCode(code);
  }

  /**
   * Some attempt got no answer (a timeout, a dropped connection) or, to a mutating call, a bad
   * answer: the call may have been carried out.
   */
  outcomeUnknown = false;

  withAttempts(attempts: number, outcomeUnknown = this.outcomeUnknown): CloudError {
    const e = new CloudError(this.action, this.code, this.cloudMessage, this.requestId, attempts);
    e.outcomeUnknown = outcomeUnknown;
    return e;
  }
}

/** Removes anything that could carry a credential from a text we did not write. */
/**
 * For an unassign's catch: an address the ENI no longer holds (a retry after a lost answer) is
 * what was asked for; anything else is thrown on.
 */
export function unlessAlreadyUnassigned(e: unknown): void {
  if (!(e instanceof CloudError && e.code === 'InvalidIp.IpUnassigned')) throw e;
}

export function scrub(text: string): string {
  return text
    .replace(/server string to sign is:.*$/s, 'server string to sign is:<redacted>')
    .replace(/https?:\/\/\S+/g, '<url>')
    .replace(/(Signature|AccessKeySecret|SecurityToken|AccessKeyId)=[^&\s]*/gi, '$1=<redacted>');
}
