import { afterEach, describe, expect, it } from '@jest/globals';
import { CloudError } from '../../src/cloud/index.js';
import type { EcsEmulator } from '../../src/sim/ecs/index.js';
import { capturingLogger, clientFor, metricValue } from '../helpers/cloud.js';
import { emulator } from '../helpers/ecs.js';

let emu: EcsEmulator | undefined;
let client: ReturnType<typeof clientFor> | undefined;
afterEach(async () => {
  await client?.close();
  await emu?.close();
});

const create = (c: NonNullable<typeof client>) =>
  c.api.createNetworkInterface({ vSwitchId: 'vsw-h-pods', securityGroupIds: ['sg-demo-pods'] });
const secondaryEnis = () => emu!.state().enis.filter((e) => e.type === 'Secondary').length;

describe('what the client sends, and when', () => {
  it('counts the retry budget from when a call is sent, not from when it was queued', async () => {
    emu = await emulator((f) => {
      f.faults = { actionLatencyMs: { CreateNetworkInterface: 400 } };
    });
    // One create a second: the fourth waits three seconds in the limiter, far longer than the
    // whole retry budget; each still gets a full attempt and succeeds, once.
    client = clientFor(emu, {
      limits: { CreateNetworkInterface: { perMinute: 60, burst: 1 } },
      retry: { maxAttempts: 2, maxElapsedMs: 500, attemptTimeoutMs: 1000 },
    });
    const results = await Promise.allSettled(Array.from({ length: 4 }, () => create(client!)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(secondaryEnis()).toBe(4);
    expect(emu.stats().calls.CreateNetworkInterface).toEqual({ OK: 4 });
    expect(
      await metricValue(client.registry, 'eni_ipam_openapi_limiter_wait_seconds_sum', {
        action: 'CreateNetworkInterface',
      }),
    ).toBeGreaterThan(5);
  });

  it('does not send a call that waited longer than the queue bound, and says so', async () => {
    emu = await emulator();
    const { logger, lines } = capturingLogger();
    client = clientFor(emu, {
      logger,
      limits: { CreateNetworkInterface: { perMinute: 60, burst: 1 } },
      retry: { maxQueueMs: 1500 },
    });
    const results = await Promise.allSettled(Array.from({ length: 3 }, () => create(client!)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const err = (results[2] as PromiseRejectedResult).reason as CloudError;
    expect(err).toBeInstanceOf(CloudError);
    expect(err.code).toBe('Client.QueueTimeout');
    expect(err.message).toMatch(
      /^CreateNetworkInterface: Client.QueueTimeout: not sent: it waited \d\.\d s in the CreateNetworkInterface rate limiter, more than 1\.5 s$/,
    );
    expect(err.retryable).toBe(false);
    expect(emu.stats().calls.CreateNetworkInterface).toEqual({ OK: 2 });
    expect(lines.some((l) => l.includes('"waitedMs"'))).toBe(false); // below the 30 s mark, no warning yet
  });

  it('sends no mutating call once the caller may not change the cloud, and still reads', async () => {
    emu = await emulator();
    let leading = true;
    client = clientFor(emu, { mayMutate: () => leading });
    await create(client);
    leading = false;
    const err = (await create(client).catch((e: unknown) => e)) as CloudError;
    expect(err.code).toBe('Client.NotLeading');
    expect(err.message).toBe(
      'CreateNetworkInterface: Client.NotLeading: not sent: this operator no longer holds a fresh leader lease',
    );
    expect((await client.api.describeNetworkInterfaces({ type: 'Secondary' })).length).toBe(1);
    expect(emu.stats().calls.CreateNetworkInterface).toEqual({ OK: 1 });
  });

  it('checks leadership when a queued call is sent, not when it was queued', async () => {
    emu = await emulator();
    let leading = true;
    client = clientFor(emu, {
      mayMutate: () => leading,
      limits: { CreateNetworkInterface: { perMinute: 60, burst: 1 } },
    });
    const calls = Array.from({ length: 3 }, () =>
      create(client!).then(
        () => 'sent',
        (e: CloudError) => e.code,
      ),
    );
    setTimeout(() => (leading = false), 500);
    expect(await Promise.all(calls)).toEqual(['sent', 'Client.NotLeading', 'Client.NotLeading']);
    expect(secondaryEnis()).toBe(1);
  });
});
