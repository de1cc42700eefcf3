import { describe, expect, it } from '@jest/globals';
import { ApiException } from '@kubernetes/client-node';
import { refusalOf } from '../../src/kube/refusal.js';

const status = (code: number, reason: string, message: string, details: Record<string, unknown> = {}) =>
  JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message, details });

describe('why the API server refused a call', () => {
  it('names the reason by a small fixed set, in the server’s own words', () => {
    const NOW = Date.parse('2026-01-01T00:00:00Z');
    const forbidden = new ApiException(403, 'Unknown API Status Code!', status(403, 'Forbidden', 'x is forbidden'), {});
    expect(refusalOf(forbidden, NOW)).toEqual({
      reason: 'forbidden',
      code: 403,
      message: '403 Forbidden: x is forbidden',
    });
    const codes: Array<[number, string]> = [
      [401, 'unauthorized'],
      [404, 'not-found'],
      [409, 'conflict'],
      [422, 'invalid'],
      [429, 'throttled'],
      [500, 'unavailable'],
      [503, 'unavailable'],
      [418, 'rejected'],
    ];
    for (const [code, reason] of codes) expect(refusalOf(new ApiException(code, 'x', '', {}), NOW).reason).toBe(reason);
    // No HTTP answer at all: a system error's code is a string.
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
    expect(refusalOf(refused, NOW)).toEqual({ reason: 'unreachable', message: 'connect ECONNREFUSED 127.0.0.1:6443' });
  });

  it('reads Retry-After (seconds or a date) or details.retryAfterSeconds, on 429 and 5xx only, at most 10 min', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    const throttled = (headers: Record<string, string>, details = {}) =>
      new ApiException(429, 'x', status(429, 'TooManyRequests', 'slow down', details), headers);
    expect(refusalOf(throttled({ 'Retry-After': '2' }), now).retryAfterMs).toBe(2000);
    expect(refusalOf(throttled({ 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }), now).retryAfterMs).toBe(5000);
    expect(refusalOf(throttled({}, { retryAfterSeconds: 3 }), now).retryAfterMs).toBe(3000);
    expect(refusalOf(throttled({ 'retry-after': '86400' }), now).retryAfterMs).toBe(600_000);
    expect(refusalOf(throttled({}), now).retryAfterMs).toBeUndefined();
    const unavailable = new ApiException(503, 'x', '', { 'retry-after': '1' });
    expect(refusalOf(unavailable, now).retryAfterMs).toBe(1000);
    const conflict = new ApiException(409, 'x', '', { 'retry-after': '1' });
    expect(refusalOf(conflict, now).retryAfterMs).toBeUndefined();
  });
});
