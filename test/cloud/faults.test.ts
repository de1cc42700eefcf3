import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CloudError } from '../../src/cloud/index.js';
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { clientFor, metricValue } from '../helpers/cloud.js';
import { emulator } from '../helpers/ecs.js';

const RETRY = { maxAttempts: 5, baseDelayMs: 20, maxDelayMs: 200, maxElapsedMs: 3000, attemptTimeoutMs: 400 };
// The longest a call may take: its retry budget plus one attempt that started just before it ran out.
const DEADLINE_MS = RETRY.maxElapsedMs + RETRY.attemptTimeoutMs + 500;

let emu: EcsEmulator;
let client: ReturnType<typeof clientFor>;
beforeAll(async () => {
  emu = await emulator();
  client = clientFor(emu, { retry: RETRY });
});
afterAll(async () => {
  await client.close();
  await emu.close();
});

/** Runs calls and returns, per call, its outcome and how long it took. */
async function run(n: number, call: () => Promise<unknown>) {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const t0 = Date.now();
      try {
        await call();
        return { ok: true as const, ms: Date.now() - t0 };
      } catch (e) {
        return { ok: false as const, error: e, ms: Date.now() - t0 };
      }
    }),
  );
}

describe('calls under injected faults', () => {
  it('with 20% InternalError and added latency, succeed within their retry budget or fail classified', async () => {
    emu.setFaults({ rules: [{ kind: 'error', code: 'InternalError', rate: 0.2 }], latencyMs: 30, seed: 42 });
    const results = await run(120, () => client.api.describeInstances({ ids: ['i-demo-01'] }));
    emu.clearFaults();
    const failed = results.filter((r) => !r.ok);
    expect(results.filter((r) => r.ok).length).toBeGreaterThan(110);
    for (const f of failed) {
      expect(f.error).toBeInstanceOf(CloudError);
      expect(f.error).toMatchObject({ code: 'InternalError', kind: 'transient', attempts: RETRY.maxAttempts });
    }
    expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(DEADLINE_MS);
    expect(
      await metricValue(client.registry, 'eni_ipam_openapi_retries_total', {
        action: 'DescribeInstances',
        code: 'InternalError',
      }),
    ).toBeGreaterThan(10);
  });

  it('turn timeouts and non-JSON gateway pages into retries, and never hang past the deadline', async () => {
    emu.setFaults({
      rules: [
        { action: 'DescribeSecurityGroups', kind: 'timeout', rate: 0.3 },
        { action: 'DescribeSecurityGroups', kind: 'non-json', rate: 0.2 },
      ],
      seed: 9,
    });
    const results = await run(40, () => client.api.describeSecurityGroups({ vpcId: 'vpc-demo' }));
    emu.clearFaults();
    expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(DEADLINE_MS);
    expect(results.filter((r) => r.ok).length).toBeGreaterThan(30);
    for (const f of results.filter((r) => !r.ok)) {
      expect(f.error).toBeInstanceOf(CloudError);
      expect((f.error as CloudError).kind).toBe('transient');
      expect(['Transport.Timeout', 'Transport.NonJsonBody']).toContain((f.error as CloudError).code);
    }
    expect(
      await metricValue(client.registry, 'eni_ipam_openapi_retries_total', {
        action: 'DescribeSecurityGroups',
        code: 'Transport.Timeout',
      }),
    ).toBeGreaterThan(0);
    expect(
      await metricValue(client.registry, 'eni_ipam_openapi_retries_total', {
        action: 'DescribeSecurityGroups',
        code: 'Transport.NonJsonBody',
      }),
    ).toBeGreaterThan(0);
  });

  it('gives up at once on errors a retry cannot fix', async () => {
    emu.setFaults({ rules: [{ action: 'DescribeVpcs', kind: 'error', code: 'Forbidden.RAM', rate: 1 }] });
    const err = await client.api.describeVpcs().catch((e) => e);
    emu.clearFaults();
    expect(err).toMatchObject({ kind: 'permission', code: 'Forbidden.RAM', attempts: 1, action: 'DescribeVpcs' });
    expect(emu.stats().calls.DescribeVpcs).toEqual({ 'Forbidden.RAM': 1 });
  });

  it('reports a refused connection as a classified transport error', async () => {
    const dead = clientFor({ url: 'http://127.0.0.1:9' } as EcsEmulator, { retry: { ...RETRY, maxAttempts: 2 } });
    const err = await dead.api.describeVpcs().catch((e) => e);
    await dead.close();
    expect(err).toMatchObject({ code: 'Transport.Connection', kind: 'transient', attempts: 2 });
  });
});
