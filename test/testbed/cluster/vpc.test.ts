/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type RPCClient from '@alicloud/pop-core';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runtimeUnavailable, startCluster, type EmulatedCluster } from '../../../testbed/cluster/index.js';
import { gatewayOf } from '../../../testbed/vpc/index.js';
import { REGION, eventually, pop } from '../../helpers/ecs.js';
import { inNs, ip, sh } from '../../helpers/netns.js';

const why = runtimeUnavailable();
if (why) console.warn(`emulated cluster VPC test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

let cluster: EmulatedCluster;
let ecs: RPCClient;

maybe('the emulated cluster’s VPC (root)', () => {
  beforeAll(async () => {
    cluster = await startCluster({
      nodes: 1,
      registerWithTaints: [],
      workDir: mkdtempSync(join(tmpdir(), 'cluster-vpc-')),
    });
    ecs = pop(cluster.ecs.url);
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
  });

  test('an ENI attached to a node’s instance appears in the node’s namespace; from it the vpc-host answers; eth0 stays the bridge’s', async () => {
    const node = cluster.vpc.nodes[0]!;
    expect(node.instanceId).toBe('i-demo-01');
    const eth0 = await inNs(node.netns, 'ip', '-o', '-4', 'addr', 'show', 'eth0');
    const created: any = await ecs.request(
      'CreateNetworkInterface',
      {
        RegionId: REGION,
        VSwitchId: 'vsw-h-pods',
        SecurityGroupIds: ['sg-demo-pods'],
        SecondaryPrivateIpAddressCount: 1,
      },
      { method: 'POST' },
    );
    const [id, mac, address] = [created.NetworkInterfaceId, created.MacAddress, created.PrivateIpAddress];
    await ecs.request('AttachNetworkInterface', {
      RegionId: REGION,
      NetworkInterfaceId: id,
      InstanceId: node.instanceId,
    });
    const device = await eventually(async () => {
      const links: any[] = JSON.parse(await inNs(node.netns, 'ip', '-j', 'link', 'show'));
      return links.find((l) => l.address === mac);
    }, 10_000);
    expect(device).toMatchObject({ ifname: 'eth1', operstate: 'DOWN' });
    // By hand, as the node's agent would: the device up, its address routed out of it by source.
    const gw = gatewayOf('192.168.16.0/20');
    await ip('-n', node.netns, 'link', 'set', 'eth1', 'up');
    await ip('-n', node.netns, 'addr', 'add', `${address}/32`, 'dev', 'eth1');
    await ip('-n', node.netns, 'route', 'add', `${gw}/32`, 'dev', 'eth1', 'scope', 'link', 'table', '100');
    await ip('-n', node.netns, 'route', 'add', 'default', 'via', gw, 'dev', 'eth1', 'table', '100');
    await ip('-n', node.netns, 'rule', 'add', 'from', `${address}/32`, 'lookup', '100', 'prio', '111');
    const host = cluster.vpc.vpcHost!;
    const seen = await sh('ip', [
      'netns',
      'exec',
      node.netns,
      'curl',
      '-sS',
      '--max-time',
      '3',
      '--interface',
      address,
      `http://${host.ip}:${host.ports.http}/`,
    ]);
    expect(JSON.parse(seen.stdout)).toEqual({ server: host.ip, client: address });
    // The node's own interface and routes are as the cluster made them.
    expect(await inNs(node.netns, 'ip', '-o', '-4', 'addr', 'show', 'eth0')).toBe(eth0);
    expect(await inNs(node.netns, 'ip', 'route', 'show', 'default')).toMatch(
      new RegExp(`^default via ${cluster.network.hostAddress.replace(/\./g, '\\.')} dev eth0`),
    );
    await ecs.request('DetachNetworkInterface', {
      RegionId: REGION,
      NetworkInterfaceId: id,
      InstanceId: node.instanceId,
    });
    await eventually(async () => !(await inNs(node.netns, 'ip', '-o', 'link', 'show')).includes(mac), 10_000);
  }, 60_000);
});
