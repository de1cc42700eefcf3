import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EcsEmulator } from '../../../testbed/ecs/index.js';
import { REGION, emulator, eventually, failure, pop, sleep } from '../../helpers/ecs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let emu: EcsEmulator;
const OTHER = { accessKeyId: 'other', accessKeySecret: 'other-secret' };
beforeAll(async () => {
  emu = await emulator((f) => {
    f.credentials.push(OTHER);
  });
});
afterAll(() => emu.close());

describe('the ECS emulator call journal', () => {
  it('records each call with its caller, answer, and the ENI, instance and addresses a mutating call touched', async () => {
    const t0 = Date.now();
    const ecs = pop(emu.url);
    const eni: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
      SecondaryPrivateIpAddressCount: 2,
      ClientToken: 'tok-1',
    });
    const id = eni.NetworkInterfaceId as string;
    await ecs.request('AttachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-04' });
    await eventually(() => emu.state().enis.find((e) => e.id === id)!.status === 'InUse');
    const assigned: any = await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: id,
      SecondaryPrivateIpAddressCount: 2,
    });
    const added = assigned.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress as string[];
    await ecs.request('UnassignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: id,
      PrivateIpAddress: [added[0]],
    });
    await failure(
      pop(emu.url, 'ecs', OTHER).request('UnassignPrivateIpAddresses', {
        RegionId: REGION,
        NetworkInterfaceId: 'eni-nope',
        PrivateIpAddress: ['10.9.9.9'],
      }),
    );
    await ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, NetworkInterfaceId: [id] });

    const calls = emu.calls({ since: t0 });
    expect(calls.map((c) => `${c.accessKeyId} ${c.action} ${c.code}`)).toEqual([
      'demo CreateNetworkInterface OK',
      'demo AttachNetworkInterface OK',
      'demo AssignPrivateIpAddresses OK',
      'demo UnassignPrivateIpAddresses OK',
      'other UnassignPrivateIpAddresses InvalidEniId.NotFound',
      'demo DescribeNetworkInterfaces OK',
    ]);
    const [create, attach, assign, unassign, failed, describe_] = calls;
    expect(create).toMatchObject({ eniId: id, clientToken: 'tok-1' });
    expect(create!.ips).toHaveLength(3); // primary and two secondaries
    expect(create!.ips).toContain(eni.PrivateIpAddress);
    expect(attach).toMatchObject({ eniId: id, instanceId: 'i-demo-04', ips: [] });
    expect(assign).toMatchObject({ eniId: id, instanceId: 'i-demo-04', ips: added });
    expect(unassign).toMatchObject({ eniId: id, instanceId: 'i-demo-04', ips: [added[0]] });
    expect(failed).toMatchObject({ eniId: 'eni-nope', ips: ['10.9.9.9'] });
    expect(describe_!.ips).toBeUndefined();
    expect(calls.every((c, i) => i === 0 || (c.seq > calls[i - 1]!.seq && c.at >= calls[i - 1]!.at))).toBe(true);
    expect(emu.calls({ since: t0, accessKeyId: 'other' })).toHaveLength(1);
    expect(emu.calls({ since: Date.now() + 1000 })).toEqual([]);
  });

  it('names every address of a deleted ENI, and a replayed create by its token without addresses', async () => {
    const ecs = pop(emu.url);
    const params = {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
      SecondaryPrivateIpAddressCount: 1,
      ClientToken: 'tok-2',
    };
    const eni: any = await ecs.request('CreateNetworkInterface', params);
    await ecs.request('CreateNetworkInterface', params);
    await ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: eni.NetworkInterfaceId });
    const [replay, del] = emu.calls().slice(-2);
    expect(replay).toMatchObject({
      action: 'CreateNetworkInterface',
      code: 'OK',
      clientToken: 'tok-2',
      eniId: eni.NetworkInterfaceId,
    });
    expect(replay!.ips).toBeUndefined();
    expect(del).toMatchObject({ action: 'DeleteNetworkInterface', eniId: eni.NetworkInterfaceId });
    expect(del!.ips).toHaveLength(2);
  });

  it('records the ClientToken of a create that failed before it was carried out', async () => {
    emu.setFaults({
      rules: [{ action: 'CreateNetworkInterface', kind: 'error', code: 'ServiceUnavailable', rate: 1, times: 1 }],
    });
    await failure(
      pop(emu.url).request('CreateNetworkInterface', {
        RegionId: REGION,
        VSwitchId: 'vsw-h-pods',
        SecurityGroupIds: ['sg-demo-pods'],
        ClientToken: 'tok-3',
      }),
    );
    emu.clearFaults();
    expect(emu.calls().at(-1)).toMatchObject({
      action: 'CreateNetworkInterface',
      code: 'ServiceUnavailable',
      clientToken: 'tok-3',
    });
  });

  it('records calls whose answer was lost after they were carried out, and serves the journal over HTTP', async () => {
    emu.setFaults({ rules: [{ action: 'AssignPrivateIpAddresses', kind: 'drop-answer', rate: 1, times: 1 }] });
    const ecs = pop(emu.url);
    const eni: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      SecurityGroupIds: ['sg-demo-pods'],
    });
    const t2 = Date.now();
    await failure(
      ecs.request('AssignPrivateIpAddresses', {
        RegionId: REGION,
        NetworkInterfaceId: eni.NetworkInterfaceId,
        SecondaryPrivateIpAddressCount: 1,
      }),
    );
    emu.clearFaults();
    await sleep(10);
    const r = await fetch(`${emu.url}/_emulator/calls?since=${t2}&action=AssignPrivateIpAddresses`);
    const body = (await r.json()) as any;
    expect(body.calls).toHaveLength(1);
    expect(body.calls[0]).toMatchObject({ code: 'DropAnswer', eniId: eni.NetworkInterfaceId, accessKeyId: 'demo' });
    expect(body.calls[0].ips).toHaveLength(1);
    const bad = await fetch(`${emu.url}/_emulator/calls?since=yesterday`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toBe(
      'since must be a time in milliseconds since the epoch, not "yesterday"',
    );
  });
});
