import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { CloudError, classify, scrub } from '../../src/cloud/errors.js';
import { resolveLimits } from '../../src/cloud/limits.js';
import { DEFAULT_RETRY, backoffDelay, timeLeftHint } from '../../src/cloud/retry.js';

describe('backoff', () => {
  it('stays within the exponential ceiling and never exceeds the maximum', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (attempt, r) => {
        const d = backoffDelay(attempt, DEFAULT_RETRY, () => r);
        return d >= 0 && d <= Math.min(DEFAULT_RETRY.maxDelayMs, DEFAULT_RETRY.baseDelayMs * 2 ** (attempt - 1));
      }),
    );
  });

  it('never retries before a TimeLeft hint', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 0, max: 60_000 }),
        fc.double({ min: 0, max: 0.999999, noNaN: true }),
        (attempt, hint, r) => {
          return backoffDelay(attempt, DEFAULT_RETRY, () => r, hint) >= hint;
        },
      ),
    );
  });

  it('reads TimeLeft from either rate-limit header', () => {
    expect(timeLeftHint({ 'x-ratelimit-user-api': 'Limit:500,Remain:0,TimeLeft:1234,Reset:1' })).toBe(1234);
    expect(timeLeftHint({ 'x-ratelimit-user': 'TimeLeft: 20' })).toBe(20);
    expect(timeLeftHint({ 'x-ratelimit-user-api': 'Limit:5' })).toBeUndefined();
    expect(timeLeftHint(undefined)).toBeUndefined();
  });
});

describe('error classification', () => {
  it.each([
    ['Throttling', 'throttled', true],
    ['Throttling.User', 'throttled', true],
    ['Throttling.Api', 'throttled', true],
    ['InvalidVSwitchId.IpNotEnough', 'vswitch-exhausted', false],
    ['QuotaExceeded.PrivateIpAddress', 'vswitch-exhausted', false],
    ['EniPerInstanceLimitExceeded', 'instance-limit', false],
    ['InvalidOperation.Ipv4CountExceeded', 'instance-limit', false],
    ['MaxEniCountExceeded', 'quota-exceeded', false],
    ['InvalidEniId.NotFound', 'not-found', false],
    ['InvalidOperation.InvalidEniState', 'invalid-state', false],
    ['InvalidParameter', 'invalid-request', false],
    ['IdempotentParameterMismatch', 'invalid-request', false],
    ['SignatureDoesNotMatch', 'permission', false],
    ['InvalidAccessKeyId.NotFound', 'permission', false],
    ['Forbidden.RAM', 'permission', false],
    ['InternalError', 'transient', true],
    ['ServiceUnavailable', 'transient', true],
    ['Operation.Conflict', 'transient', true],
    ['Transport.Timeout', 'transient', true],
    ['Transport.NonJsonBody', 'transient', true],
    ['SomethingNew', 'unknown', false],
  ])('%s is %s (retryable: %s)', (code, kind, retryable) => {
    expect(classify(code)).toBe(kind);
    const e = new CloudError('CreateNetworkInterface', code, 'msg', 'REQ-1');
    expect(e.retryable).toBe(retryable);
    expect(e.message).toBe(`CreateNetworkInterface: ${code}: msg (RequestId REQ-1)`);
  });

  it('scrubs URLs, signatures and strings to sign from foreign text', () => {
    const text =
      'bad, URL: http://ecs/?AccessKeyId=demo&Signature=abc%3D and server string to sign is:GET&%2F&AccessKeyId%3Ddemo';
    const s = scrub(text);
    expect(s).not.toMatch(/Signature=abc|http:|AccessKeyId%3Ddemo/);
  });
});

describe('limits', () => {
  it('defaults to Terway figures, with overrides and one scale for all', () => {
    const l = resolveLimits(
      { AttachNetworkInterface: { perMinute: 100, burst: 5 }, NewAction: { perMinute: 10 } },
      0.5,
    );
    expect(l.CreateNetworkInterface).toEqual({ perMinute: 250, burst: 250 });
    expect(l.DescribeNetworkInterfaces).toEqual({ perMinute: 400, burst: 400 });
    expect(l.AttachNetworkInterface).toEqual({ perMinute: 50, burst: 2 });
    expect(l.NewAction).toEqual({ perMinute: 5, burst: 5 });
  });
});
