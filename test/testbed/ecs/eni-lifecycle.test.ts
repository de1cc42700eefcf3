import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type RPCClient from '@alicloud/pop-core';
import type { EcsEmulator } from '../../../testbed/ecs/index.js';
import { REGION, emulator, eventually, failure, pop } from '../../helpers/ecs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let emu: EcsEmulator;
let ecs: RPCClient;
beforeAll(async () => {
  emu = await emulator();
  ecs = pop(emu.url);
});
afterAll(() => emu.close());

const describeEni = async (id: string): Promise<any> => {
  const r: any = await ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, NetworkInterfaceId: [id] });
  return r.NetworkInterfaceSets.NetworkInterfaceSet[0];
};
const freeIn = async (vsw: string): Promise<number> => {
  const r: any = await pop(emu.url, 'vpc').request('DescribeVSwitches', { RegionId: REGION, VSwitchId: vsw });
  return r.VSwitches.VSwitch[0].AvailableIpAddressCount;
};
const create = (extra: Record<string, unknown> = {}): Promise<any> =>
  ecs.request(
    'CreateNetworkInterface',
    { RegionId: REGION, VSwitchId: 'vsw-h-pods', SecurityGroupIds: ['sg-demo-pods'], ...extra },
    { method: 'POST' },
  );

