import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type RPCClient from '@alicloud/pop-core';
import type { EcsEmulator } from '../../../testbed/ecs/index.js';
import { REGION, emulator, failure, pop } from '../../helpers/ecs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let emu: EcsEmulator;
let ecs: RPCClient;
const created: string[] = [];
beforeAll(async () => {
  emu = await emulator();
  ecs = pop(emu.url);
  for (let i = 0; i < 25; i++) {
    const r: any = await ecs.request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: i % 2 ? 'vsw-h-pods' : 'vsw-h-pods-2',
      SecurityGroupIds: ['sg-demo-pods'],
      Tag: [
        { Key: 'cluster', Value: i < 20 ? 'c1' : 'c2' },
        { Key: 'idx', Value: String(i) },
      ],
    });
    created.push(r.NetworkInterfaceId);
  }
});
afterAll(() => emu.close());

const enis = (r: any): any[] => r.NetworkInterfaceSets.NetworkInterfaceSet;

describe('DescribeNetworkInterfaces', () => {
  it('pages with NextToken and MaxResults (clamped to 10-500) and sees every ENI once', async () => {
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const r: any = await ecs.request('DescribeNetworkInterfaces', {
        RegionId: REGION,
        Type: 'Secondary',
        MaxResults: 3,
        ...(token ? { NextToken: token } : {}),
      });
      expect(enis(r).length).toBeLessThanOrEqual(10);
      seen.push(...enis(r).map((e) => e.NetworkInterfaceId));
      token = r.NextToken || undefined;
      pages++;
    } while (token);
    expect(pages).toBe(3); // MaxResults 3 is raised to 10: 25 ENIs in 3 pages
    expect(new Set(seen)).toEqual(new Set(created));
    expect(seen).toHaveLength(25);
    expect(
      (await failure(ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, NextToken: 'garbage' }))).code,
    ).toBe('InvalidParameter');
  });

  it('pages with legacy PageNumber and PageSize and reports TotalCount', async () => {
    const p1: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      Type: 'Secondary',
      PageNumber: 1,
      PageSize: 20,
    });
    const p2: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      Type: 'Secondary',
      PageNumber: 2,
      PageSize: 20,
    });
    expect(p1).toMatchObject({ TotalCount: 25, PageNumber: 1, PageSize: 20 });
    expect(enis(p1)).toHaveLength(20);
    expect(enis(p2)).toHaveLength(5);
  });

  it('filters by ids (at most 100), tags (all must match), vSwitch, status, type and instance', async () => {
    const byIds: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      NetworkInterfaceId: created.slice(0, 4),
      MaxResults: 100,
    });
    expect(
      enis(byIds)
        .map((e) => e.NetworkInterfaceId)
        .sort(),
    ).toEqual(created.slice(0, 4).sort());
    const tooMany = Array.from({ length: 101 }, (_, i) => `eni-${i}`);
    expect(
      (
        await failure(
          ecs.request(
            'DescribeNetworkInterfaces',
            { RegionId: REGION, NetworkInterfaceId: tooMany },
            { method: 'POST' },
          ),
        )
      ).code,
    ).toBe('InvalidParameter');
    const c2: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      Tag: [{ Key: 'cluster', Value: 'c2' }],
      MaxResults: 100,
    });
    expect(enis(c2)).toHaveLength(5);
    const both: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      Tag: [
        { Key: 'cluster', Value: 'c2' },
        { Key: 'idx', Value: '21' },
      ],
    });
    expect(enis(both)).toHaveLength(1);
    const vsw: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      VSwitchId: 'vsw-h-pods',
      MaxResults: 100,
    });
    expect(enis(vsw)).toHaveLength(12);
    const avail: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      Status: 'Available',
      MaxResults: 100,
    });
    expect(enis(avail)).toHaveLength(25);
    const prim: any = await ecs.request('DescribeNetworkInterfaces', {
      RegionId: REGION,
      Type: 'Primary',
      MaxResults: 100,
    });
    expect(enis(prim)).toHaveLength(24);
    const inst: any = await ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, InstanceId: 'i-demo-03' });
    expect(enis(inst)).toHaveLength(1);
    expect(
      (await failure(ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, Status: 'Sleeping' }))).code,
    ).toBe('InvalidParameter');
  });

  it('has the documented item shape', async () => {
    const r: any = await ecs.request('DescribeNetworkInterfaceAttribute', {
      RegionId: REGION,
      NetworkInterfaceId: created[0],
    });
    for (const k of [
      'NetworkInterfaceId',
      'MacAddress',
      'Status',
      'Type',
      'VpcId',
      'VSwitchId',
      'ZoneId',
      'PrivateIpAddress',
      'CreationTime',
      'OwnerId',
    ]) {
      expect(r).toHaveProperty(k);
    }
    expect(r.CreationTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(r.SecurityGroupIds).toEqual({ SecurityGroupId: ['sg-demo-pods'] });
    expect(r.Tags.Tag[0]).toEqual({ TagKey: 'cluster', TagValue: 'c1' });
    expect(r.Ipv6Sets).toEqual({ Ipv6Set: [] });
  });
});

