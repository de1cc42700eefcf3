import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CloudError } from '../../src/cloud/index.js';
import type { EcsEmulator } from '../../testbed/ecs/index.js';
import { clientFor, metricValue } from '../helpers/cloud.js';
import { emulator, eventually } from '../helpers/ecs.js';

let emu: EcsEmulator;
let client: ReturnType<typeof clientFor>;
beforeAll(async () => {
  emu = await emulator();
  client = clientFor(emu);
});
afterAll(async () => {
  await client.close();
  await emu.close();
});

describe('typed ECS and VPC actions', () => {
  it('runs an ENI lifecycle and returns plain typed data', async () => {
    const api = client.api;
    const eni = await api.createNetworkInterface({
      vSwitchId: 'vsw-h-pods',
      securityGroupIds: ['sg-demo-pods', 'sg-demo-nodes'],
      secondaryIpCount: 3,
      tags: { 'eni-ipam/cluster': 'c1' },
    });
    expect(eni).toMatchObject({
      status: 'Available',
      vSwitchId: 'vsw-h-pods',
      zoneId: 'cn-hangzhou-h',
      tags: { 'eni-ipam/cluster': 'c1' },
    });
    expect(eni.securityGroupIds).toEqual(['sg-demo-pods', 'sg-demo-nodes']);
    expect(eni.secondaryIps).toHaveLength(3);
    expect(eni.secondaryIps).not.toContain(eni.primaryIp);
    await api.attachNetworkInterface(eni.id, 'i-demo-04');
    const inUse = await eventually(async () => {
      const [e] = await api.describeNetworkInterfaces({ ids: [eni.id] });
      return e?.status === 'InUse' ? e : undefined;
    });
    expect(inUse).toMatchObject({ instanceId: 'i-demo-04', deviceIndex: 1 });
    const ips = await api.assignPrivateIpAddresses(eni.id, { count: 2 });
    expect(ips).toHaveLength(2);
    await api.unassignPrivateIpAddresses(eni.id, ips);
    expect((await api.describeNetworkInterfaceAttribute(eni.id)).secondaryIps).toEqual(eni.secondaryIps);
    await api.detachNetworkInterface(eni.id, 'i-demo-04');
    await eventually(async () => (await api.describeNetworkInterfaceAttribute(eni.id)).status === 'Available');
    await api.deleteNetworkInterface(eni.id);
    await eventually(async () => (await api.describeNetworkInterfaces({ ids: [eni.id] })).length === 0);
    const err = await api.describeNetworkInterfaceAttribute(eni.id).catch((e) => e);
    expect(err).toBeInstanceOf(CloudError);
    expect(err).toMatchObject({
      kind: 'not-found',
      code: 'InvalidEniId.NotFound',
      action: 'DescribeNetworkInterfaceAttribute',
    });
    expect(err.requestId).toMatch(/^[0-9A-F-]{36}$/);
  });

  it('pages through ENIs and batches ids by 100', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 23; i++)
      ids.push(
        (
          await client.api.createNetworkInterface({
            vSwitchId: 'vsw-h-pods-2',
            securityGroupIds: ['sg-demo-pods'],
            tags: { batch: 'paging' },
          })
        ).id,
      );
    const page1 = await client.api.describeNetworkInterfacesPage({ tags: { batch: 'paging' } }, { maxResults: 10 });
    expect(page1.items).toHaveLength(10);
    expect(page1.nextToken).not.toBe('');
    const all = await client.api.describeNetworkInterfaces({ tags: { batch: 'paging' } });
    expect(all.map((e) => e.id).sort()).toEqual([...ids].sort());
    const calls = emu.stats().calls.DescribeNetworkInterfaces?.OK ?? 0;
    const byIds = await client.api.describeNetworkInterfaces({
      ids: [...ids, ...Array.from({ length: 90 }, (_, i) => `eni-missing${i}`)],
    });
    expect(byIds).toHaveLength(23);
    expect((emu.stats().calls.DescribeNetworkInterfaces?.OK ?? 0) - calls).toBe(2); // 113 ids: two calls
  });

  it('describes instance types, instances, security groups, vSwitches and VPCs', async () => {
    const types = await client.api.describeInstanceTypes(['ecs.g7.large']);
    expect(types).toEqual([{ id: 'ecs.g7.large', eniQuantity: 3, ipv4PerEni: 6, ipv6PerEni: 6 }]);
    expect((await client.api.describeInstanceTypes()).length).toBe(4);
    const [inst] = await client.api.describeInstances({ ids: ['i-demo-05'] });
    expect(inst).toMatchObject({
      id: 'i-demo-05',
      status: 'Running',
      vpcId: 'vpc-demo',
      securityGroupIds: ['sg-demo-nodes'],
    });
    expect((await client.api.describeInstances({ privateIps: [inst!.primaryIp] })).map((i) => i.id)).toEqual([
      'i-demo-05',
    ]);
    expect((await client.api.describeInstances()).length).toBe(24);
    expect(
      (await client.api.describeSecurityGroups({ vpcId: 'vpc-demo', tags: { role: 'pods' } })).map((g) => g.id),
    ).toEqual(['sg-demo-pods']);
    const vsw = await client.api.describeVSwitches({ vpcId: 'vpc-demo' });
    expect(vsw).toHaveLength(8);
    expect(vsw.find((v) => v.id === 'vsw-i-small')).toMatchObject({
      availableIpCount: 6,
      zoneId: 'cn-hangzhou-i',
      cidr: '192.168.56.0/27',
      tags: { role: 'pods' },
    });
    expect(await client.api.describeVpcs()).toEqual([
      { id: 'vpc-demo', cidr: '192.168.0.0/16', name: 'demo', vSwitchIds: expect.arrayContaining(['vsw-h-pods']) },
    ]);
  });

  it('classifies errors that are not retried, with the action and the cloud message', async () => {
    const err = await client.api
      .createNetworkInterface({ vSwitchId: 'vsw-i-small', securityGroupIds: ['sg-demo-pods'], secondaryIpCount: 20 })
      .catch((e) => e);
    expect(err).toMatchObject({
      kind: 'vswitch-exhausted',
      code: 'InvalidVSwitchId.IpNotEnough',
      retryable: false,
      attempts: 1,
    });
    expect(err.message).toMatch(
      /^CreateNetworkInterface: InvalidVSwitchId\.IpNotEnough: The vSwitch vsw-i-small has 6 free addresses/,
    );
  });

  it('keeps a ClientToken across retries, so a create whose answer was lost makes one ENI', async () => {
    const before = emu.state().enis.length;
    emu.setFaults({ rules: [{ action: 'CreateNetworkInterface', kind: 'drop-answer', rate: 1, times: 1 }] });
    const eni = await client.api.createNetworkInterface({
      vSwitchId: 'vsw-h-pods',
      securityGroupIds: ['sg-demo-pods'],
    });
    emu.clearFaults();
    expect(emu.stats().calls.CreateNetworkInterface).toMatchObject({ DropAnswer: 1 });
    expect(emu.state().enis.length).toBe(before + 1);
    expect(emu.state().enis.some((e) => e.id === eni.id)).toBe(true);
    expect(
      await metricValue(client.registry, 'eni_ipam_openapi_retries_total', {
        action: 'CreateNetworkInterface',
        code: 'Transport.Connection',
      }),
    ).toBe(1);
  });
});