describe('ENI lifecycle', () => {
  it('creates, attaches, fills, drains, detaches and deletes an ENI, keeping vSwitch counts true', async () => {
    const free0 = await freeIn('vsw-h-pods');
    const created = await create({
      SecondaryPrivateIpAddressCount: 4,
      Tag: [{ Key: 'owner', Value: 'test' }],
      NetworkInterfaceName: 'lifecycle',
    });
    expect(created).toMatchObject({
      Status: 'Available',
      Type: 'Secondary',
      VpcId: 'vpc-demo',
      ZoneId: 'cn-hangzhou-h',
      VSwitchId: 'vsw-h-pods',
    });
    expect(created.NetworkInterfaceId).toMatch(/^eni-[0-9a-z]{20}$/);
    expect(created.MacAddress).toMatch(/^00:16:3e(:[0-9a-f]{2}){3}$/);
    expect(created.PrivateIpSets.PrivateIpSet).toHaveLength(5);
    expect(created.PrivateIpSets.PrivateIpSet[0]).toMatchObject({
      Primary: true,
      PrivateIpAddress: created.PrivateIpAddress,
    });
    expect(created.Tags.Tag).toEqual([{ TagKey: 'owner', TagValue: 'test' }]);
    expect(await freeIn('vsw-h-pods')).toBe(free0 - 5);
    const id = created.NetworkInterfaceId;

    await ecs.request('AttachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-04' });
    const attaching = await describeEni(id);
    expect(attaching.Status).toBe('Attaching');
    const inUse = await eventually(async () => {
      const e = await describeEni(id);
      return e.Status === 'InUse' ? e : undefined;
    });
    expect(inUse.InstanceId).toBe('i-demo-04');
    expect(inUse.Attachment).toMatchObject({ InstanceId: 'i-demo-04', DeviceIndex: 1 });

    const assigned: any = await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: id,
      SecondaryPrivateIpAddressCount: 2,
    });
    const newIps: string[] = assigned.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress;
    expect(assigned.AssignedPrivateIpAddressesSet.NetworkInterfaceId).toBe(id);
    expect(newIps).toHaveLength(2);
    expect(newIps.every((ip) => typeof ip === 'string')).toBe(true);
    expect((await describeEni(id)).PrivateIpSets.PrivateIpSet).toHaveLength(7);
    expect(await freeIn('vsw-h-pods')).toBe(free0 - 7);

    await ecs.request('UnassignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: id,
      PrivateIpAddress: newIps,
    });
    expect((await describeEni(id)).PrivateIpSets.PrivateIpSet).toHaveLength(5);
    expect(
      (
        await failure(
          ecs.request('UnassignPrivateIpAddresses', {
            RegionId: REGION,
            NetworkInterfaceId: id,
            PrivateIpAddress: newIps,
          }),
        )
      ).code,
    ).toBe('InvalidIp.IpUnassigned');
    expect(
      (
        await failure(
          ecs.request('UnassignPrivateIpAddresses', {
            RegionId: REGION,
            NetworkInterfaceId: id,
            PrivateIpAddress: [created.PrivateIpAddress],
          }),
        )
      ).code,
    ).toBe('InvalidIp.IpUnassigned');

    // An ENI in use cannot be deleted; one being attached cannot be attached again.
    expect(
      await failure(ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id })),
    ).toMatchObject({ code: 'InvalidOperation.InvalidEniState', status: 400 });
    expect(
      (
        await failure(
          ecs.request('AttachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-07' }),
        )
      ).code,
    ).toBe('InvalidOperation.InvalidEniState');

    expect(
      (
        await failure(
          ecs.request('DetachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-07' }),
        )
      ).code,
    ).toBe('InvalidOperation.InvalidEniState');
    await ecs.request('DetachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-04' });
    expect((await describeEni(id)).Status).toBe('Detaching');
    const available = await eventually(async () => {
      const e = await describeEni(id);
      return e.Status === 'Available' ? e : undefined;
    });
    expect(available.InstanceId).toBe('');

    await ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id });
    expect((await describeEni(id)).Status).toBe('Deleting');
    await ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id }); // repeated while Deleting: accepted
    await eventually(async () => (await describeEni(id)) === undefined);
    expect(await freeIn('vsw-h-pods')).toBe(free0);
    expect(
      await failure(ecs.request('DescribeNetworkInterfaceAttribute', { RegionId: REGION, NetworkInterfaceId: id })),
    ).toMatchObject({ code: 'InvalidEniId.NotFound', status: 404 });
    expect(
      (await failure(ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id }))).code,
    ).toBe('InvalidEniId.NotFound');
  });

  it('protects the primary ENI of each instance', async () => {
    const r: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      InstanceId: 'i-demo-02',
      Type: 'Primary',
    });
    const primary = r.NetworkInterfaceSets.NetworkInterfaceSet[0];
    expect(primary).toMatchObject({ Type: 'Primary', Status: 'InUse', InstanceId: 'i-demo-02' });
    expect(
      await failure(
        ecs.request('DetachNetworkInterface', {
          RegionId: REGION,
          NetworkInterfaceId: primary.NetworkInterfaceId,
          InstanceId: 'i-demo-02',
        }),
      ),
    ).toMatchObject({
      code: 'InvalidOperation.DetachPrimaryEniNotAllowed',
      status: 400,
    });
    expect(
      (
        await failure(
          ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: primary.NetworkInterfaceId }),
        )
      ).code,
    ).toBe('InvalidOperation.InvalidEniType');
  });

  it('checks zone, VPC membership and references', async () => {
    const eni = await create();
    // vsw-h-pods is in zone h; i-demo-02 is in zone i.
    expect(
      await failure(
        ecs.request('AttachNetworkInterface', {
          RegionId: REGION,
          NetworkInterfaceId: eni.NetworkInterfaceId,
          InstanceId: 'i-demo-02',
        }),
      ),
    ).toMatchObject({
      code: 'InvalidOperation.AvailabilityZoneMismatch',
      status: 403,
    });
    expect(
      (
        await failure(
          ecs.request('AttachNetworkInterface', {
            RegionId: REGION,
            NetworkInterfaceId: eni.NetworkInterfaceId,
            InstanceId: 'i-nope',
          }),
        )
      ).code,
    ).toBe('InvalidInstanceId.NotFound');
    expect(await failure(create({ VSwitchId: 'vsw-nope' }))).toMatchObject({
      code: 'InvalidVSwitchId.NotFound',
      status: 404,
    });
    expect((await failure(create({ SecurityGroupIds: ['sg-nope'] }))).code).toBe('InvalidSecurityGroupId.NotFound');
    expect((await failure(create({ SecurityGroupIds: undefined }))).code).toBe('MissingParameter');
    expect((await failure(create({ SecurityGroupId: 'sg-demo-pods' }))).code).toBe('InvalidParameter.Conflict');
    expect((await failure(create({ SecondaryPrivateIpAddressCount: 50 }))).code).toBe('InvalidParameter');
    expect((await failure(create({ Tag: [{ Key: 'aliyun-x', Value: 'v' }] }))).code).toBe('InvalidTagKey.Malformed');
    expect(
      (
        await failure(
          create({
            Tag: [
              { Key: 'a', Value: '1' },
              { Key: 'a', Value: '2' },
            ],
          }),
        )
      ).code,
    ).toBe('Duplicate.TagKey');
  });

  it('assigns named addresses and refuses taken or foreign ones', async () => {
    const eni = await create();
    const r: any = await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: eni.NetworkInterfaceId,
      PrivateIpAddress: ['192.168.31.200'],
    });
    expect(r.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress).toEqual(['192.168.31.200']);
    expect(
      (
        await failure(
          ecs.request('AssignPrivateIpAddresses', {
            RegionId: REGION,
            NetworkInterfaceId: eni.NetworkInterfaceId,
            PrivateIpAddress: ['192.168.31.200'],
          }),
        )
      ).code,
    ).toBe('InvalidPrivateIpAddress.Duplicated');
    expect(
      (
        await failure(
          ecs.request('AssignPrivateIpAddresses', {
            RegionId: REGION,
            NetworkInterfaceId: eni.NetworkInterfaceId,
            PrivateIpAddress: ['10.0.0.5'],
          }),
        )
      ).code,
    ).toBe('InvalidVSwitchId.IpInvalid');
    expect(
      (
        await failure(
          ecs.request('AssignPrivateIpAddresses', { RegionId: REGION, NetworkInterfaceId: eni.NetworkInterfaceId }),
        )
      ).code,
    ).toBe('MissingParameter');
    // Not attached: at most 10 per call.
    expect(
      (
        await failure(
          ecs.request('AssignPrivateIpAddresses', {
            RegionId: REGION,
            NetworkInterfaceId: eni.NetworkInterfaceId,
            SecondaryPrivateIpAddressCount: 11,
          }),
        )
      ).code,
    ).toBe('InvalidParameter');
  });

  it('assigns and unassigns IPv6 addresses and /28 prefixes', async () => {
    const v6eni = await create({ VSwitchId: 'vsw-j-pods', Ipv6AddressCount: 2 });
    expect(v6eni.Ipv6Sets.Ipv6Set).toHaveLength(2);
    expect(v6eni.Ipv6Sets.Ipv6Set[0].Ipv6Address).toMatch(/^2408:4005:3c0:a100:/);
    const more: any = await ecs.request('AssignIpv6Addresses', {
      RegionId: REGION,
      NetworkInterfaceId: v6eni.NetworkInterfaceId,
      Ipv6AddressCount: 1,
    });
    expect(more.Ipv6Sets.Ipv6Address).toHaveLength(1);
    await ecs.request('UnassignIpv6Addresses', {
      RegionId: REGION,
      NetworkInterfaceId: v6eni.NetworkInterfaceId,
      Ipv6Address: more.Ipv6Sets.Ipv6Address,
    });
    expect((await describeEni(v6eni.NetworkInterfaceId)).Ipv6Sets.Ipv6Set).toHaveLength(2);
    expect((await failure(create({ Ipv6AddressCount: 1 }))).code).toBe('InvalidVSwitch.Ipv6NotTurnOn');
    // An address another ENI holds is not given again by name; a freed one is.
    const held = v6eni.Ipv6Sets.Ipv6Set[0].Ipv6Address;
    const named = (ip: string) =>
      ecs.request('AssignIpv6Addresses', {
        RegionId: REGION,
        NetworkInterfaceId: v6eni.NetworkInterfaceId,
        Ipv6Address: [ip],
      });
    expect((await failure(named(held))).code).toBe('InvalidPrivateIpAddress.Duplicated');
    const freed = more.Ipv6Sets.Ipv6Address[0];
    expect(((await named(freed)) as any).Ipv6Sets.Ipv6Address).toEqual([freed]);
    expect((await failure(named(freed))).code).toBe('InvalidPrivateIpAddress.Duplicated');

    const pfx = await create({ Ipv4PrefixCount: 2 });
    const prefixes = pfx.Ipv4PrefixSets.Ipv4PrefixSet.map((p: any) => p.Ipv4Prefix);
    expect(prefixes).toHaveLength(2);
    for (const p of prefixes) expect(Number(p.split('/')[0].split('.')[3]) % 16).toBe(0);
    const assigned: any = await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: pfx.NetworkInterfaceId,
      Ipv4PrefixCount: 1,
    });
    expect(assigned.AssignedPrivateIpAddressesSet.Ipv4PrefixSet.Ipv4Prefixes).toHaveLength(1);
    await ecs.request('UnassignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: pfx.NetworkInterfaceId,
      Ipv4Prefix: prefixes,
    });
    expect((await describeEni(pfx.NetworkInterfaceId)).Ipv4PrefixSets.Ipv4PrefixSet).toHaveLength(1);
  });
});
