import { afterEach, describe, expect, it } from '@jest/globals';
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { clientFor, metricValue } from '../helpers/cloud.js';
import { emulator } from '../helpers/ecs.js';

// The account's quota for the action used here: 6,000 calls a minute (100/s), burst 40.
const QUOTA = { perMinute: 6000, burst: 40 };
const CALLS = 400;

let emu: EcsEmulator | undefined;
let client: ReturnType<typeof clientFor> | undefined;
afterEach(async () => {
  await client?.close();
  await emu?.close();
});

async function burst(limit: { perMinute: number; burst: number }) {
  emu = await emulator((f) => {
    f.quotas!.api = { DescribeNetworkInterfaceAttribute: QUOTA };
  });
  const eni = emu.state().enis[0]!.id;
  client = clientFor(emu, { limits: { DescribeNetworkInterfaceAttribute: limit } });
  const results = await Promise.allSettled(
    Array.from({ length: CALLS }, () => client!.api.describeNetworkInterfaceAttribute(eni)),
  );
  const failed = results.filter((r) => r.status === 'rejected');
  const metrics = {
    ok: await metricValue(client.registry, 'eni_ipam_openapi_requests_total', {
      action: 'DescribeNetworkInterfaceAttribute',
      code: 'OK',
    }),
    throttled: await metricValue(client.registry, 'eni_ipam_openapi_throttled_total', {
      action: 'DescribeNetworkInterfaceAttribute',
    }),
    waited: await metricValue(client.registry, 'eni_ipam_openapi_limiter_wait_seconds_sum', {
      action: 'DescribeNetworkInterfaceAttribute',
    }),
  };
  return { failed, metrics, server: emu.stats().calls.DescribeNetworkInterfaceAttribute ?? {} };
}

describe('a burst of calls against an account quota', () => {
  it('lets no throttling reach the caller when the client limit is at the quota: calls wait in the limiter', async () => {
    const r = await burst(QUOTA);
    expect(r.failed).toEqual([]);
    expect(r.metrics.ok).toBe(CALLS);
    // At exactly the quota, network jitter against the server's bucket may cost a rare throttle, which a retry absorbs.
    expect(r.metrics.throttled).toBeLessThanOrEqual(CALLS * 0.02);
    expect(r.metrics.waited).toBeGreaterThan(0);
  });

  it('meets no throttling when the client limit is under the quota', async () => {
    const r = await burst({ perMinute: QUOTA.perMinute * 0.8, burst: 20 });
    expect(r.failed).toEqual([]);
    expect(r.server['Throttling.User'] ?? 0).toBe(0);
    expect(r.metrics).toMatchObject({ ok: CALLS, throttled: 0 });
  });

  it('recovers from throttling without a failure when the client limit is above the quota', async () => {
    const r = await burst({ perMinute: QUOTA.perMinute * 3, burst: 150 });
    expect(r.failed).toEqual([]);
    expect(r.metrics.ok).toBe(CALLS);
    expect(r.metrics.throttled).toBeGreaterThan(0);
    expect(r.server['Throttling.User']).toBe(r.metrics.throttled);
    expect(r.server.OK).toBe(CALLS);
  });
});
