import { afterEach, describe, expect, it } from '@jest/globals';
import { startEcsEmulator, type EcsEmulator } from '../../../testbed/ecs/index.js';
import { REGION, emulator, failure, fastWorld, pop, sleep } from '../../helpers/ecs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let emu: EcsEmulator | undefined;
afterEach(async () => {
  await emu?.close();
  emu = undefined;
});

describe('per-action quotas', () => {
  it('answers Throttling.User with a TimeLeft hint once the burst is spent, per action', async () => {
    emu = await emulator((f) => {
      f.quotas!.api = { DescribeVpcs: { perMinute: 60, burst: 3 } };
    });
    const vpc = pop(emu.url, 'vpc');
    for (let i = 0; i < 3; i++) await vpc.request('DescribeVpcs', { RegionId: REGION });
    const f = await failure(vpc.request('DescribeVpcs', { RegionId: REGION }));
    expect(f).toMatchObject({ code: 'Throttling.User', status: 400 });
    expect(f.data.Message).toBe('Request was denied due to user flow control.');
    const timeLeft = Number(/TimeLeft:(\d+)/.exec(f.headers['x-ratelimit-user-api'] ?? '')?.[1]);
    expect(timeLeft).toBeGreaterThan(0);
    expect(timeLeft).toBeLessThanOrEqual(1000); // one token of a 60-per-minute bucket
    // Another action has its own bucket.
    await expect(vpc.request('DescribeVSwitches', { RegionId: REGION })).resolves.toBeDefined();
    expect(emu.stats().calls.DescribeVpcs).toEqual({ OK: 3, 'Throttling.User': 1 });
  });

  it('runs quotas and delays faster under a time scale, keeping their ratio', async () => {
    emu = await startEcsEmulator({
      fixture: fastWorld((f) => {
        f.quotas!.api = { DescribeVpcs: { perMinute: 60, burst: 1 } };
        f.delays = { attachMs: 2000, detachMs: 2000, deleteMs: 2000 };
      }),
      timeScale: 20,
    });
    const vpc = pop(emu.url, 'vpc');
    await vpc.request('DescribeVpcs', { RegionId: REGION });
    const f = await failure(vpc.request('DescribeVpcs', { RegionId: REGION }));
    expect(Number(/TimeLeft:(\d+)/.exec(f.headers['x-ratelimit-user-api']!)![1])).toBeLessThanOrEqual(50); // 1 s / 20
    await sleep(60);
    await vpc.request('DescribeVpcs', { RegionId: REGION });
    const ecs = pop(emu.url);
    const eni: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
    });
    await ecs.request('AttachNetworkInterface', {
      RegionId: REGION,
      NetworkInterfaceId: eni.NetworkInterfaceId,
      InstanceId: 'i-demo-04',
    });
    await sleep(150); // 2 s of emulated time is 100 ms
    expect(emu.state().enis.find((e) => e.id === eni.NetworkInterfaceId)!.status).toBe('InUse');
  });
});

describe('fault injection', () => {
  it('injects error codes per action through the control handle', async () => {
    emu = await emulator();
    emu.setFaults({
      rules: [{ action: 'DescribeInstances', kind: 'error', code: 'ServiceUnavailable', rate: 1 }],
      seed: 7,
    });
    expect(await failure(pop(emu.url).request('DescribeInstances', { RegionId: REGION }))).toMatchObject({
      code: 'ServiceUnavailable',
      status: 503,
    });
    await expect(pop(emu.url).request('DescribeSecurityGroups', { RegionId: REGION })).resolves.toBeDefined();
    emu.clearFaults();
    await expect(pop(emu.url).request('DescribeInstances', { RegionId: REGION })).resolves.toBeDefined();
  });

  it('serves non-JSON 502 pages and timeouts, settable over the admin path', async () => {
    emu = await emulator();
    const put = await fetch(`${emu.url}/_emulator/faults`, {
      method: 'PUT',
      body: JSON.stringify({ rules: [{ action: 'DescribeVpcs', kind: 'non-json', rate: 1 }] }),
    });
    expect(put.status).toBe(200);
    const e1: any = await pop(emu.url, 'vpc')
      .request('DescribeVpcs', { RegionId: REGION })
      .catch((e) => e);
    expect(e1.name).toBe('SyntaxError');

    await fetch(`${emu.url}/_emulator/faults`, {
      method: 'PUT',
      body: JSON.stringify({ rules: [{ action: 'DescribeVpcs', kind: 'timeout', rate: 1 }] }),
    });
    const e2: any = await pop(emu.url, 'vpc')
      .request('DescribeVpcs', { RegionId: REGION }, { timeout: 300 })
      .catch((e) => e);
    expect(e2.name).toBe('RequestTimeoutError');

    const stats = (await (await fetch(`${emu.url}/_emulator/stats`)).json()) as any;
    expect(stats.calls.DescribeVpcs).toEqual({ NonJson: 1, Timeout: 1 });
    const bad = await fetch(`${emu.url}/_emulator/faults`, {
      method: 'PUT',
      body: JSON.stringify({ rules: [{ kind: 'error', rate: 2 }] }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toMatch(/faults\.rules\[0\]\.rate/);
    expect((await fetch(`${emu.url}/_emulator/faults`, { method: 'DELETE' })).status).toBe(200);
    await expect(pop(emu.url, 'vpc').request('DescribeVpcs', { RegionId: REGION })).resolves.toBeDefined();
  });

  it('adds latency and leaves detaches stuck until they are issued again', async () => {
    emu = await emulator();
    emu.setFaults({ latencyMs: 150, stuckDetachRate: 1 });
    const ecs = pop(emu.url);
    const t0 = Date.now();
    const eni: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    emu.setFaults({ stuckDetachRate: 1 });
    const id = eni.NetworkInterfaceId;
    await ecs.request('AttachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-04' });
    await sleep(120);
    await ecs.request('DetachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-04' });
    await sleep(200);
    expect(emu.state().enis.find((e) => e.id === id)!.status).toBe('Detaching');
    emu.clearFaults();
    await ecs.request('DetachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-04' });
    await sleep(150);
    expect(emu.state().enis.find((e) => e.id === id)!.status).toBe('Available');
  });

  it('lets an attach fail back to Available', async () => {
    emu = await emulator();
    emu.setFaults({ attachFailRate: 1 });
    const ecs = pop(emu.url);
    const eni: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
    });
    await ecs.request('AttachNetworkInterface', {
      RegionId: REGION,
      NetworkInterfaceId: eni.NetworkInterfaceId,
      InstanceId: 'i-demo-04',
    });
    await sleep(150);
    const e = emu.state().enis.find((x) => x.id === eni.NetworkInterfaceId)!;
    expect(e.status).toBe('Available');
    expect(e.instanceId).toBeUndefined();
  });
});
