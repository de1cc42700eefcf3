import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { CloudError } from '../../src/cloud/index.js';
import { CloudHealth } from '../../src/operator/cloud-health.js';

const auth = new CloudError('DescribeNetworkInterfaces', 'SignatureDoesNotMatch', 'no match', 'r-1');
const down = new CloudError(
  'DescribeNetworkInterfaces',
  'Transport.Connection',
  'connection failed: ECONNREFUSED',
  undefined,
);

describe('cloud health', () => {
  it('is not verified before a read succeeds; a probe verifies, only a full resync makes the cache plannable', () => {
    const h = new CloudHealth(new Registry(), 'files in /creds', () => 0);
    expect([h.verified, h.resynced]).toEqual([false, false]);
    expect(h.succeeded({ resync: false })).toBe(true);
    expect([h.verified, h.resynced]).toEqual([true, false]);
    expect(h.succeeded({ resync: true })).toBe(true);
    expect(h.succeeded({ resync: true })).toBe(false); // no news
    expect([h.verified, h.resynced]).toEqual([true, true]);
  });

  it('an outage keeps its start, counts failures, names the cause; retries back off from 2 s to a minute, jittered', () => {
    let now = 1000;
    const h = new CloudHealth(
      new Registry(),
      'files in /creds',
      () => now,
      () => 1,
    );
    h.failed(auth);
    now = 5000;
    const o = h.failed(auth);
    expect(o).toMatchObject({ reason: 'CloudAuthFailed', code: 'SignatureDoesNotMatch', since: 1000, failures: 2 });
    expect(h.outage()!.message).toContain('files in /creds');
    const delays = [];
    for (let i = 0; i < 8; i++) {
      delays.push(h.retryDelayMs());
      h.failed(down);
    }
    expect(delays).toEqual([4000, 8000, 16000, 32000, 60000, 60000, 60000, 60000]);
    const low = new CloudHealth(
      new Registry(),
      'x',
      () => 0,
      () => 0,
    );
    low.failed(down);
    expect(low.retryDelayMs()).toBe(1000); // half of 2 s at the lowest jitter
    expect(h.succeeded({ resync: true })).toBe(true);
    expect(h.outage()).toBeUndefined();
  });

  it('exports eni_ipam_cloud_up and the failing code, and clears the code once reads work', async () => {
    const registry = new Registry();
    const h = new CloudHealth(registry, 'x', () => 0);
    expect(await registry.metrics()).toContain('eni_ipam_cloud_up 0');
    h.failed(auth);
    expect(await registry.metrics()).toContain(
      'eni_ipam_cloud_error_info{code="SignatureDoesNotMatch",reason="CloudAuthFailed"} 1',
    );
    h.failed(down);
    const text = await registry.metrics();
    expect(text).toContain('eni_ipam_cloud_error_info{code="Transport.Connection",reason="CloudUnreachable"} 1');
    expect(text).not.toContain('SignatureDoesNotMatch');
    h.succeeded({ resync: true });
    expect(await registry.metrics()).toContain('eni_ipam_cloud_up 1');
    expect(await registry.metrics()).not.toContain('eni_ipam_cloud_error_info{');
  });
});
