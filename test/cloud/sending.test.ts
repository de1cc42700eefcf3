import { afterEach, describe, expect, it } from '@jest/globals';
import { CloudError, ramRoleCredentials } from '../../src/cloud/index.js';
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { startMetadataRelay, type MetadataRelay } from '../../testbed/ecs/metadata-relay.js';
import { capturingLogger, clientFor, metricValue } from '../helpers/cloud.js';
import { emulator, sleep } from '../helpers/ecs.js';

let emu: EcsEmulator | undefined;
let client: ReturnType<typeof clientFor> | undefined;
let relay: MetadataRelay | undefined;
afterEach(async () => {
  await client?.close();
  await relay?.close();
  await emu?.close();
  client = relay = emu = undefined;
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

  it('checks leadership again as the request leaves: a call that lost it after its first check is not sent', async () => {
    emu = await emulator();
    // Leading at the first check, not at the second (as if the call had been delayed between them).
    let asked = 0;
    client = clientFor(emu, { mayMutate: () => ++asked === 1 });
    const err = (await create(client).catch((e: unknown) => e)) as CloudError;
    expect(err.code).toBe('Client.NotLeading');
    expect(asked).toBe(2);
    expect(emu.calls({ action: 'CreateNetworkInterface' })).toEqual([]);
  });

  it('with a metadata service answering in 8 s, sends no mutating call after leadership was lost', async () => {
    emu = await emulator();
    relay = await startMetadataRelay(emu.metadataUrl);
    let now = Date.now();
    const role = ramRoleCredentials({ role: 'eni-ipam-demo-role', metadataEndpoint: relay.url, now: () => now });
    let leading = true;
    client = clientFor(emu, {
      credentials: role,
      mayMutate: () => leading,
      limits: { CreateNetworkInterface: { perMinute: 6000, burst: 100 } },
    });
    await create(client);
    // The metadata service slows down just as the hour's credentials enter their refresh margin.
    relay.latencyMs = 8000;
    now += 56 * 60_000;
    const t0 = Date.now();
    const outcomes: Array<Promise<string>> = [];
    let lostAt = 0;
    while (Date.now() - t0 < 12_000) {
      if (!lostAt && Date.now() - t0 >= 10_000) {
        leading = false;
        lostAt = Date.now();
      }
      outcomes.push(
        create(client).then(
          () => 'sent',
          (e: CloudError) => e.code,
        ),
      );
      await sleep(500);
    }
    // Whatever waited on the metadata service has had its chance to go out.
    await sleep(20_000 - (Date.now() - t0));
    const results = await Promise.all(outcomes);
    const creates = emu.calls({ action: 'CreateNetworkInterface', since: t0 });
    // Answered at once (no latency on the API): a call answered after the loss was sent after it.
    expect(creates.filter((r) => r.at > lostAt + 50).map((r) => r.at - lostAt)).toEqual([]);
    // The calls before the loss went out at once, with the cached credentials; none after it.
    expect(results.filter((r) => r === 'sent').length).toBe(creates.length);
    expect(creates.length).toBeGreaterThanOrEqual(18);
    expect(results.slice(-4)).toEqual(Array(4).fill('Client.NotLeading'));
    // The refresh went on in the background: one, not one per call.
    expect(relay.requests.filter((r) => r.path.includes('security-credentials')).length).toBe(2);
  }, 40_000);

  it('checks leadership after waiting for credentials: a call that waited on an 8 s metadata service is not sent late', async () => {
    emu = await emulator();
    relay = await startMetadataRelay(emu.metadataUrl);
    let now = Date.now();
    const role = ramRoleCredentials({ role: 'eni-ipam-demo-role', metadataEndpoint: relay.url, now: () => now });
    let leading = true;
    client = clientFor(emu, { credentials: role, mayMutate: () => leading });
    await create(client);
    relay.latencyMs = 8000;
    now += 61 * 60_000; // expired: the next call has to wait for a fetch
    const call = create(client).then(
      () => 'sent',
      (e: CloudError) => e.code,
    );
    await sleep(2000);
    leading = false;
    const lostAt = Date.now();
    expect(await call).toBe('Client.NotLeading');
    expect(Date.now() - lostAt).toBeGreaterThan(5000); // it did wait for the metadata service
    expect(emu.calls({ action: 'CreateNetworkInterface', since: lostAt })).toEqual([]);
  }, 40_000);
});