describe('other describes', () => {
  it('DescribeInstanceTypes gives the ENI limits, filtered and paged', async () => {
    const r: any = await ecs.request('DescribeInstanceTypes', { InstanceTypes: ['ecs.g7.large', 'ecs.c7.2xlarge'] });
    const types = r.InstanceTypes.InstanceType;
    expect(types.map((t: any) => t.InstanceTypeId).sort()).toEqual(['ecs.c7.2xlarge', 'ecs.g7.large']);
    expect(types.find((t: any) => t.InstanceTypeId === 'ecs.g7.large')).toMatchObject({
      EniQuantity: 3,
      EniPrivateIpAddressQuantity: 6,
      EniIpv6AddressQuantity: 6,
    });
    const page: any = await ecs.request('DescribeInstanceTypes', { MaxResults: 2 });
    expect(page.InstanceTypes.InstanceType).toHaveLength(2);
    expect(page.NextToken).not.toBe('');
  });

  it('DescribeInstances filters by ids and private addresses', async () => {
    const all: any = await ecs.request('DescribeInstances', { RegionId: REGION, MaxResults: 100 });
    expect(all.Instances.Instance).toHaveLength(24);
    const one = all.Instances.Instance[5];
    const byIp: any = await ecs.request('DescribeInstances', {
      RegionId: REGION,
      PrivateIpAddresses: JSON.stringify(one.VpcAttributes.PrivateIpAddress.IpAddress),
    });
    expect(byIp.Instances.Instance.map((i: any) => i.InstanceId)).toEqual([one.InstanceId]);
    expect(byIp.Instances.Instance[0]).toMatchObject({ Status: 'Running', VpcAttributes: { VpcId: 'vpc-demo' } });
    expect((await failure(ecs.request('DescribeInstances', { RegionId: REGION, InstanceIds: 'i-1,i-2' }))).code).toBe(
      'InvalidParameter',
    );
  });

  it('DescribeSecurityGroups and DescribeVSwitches filter by tags', async () => {
    const sg: any = await ecs.request('DescribeSecurityGroups', {
      RegionId: REGION,
      VpcId: 'vpc-demo',
      Tag: [{ Key: 'role', Value: 'pods' }],
    });
    expect(sg.SecurityGroups.SecurityGroup.map((g: any) => g.SecurityGroupId)).toEqual(['sg-demo-pods']);
    const vpc = pop(emu.url, 'vpc');
    const vs: any = await vpc.request('DescribeVSwitches', {
      VpcId: 'vpc-demo',
      ZoneId: 'cn-hangzhou-i',
      Tag: [{ Key: 'role', Value: 'pods' }],
    });
    expect(vs.VSwitches.VSwitch.map((v: any) => v.VSwitchId).sort()).toEqual(['vsw-i-pods', 'vsw-i-small']);
    expect(vs.VSwitches.VSwitch[0].Tags.Tag[0]).toEqual({ Key: 'role', Value: 'pods' });
    const paged: any = await vpc.request('DescribeVSwitches', { RegionId: REGION, PageSize: 3, PageNumber: 3 });
    expect(paged).toMatchObject({ TotalCount: 8, PageNumber: 3, PageSize: 3 });
    expect(paged.VSwitches.VSwitch).toHaveLength(2);
    expect((await failure(vpc.request('DescribeVSwitches', { RegionId: REGION, PageSize: 51 }))).code).toBe(
      'InvalidParameter',
    );
    expect((await failure(vpc.request('DescribeVSwitches', { VpcId: 'vpc-nope' }))).code).toBe('InvalidVpcId.NotFound');
  });
});
