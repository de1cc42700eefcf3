import { randomBytes } from 'node:crypto';
import { apiError, invalid, missing } from './errors.js';
import { signRpc, signatureMatches, stringToSign } from './signature.js';

const CLOCK_SKEW_MS = 15 * 60_000;

interface Credential {
  secret: string;
  securityToken?: string;
  /** Real epoch ms after which temporary credentials are refused. */
  expiresAt?: number;
}

/**
 * Checks who signed a call: the AccessKey exists, the signature (HMAC-SHA1 over every
 * received parameter except Signature) matches, the nonce is fresh and the timestamp
 * within 15 minutes. Also issues the temporary credentials of ECS RAM roles.
 */
export class Authenticator {
  private readonly keys = new Map<string, Credential>();
  private readonly nonces = new Map<string, number>();
  private lastPrune = 0;

  constructor(credentials: Array<{ accessKeyId: string; accessKeySecret: string }>) {
    for (const c of credentials) this.keys.set(c.accessKeyId, { secret: c.accessKeySecret });
  }

  issueTemporary(
    ttlMs: number,
    now = Date.now(),
  ): { accessKeyId: string; secret: string; token: string; expiresAt: number } {
    const accessKeyId = `STS.${randomBytes(12).toString('hex')}`;
    const secret = randomBytes(20).toString('base64url');
    const token = randomBytes(48).toString('base64');
    const expiresAt = now + ttlMs;
    this.keys.set(accessKeyId, { secret, securityToken: token, expiresAt });
    return { accessKeyId, secret, token, expiresAt };
  }

  verify(method: string, params: Record<string, string>, now = Date.now()): string {
    for (const name of ['AccessKeyId', 'SignatureMethod', 'SignatureVersion', 'SignatureNonce', 'Timestamp']) {
      if (!params[name]) throw missing(name);
    }
    if (!params.Signature)
      throw apiError(
        'IncompleteSignature',
        'The request signature does not conform to Aliyun standards: Signature is missing.',
      );
    if (params.SignatureMethod !== 'HMAC-SHA1')
      throw invalid('SignatureMethod', `"${params.SignatureMethod}" is not supported; use HMAC-SHA1`);
    if (params.SignatureVersion !== '1.0')
      throw invalid('SignatureVersion', `"${params.SignatureVersion}" is not supported; use 1.0`);
    const id = params.AccessKeyId!;
    const cred = this.keys.get(id);
    if (!cred) throw apiError('InvalidAccessKeyId.NotFound', 'Specified access key is not found.');
    if (cred.expiresAt !== undefined) {
      if (cred.expiresAt < now) throw apiError('InvalidSecurityToken.Expired', 'Specified SecurityToken is expired.');
      if (params.SecurityToken !== cred.securityToken) {
        throw apiError(
          'InvalidSecurityToken.MismatchWithAccessKey',
          'Specified SecurityToken mismatch with the AccessKey.',
        );
      }
    }
    const expected = signRpc(method, params, cred.secret);
    if (!signatureMatches(expected, params.Signature)) {
      throw apiError(
        'SignatureDoesNotMatch',
        'Specified signature is not matched with our calculation. ' +
          `server string to sign is:${stringToSign(method, params)}`,
      );
    }
    const ts = params.Timestamp!;
    const t = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(ts) ? Date.parse(ts) : NaN;
    if (Number.isNaN(t))
      throw apiError(
        'IllegalTimestamp',
        'The input parameter "Timestamp" that is mandatory for processing this request ' +
          `is not supplied or malformed: "${ts}".`,
      );
    if (Math.abs(now - t) > CLOCK_SKEW_MS) {
      throw apiError(
        'IllegalTimestamp',
        `The Timestamp ${ts} is more than 15 minutes away from the server time ${new Date(now).toISOString()}.`,
      );
    }
    this.pruneNonces(now);
    const nonceKey = `${id}/${params.SignatureNonce}`;
    if (this.nonces.has(nonceKey)) throw apiError('SignatureNonceUsed', 'Specified signature nonce was used already.');
    this.nonces.set(nonceKey, now + 2 * CLOCK_SKEW_MS);
    return id;
  }

  private pruneNonces(now: number): void {
    if (now - this.lastPrune < 60_000) return;
    this.lastPrune = now;
    for (const [k, until] of this.nonces) if (until < now) this.nonces.delete(k);
  }
}
