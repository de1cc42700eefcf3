import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type RPCClient from '@alicloud/pop-core';
import type { EcsEmulator } from '../../../testbed/ecs/index.js';
import { REGION, emulator, eventually, failure, pop } from '../../helpers/ecs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let emu: EcsEmulator;
let ecs: RPCClient;
beforeAll(async () => {
  emu = await emulator((f) => {
    f.quotas!.enisPerRegion = 12;
  });
  ecs = pop(emu.url);
});
afterAll(() => emu.close());

const create = (extra: Record<string, unknown> = {}): Promise<any> =>
  ecs.request(
    'CreateNetworkInterface',
    { RegionId: REGION, VSwitchId: 'vsw-h-pods', SecurityGroupIds: ['sg-demo-pods'], ...extra },
    { method: 'POST' },
  );
const attach = (eni: string, instance: string) =>
  ecs.request('AttachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: eni, InstanceId: instance });
const statusOf = async (id: string): Promise<string | undefined> => {
  const r: any = await ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, NetworkInterfaceId: [id] });
  return r.NetworkInterfaceSets.NetworkInterfaceSet[0]?.Status;
};

describe('limits of a real region', () => {
  it('runs a vSwitch out of addresses with InvalidVSwitchId.IpNotEnough and keeps AvailableIpAddressCount true', async () => {
    const vpc = pop(emu.url, 'vpc');
    const free = async () =>
      ((await vpc.request('DescribeVSwitches', { RegionId: REGION, VSwitchId: 'vsw-i-small' })) as any).VSwitches
        .VSwitch[0].AvailableIpAddressCount;
    expect(await free()).toBe(6); // a /27 has 28 usable addresses; 22 are held by others
    await create({ VSwitchId: 'vsw-i-small', SecondaryPrivateIpAddressCount: 3 });
    expect(await free()).toBe(2);
    const f = await failure(create({ VSwitchId: 'vsw-i-small', SecondaryPrivateIpAddressCount: 2 }));
    expect(f).toMatchObject({ code: 'InvalidVSwitchId.IpNotEnough', status: 403 });
    expect(await free()).toBe(2); // a refused call takes nothing
    await create({ VSwitchId: 'vsw-i-small', SecondaryPrivateIpAddressCount: 1 });
    expect(await free()).toBe(0);
  });

  it('enforces EniQuantity with EniPerInstanceLimitExceeded (the primary ENI counts)', async () => {
    // i-demo-01 is an ecs.g7.large: 3 ENIs including the primary.
    const a = await create();
    const b = await create();
    const c = await create();
    await attach(a.NetworkInterfaceId, 'i-demo-01');
    await attach(b.NetworkInterfaceId, 'i-demo-01');
    expect(await failure(attach(c.NetworkInterfaceId, 'i-demo-01'))).toMatchObject({
      code: 'EniPerInstanceLimitExceeded',
      status: 403,
    });
    await eventually(async () => (await statusOf(b.NetworkInterfaceId)) === 'InUse');
    const inst: any = await ecs.request('DescribeInstances', {
      RegionId: REGION,
      InstanceIds: JSON.stringify(['i-demo-01']),
    });
    expect(inst.Instances.Instance[0].NetworkInterfaces.NetworkInterface.map((n: any) => n.Type)).toEqual([
      'Primary',
      'Secondary',
      'Secondary',
    ]);
  });

  it('enforces EniPrivateIpAddressQuantity on attach and on assign', async () => {
    // ecs.g7.large allows 6 IPv4 addresses per ENI; i-demo-13 is one (zone h).
    const big = await create({ SecondaryPrivateIpAddressCount: 6 });
    expect(await failure(attach(big.NetworkInterfaceId, 'i-demo-13'))).toMatchObject({
      code: 'InvalidOperation.Ipv4CountExceeded',
      status: 403,
    });
    const ok = await create({ SecondaryPrivateIpAddressCount: 3 });
    await attach(ok.NetworkInterfaceId, 'i-demo-13');
    await eventually(async () => (await statusOf(ok.NetworkInterfaceId)) === 'InUse');
    const assign = (n: number) =>
      ecs.request('AssignPrivateIpAddresses', {
        RegionId: REGION,
        NetworkInterfaceId: ok.NetworkInterfaceId,
        SecondaryPrivateIpAddressCount: n,
      });
    expect((await failure(assign(3))).code).toBe('InvalidOperation.Ipv4CountExceeded');
    await assign(2);
    expect((await failure(assign(1))).code).toBe('InvalidOperation.Ipv4CountExceeded');
  });

  it('replays a ClientToken without creating twice, and refuses it for other parameters', async () => {
    const before = emu.state().enis.length;
    const a = await create({ ClientToken: 'token-1', SecondaryPrivateIpAddressCount: 2 });
    const b = await create({ ClientToken: 'token-1', SecondaryPrivateIpAddressCount: 2 });
    expect(b.NetworkInterfaceId).toBe(a.NetworkInterfaceId);
    expect(b.PrivateIpSets).toEqual(a.PrivateIpSets);
    expect(b.RequestId).not.toBe(a.RequestId);
    expect(emu.state().enis.length).toBe(before + 1);
    expect(await failure(create({ ClientToken: 'token-1', SecondaryPrivateIpAddressCount: 3 }))).toMatchObject({
      code: 'IdempotentParameterMismatch',
      status: 400,
    });

    const x: any = await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: a.NetworkInterfaceId,
      SecondaryPrivateIpAddressCount: 2,
      ClientToken: 'assign-1',
    });
    const y: any = await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: a.NetworkInterfaceId,
      SecondaryPrivateIpAddressCount: 2,
      ClientToken: 'assign-1',
    });
    expect(y.AssignedPrivateIpAddressesSet).toEqual(x.AssignedPrivateIpAddressesSet);
    expect(emu.state().enis.find((e) => e.id === a.NetworkInterfaceId)!.secondaryIps).toHaveLength(4);
  });

  it('enforces the regional ENI quota', async () => {
    const secondaries = () => emu.state().enis.filter((e) => e.type === 'Secondary').length;
    while (secondaries() < 12) await create();
    expect(await failure(create())).toMatchObject({ code: 'MaxEniCountExceeded', status: 403 });
  });
});
