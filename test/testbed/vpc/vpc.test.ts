/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type RPCClient from '@alicloud/pop-core';
import { once } from 'node:events';
import ipaddr from 'ipaddr.js';
import { namespacesUnavailable } from '../../../testbed/cluster/runtime/network.js';
import type { EcsEmulator } from '../../../testbed/ecs/index.js';
import { gatewayOf, startVpc, type Vpc } from '../../../testbed/vpc/index.js';
import { REGION, emulator, eventually, pop, sleep } from '../../helpers/ecs.js';
import { deleteNamespaces, inNs, ip, sh, startInNs } from '../../helpers/netns.js';

/*
 * The emulated VPC in real namespaces, driven through the real ECS API (pop-core against the
 * emulator). Nothing here is the agent's: each node's ENI devices are configured by hand, as a
 * node would (device up, a pod namespace behind it, a route table per ENI and the pod's rules).
 */
const why = namespacesUnavailable(
  ['ip', 'ss', 'iptables-restore', 'iptables-save', 'tcpdump', 'ping', 'curl', 'iperf3'],
  'iproute2, iptables, tcpdump, iputils-ping, curl, iperf3',
);
if (why) console.warn(`VPC emulation test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const P = `evt${process.pid % 10000}-`;
const N1 = `${P}n1`; // i-demo-01: ecs.g7.large, given jumbo frames (8500) below
const N2 = `${P}n2`; // i-demo-04: ecs.g7.xlarge (1500)
const N3 = `${P}n3`; // i-demo-07, on a VPC of its own with the naming and delay knobs
const N4 = `${P}n4`; // i-demo-03: zone j, where vsw-j-pods has an IPv6 CIDR

let emu: EcsEmulator;
let ecs: RPCClient;
let vpc: Vpc;

interface Eni {
  id: string;
  mac: string;
  ips: string[];
  vSwitchId: string;
  gateway: string;
}
const VSW_CIDR: Record<string, string> = {
  'vsw-h-nodes': '192.168.0.0/24',
  'vsw-h-pods': '192.168.16.0/20',
  'vsw-h-pods-2': '192.168.32.0/24',
};

const describeEni = async (id: string): Promise<any> =>
  ((await ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, NetworkInterfaceId: [id] })) as any)
    .NetworkInterfaceSets.NetworkInterfaceSet[0];

async function createEni(vSwitchId: string, secondary: number): Promise<Eni> {
  const r: any = await ecs.request(
    'CreateNetworkInterface',
    {
      RegionId: REGION,
      VSwitchId: vSwitchId,
      SecurityGroupIds: ['sg-demo-pods'],
      SecondaryPrivateIpAddressCount: secondary,
    },
    { method: 'POST' },
  );
  return {
    id: r.NetworkInterfaceId,
    mac: r.MacAddress,
    ips: r.PrivateIpSets.PrivateIpSet.map((s: any) => s.PrivateIpAddress),
    vSwitchId,
    gateway: gatewayOf(VSW_CIDR[vSwitchId]!),
  };
}

/** Attaches through the API and answers when the ECS API says InUse (the time the test saw it). */
async function attach(eni: Eni, instance: string): Promise<number> {
  await ecs.request('AttachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: eni.id, InstanceId: instance });
  await eventually(async () => (await describeEni(eni.id)).Status === 'InUse', 10_000, 10);
  return Date.now();
}

async function detach(eni: Eni, instance: string): Promise<void> {
  await ecs.request('DetachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: eni.id, InstanceId: instance });
}

interface Link {
  ifname: string;
  address: string;
  mtu: number;
  flags: string[];
  operstate: string;
  addr_info: Array<{ family: string; local: string }>;
  stats64?: { rx: { packets: number } };
}
const links = async (netns: string): Promise<Link[]> => JSON.parse(await inNs(netns, 'ip', '-j', '-s', 'addr', 'show'));
const deviceOf = async (netns: string, mac: string): Promise<Link | undefined> =>
  (await links(netns)).find((l) => l.address === mac);
const rxPackets = async (netns: string, dev: string): Promise<number> =>
  (await links(netns)).find((l) => l.ifname === dev)!.stats64!.rx.packets;

/** ICMP echo requests a namespace has received (its /proc/net/snmp): what reached it, whatever else moves. */
const echoesIn = async (netns: string): Promise<number> => {
  const icmp = (await inNs(netns, 'cat', '/proc/net/snmp')).split('\n').filter((l) => l.startsWith('Icmp:'));
  return Number(icmp[1]!.split(' ')[icmp[0]!.split(' ').indexOf('InEchos')]);
};

const ping = (netns: string, to: string, extra: string[] = []) =>
  sh('ip', ['netns', 'exec', netns, 'ping', '-c', '1', '-W', '1', ...extra, to]);

let pods = 0;
/**
 * What a node does for a pod on an ENI, by hand: the ENI's device up, a pod namespace with the
 * addresses behind a veth, and per address an egress rule to `table` (gateway and default route
 * through the device) and an ingress rule to main.
 */
async function podBehind(node: string, dev: string, eni: Eni, addrs: string[], table: number): Promise<string> {
  const k = ++pods;
  const pod = `${P}pod${k}`;
  const hostSide = `pv${k}`;
  await ip('netns', 'add', pod);
  await inNs(node, 'sysctl', '-qw', 'net.ipv4.ip_forward=1');
  await ip('-n', node, 'link', 'set', dev, 'up');
  await ip('-n', node, 'link', 'add', hostSide, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod);
  await ip('-n', node, 'addr', 'add', '169.254.1.1/32', 'dev', hostSide);
  await ip('-n', node, 'link', 'set', hostSide, 'up');
  await ip('-n', pod, 'link', 'set', 'lo', 'up');
  for (const a of addrs) await ip('-n', pod, 'addr', 'add', `${a}/32`, 'dev', 'eth0');
  await ip('-n', pod, 'link', 'set', 'eth0', 'up');
  await ip('-n', pod, 'route', 'add', '169.254.1.1', 'dev', 'eth0', 'scope', 'link');
  await ip('-n', pod, 'route', 'add', 'default', 'via', '169.254.1.1', 'dev', 'eth0', 'src', addrs[0]!);
  await tableFor(node, dev, eni, table);
  for (const a of addrs) {
    await ip('-n', node, 'route', 'add', `${a}/32`, 'dev', hostSide);
    await ip('-n', node, 'rule', 'add', 'from', `${a}/32`, 'lookup', String(table), 'prio', '111');
    await ip('-n', node, 'rule', 'add', 'to', `${a}/32`, 'lookup', 'main', 'prio', '20');
  }
  return pod;
}

async function tableFor(node: string, dev: string, eni: Eni, table: number): Promise<void> {
  await ip('-n', node, 'route', 'replace', `${eni.gateway}/32`, 'dev', dev, 'scope', 'link', 'table', String(table));
  await ip('-n', node, 'route', 'replace', 'default', 'via', eni.gateway, 'dev', dev, 'table', String(table));
}

beforeAll(async () => {
  if (why) return;
  deleteNamespaces(P);
  emu = await emulator((f) => {
    f.instanceTypes.find((t) => t.id === 'ecs.g7.large')!.mtu = 8500;
    f.delays = { attachMs: 300, detachMs: 300, deleteMs: 30 };
  });
  ecs = pop(emu.url);
  for (const ns of [N1, N2, N3, N4]) {
    await ip('netns', 'add', ns);
    await ip('-n', ns, 'link', 'set', 'lo', 'up');
  }
  vpc = await startVpc({
    world: emu.world,
    nodes: [
      { instanceId: 'i-demo-01', netns: N1 },
      { instanceId: 'i-demo-04', netns: N2 },
      { instanceId: 'i-demo-03', netns: N4 },
    ],
    prefix: P,
    vpcHost: { mtu: 8500 },
  });
}, 30_000);

afterAll(async () => {
  await vpc?.stop();
  await emu?.close();
  if (!why) deleteNamespaces(P);
});

maybe('the emulated VPC (root)', () => {
  let a: Eni; // on node 1, vsw-h-pods
  let b: Eni; // on node 1, vsw-h-pods
  let c: Eni; // on node 2, vsw-h-pods-2
  let pod1: string; // behind a's device, with a's second address (and b's, for the spoofing checks)
  let devA: string;
  let devB: string;
  const host = () => vpc.vpcHost!;

  it('makes each node’s primary ENI its eth0, as the image configures it; the gateway and the vSwitch answer', async () => {
    const primary = emu.world.enis.get(emu.world.instances.get('i-demo-01')!.primaryEniId)!;
    const eth0 = (await deviceOf(N1, primary.mac))!;
    expect(eth0).toMatchObject({ ifname: 'eth0', mtu: 8500, operstate: 'UP' });
    expect(eth0.addr_info.filter((i) => i.family === 'inet').map((i) => i.local)).toEqual([primary.primaryIp]);
    expect(await inNs(N1, 'ip', 'route', 'show', 'default')).toMatch(/^default via 192\.168\.0\.253 dev eth0/);
    // The gateway answers ARP (with the VPC's gateway MAC) and ping.
    expect((await ping(N1, '192.168.0.253')).code).toBe(0);
    expect(await inNs(N1, 'ip', 'neigh', 'show', '192.168.0.253')).toMatch(/lladdr ee:ff:ff:ff:ff:ff/);
    // A neighbour in the same vSwitch is reached on-link, as in a VPC.
    const other = emu.world.enis.get(emu.world.instances.get('i-demo-04')!.primaryEniId)!.primaryIp;
    expect((await ping(N1, other)).code).toBe(0);
    // The host outside the cluster sits in a vSwitch of its own.
    expect(host()).toMatchObject({ vSwitchId: 'vsw-j-pods', ip: '192.168.67.252', gateway: '192.168.67.253' });
    expect((await ping(N1, host().ip)).code).toBe(0);
  });

  it('plugs an attached ENI into its node as a fresh NIC (its MAC, DOWN, no address, ethN) and unplugs it on detach', async () => {
    const eni = await createEni('vsw-h-pods', 1);
    await ecs.request('AttachNetworkInterface', {
      RegionId: REGION,
      NetworkInterfaceId: eni.id,
      InstanceId: 'i-demo-01',
    });
    expect((await describeEni(eni.id)).Status).toBe('Attaching');
    await vpc.sync();
    expect(await deviceOf(N1, eni.mac)).toBeUndefined(); // not before InUse
    await eventually(async () => (await describeEni(eni.id)).Status === 'InUse', 5000, 10);
    const dev = await eventually(() => deviceOf(N1, eni.mac), 2000, 20);
    expect(dev.ifname).toBe('eth1');
    expect(dev.flags).not.toContain('UP');
    expect(dev.operstate).toBe('DOWN');
    expect(dev.mtu).toBe(1500);
    expect(dev.addr_info).toEqual([]);
    expect(await deviceOf(N2, eni.mac)).toBeUndefined();
    // Its port in the VPC carries the instance type's MTU (jumbo frames here).
    const port = vpc.portOf(eni.id)!;
    expect(await inNs(vpc.netns, 'ip', 'link', 'show', port)).toMatch(/ mtu 8500 /);
    await detach(eni, 'i-demo-01');
    // The guest lets the device go while the ENI is Detaching.
    await eventually(async () => !(await deviceOf(N1, eni.mac)), 2000, 20);
    expect(vpc.portOf(eni.id)).toBeUndefined();
    expect(await inNs(vpc.netns, 'ip', '-o', 'link', 'show')).not.toContain(port);
    await eventually(async () => (await describeEni(eni.id)).Status === 'Available', 5000, 20);
  });

  it('carries an ENI address to the vpc-host and back, unchanged, over ICMP and TCP (bulk too)', async () => {
    [a, b] = [await createEni('vsw-h-pods', 2), await createEni('vsw-h-pods', 1)];
    c = await createEni('vsw-h-pods-2', 2);
    await Promise.all([attach(a, 'i-demo-01'), attach(b, 'i-demo-01'), attach(c, 'i-demo-04')]);
    devA = (await eventually(() => deviceOf(N1, a.mac), 2000)).ifname;
    devB = (await eventually(() => deviceOf(N1, b.mac), 2000)).ifname;
    pod1 = await podBehind(N1, devA, a, [a.ips[1]!, b.ips[1]!], 101);
    expect((await ping(pod1, host().ip, ['-I', a.ips[1]!])).code).toBe(0);
    const seen = JSON.parse(
      await inNs(pod1, 'curl', '-sS', '--max-time', '3', `http://${host().ip}:${host().ports.http}/`),
    );
    expect(seen).toEqual({ server: host().ip, client: a.ips[1] });
    // The node asked for the gateway on a's device (from an address that is not a's): answered.
    expect(await inNs(N1, 'ip', 'neigh', 'show', a.gateway, 'dev', devA)).toMatch(/lladdr ee:ff:ff:ff:ff:ff/);
    const echo = await sh('ip', [
      'netns',
      'exec',
      pod1,
      process.execPath,
      '-e',
      `const s=require('net').connect(${host().ports.echo},'${host().ip}',()=>s.end('ping over tcp'));s.pipe(process.stdout)`,
    ]);
    expect(echo.stdout).toBe('ping over tcp');
    // Bulk TCP: what crosses the VPC is one segment per packet, as on the wire, and it is carried.
    const iperf = await inNs(pod1, 'iperf3', '-c', host().ip, '-p', String(host().ports.iperf3), '-t', '1', '-J');
    expect(JSON.parse(iperf).end.sum_received.bits_per_second).toBeGreaterThan(50e6);
    expect(await vpc.drops(a.id)).toEqual({ spoofed: 0, foreignMac: 0, tooBig: 0, spoofed6: 0 });
  }, 30_000);

  it('drops what an ENI sends from an address that is not its own (anti-spoofing), and passes the same from its own ENI', async () => {
    // b's address routed out of a's device: the VPC drops it at a's port.
    const before = (await vpc.drops(a.id)).spoofed;
    const echoes = await echoesIn(host().netns);
    expect((await ping(pod1, host().ip, ['-I', b.ips[1]!])).code).not.toBe(0);
    expect(await echoesIn(host().netns)).toBe(echoes); // it never reached the host
    expect((await vpc.drops(a.id)).spoofed).toBe(before + 1);
    // The same packets through b's own device pass.
    await ip('-n', N1, 'link', 'set', devB, 'up');
    await tableFor(N1, devB, b, 102);
    await ip('-n', N1, 'rule', 'del', 'from', `${b.ips[1]}/32`, 'lookup', '101', 'prio', '111');
    await ip('-n', N1, 'rule', 'add', 'from', `${b.ips[1]}/32`, 'lookup', '102', 'prio', '111');
    expect((await ping(pod1, host().ip, ['-I', b.ips[1]!])).code).toBe(0);
    expect(await echoesIn(host().netns)).toBe(echoes + 1);
    expect((await vpc.drops(b.id)).spoofed).toBe(0);
    // Without the node's routing by source a pod's packets leave by the primary interface: dropped there.
    const primary = emu.world.instances.get('i-demo-01')!.primaryEniId;
    const fromPrimary = (await vpc.drops(primary)).spoofed;
    await ip('-n', N1, 'rule', 'del', 'from', `${a.ips[1]}/32`, 'lookup', '101', 'prio', '111');
    expect((await ping(pod1, host().ip, ['-I', a.ips[1]!])).code).not.toBe(0);
    expect(await echoesIn(host().netns)).toBe(echoes + 1);
    expect((await vpc.drops(primary)).spoofed).toBe(fromPrimary + 1);
    await ip('-n', N1, 'rule', 'add', 'from', `${a.ips[1]}/32`, 'lookup', '101', 'prio', '111');
    expect((await ping(pod1, host().ip, ['-I', a.ips[1]!])).code).toBe(0);
  }, 30_000);

  it('delivers an ENI’s address to that ENI’s device only, to its MAC; an address no ENI holds goes nowhere', async () => {
    const watched = ['eth0', devA, devB];
    const count = async () => Promise.all(watched.map((d) => rxPackets(N1, d)));
    const capture = startInNs(N1, [
      'tcpdump',
      '-i',
      devA,
      '-e',
      '-n',
      '-l',
      '-c',
      '1',
      `icmp and dst host ${a.ips[1]}`,
    ]);
    let captured = '';
    capture.stdout!.on('data', (d) => (captured += d));
    await sleep(800);
    const before = await count();
    for (let i = 0; i < 5; i++) expect((await ping(host().netns, a.ips[1]!)).code).toBe(0);
    const after = await count();
    expect(after[1]! - before[1]!).toBeGreaterThanOrEqual(5);
    expect([after[0]! - before[0]!, after[2]! - before[2]!]).toEqual([0, 0]);
    await Promise.race([once(capture, 'exit'), sleep(3000)]);
    capture.kill();
    expect(captured).toContain(`> ${a.mac}`);
    // A free address of a's vSwitch: nobody holds it, nothing is delivered anywhere.
    const free = '192.168.31.200';
    expect(emu.world.vSwitches.get('vsw-h-pods')!.pool.isUsed(free)).toBe(false);
    const quiet = await count();
    expect((await ping(host().netns, free)).code).not.toBe(0);
    expect(await count()).toEqual(quiet);
  }, 30_000);

  it('carries a full-MTU DF packet and not one byte more, for a jumbo-frame type (8500) and the default (1500)', async () => {
    // The devices are set larger by hand, so that the VPC, not the sender, is what refuses.
    for (const [ns, dev] of [
      [N1, devA],
      [N1, 'pv1'],
      [pod1, 'eth0'],
    ] as const)
      await ip('-n', ns, 'link', 'set', dev, 'mtu', '9000');
    expect((await ping(pod1, host().ip, ['-I', a.ips[1]!, '-M', 'do', '-s', String(8500 - 28)])).code).toBe(0);
    const tooBig = (await vpc.drops(a.id)).tooBig;
    expect((await ping(pod1, host().ip, ['-I', a.ips[1]!, '-M', 'do', '-s', String(8501 - 28)])).code).not.toBe(0);
    expect((await vpc.drops(a.id)).tooBig).toBe(tooBig + 1);

    const devC = (await eventually(() => deviceOf(N2, c.mac), 2000)).ifname;
    const pod2 = await podBehind(N2, devC, c, [c.ips[1]!], 101);
    await ip('-n', N2, 'link', 'set', devC, 'mtu', '9000');
    await ip('-n', N2, 'link', 'set', `pv${pods}`, 'mtu', '9000');
    await ip('-n', pod2, 'link', 'set', 'eth0', 'mtu', '9000');
    expect((await ping(pod2, host().ip, ['-M', 'do', '-s', String(1500 - 28)])).code).toBe(0);
    expect((await ping(pod2, host().ip, ['-M', 'do', '-s', String(1501 - 28)])).code).not.toBe(0);
    expect((await vpc.drops(c.id)).tooBig).toBe(1);
  }, 30_000);

  it('routes between the vSwitches of the VPC: pods on ENIs of two nodes and two vSwitches reach each other', async () => {
    const pod2 = `${P}pod${pods}`;
    expect((await ping(pod1, c.ips[1]!, ['-I', a.ips[1]!])).code).toBe(0);
    expect((await ping(pod2, a.ips[1]!)).code).toBe(0);
    // And a pod reaches the gateway of its own vSwitch.
    expect((await ping(pod2, c.gateway)).code).toBe(0);
  });

  it('moves addresses with AssignPrivateIpAddresses and UnassignPrivateIpAddresses, in effect when the call answers', async () => {
    const assigned: any = await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: a.id,
      SecondaryPrivateIpAddressCount: 1,
    });
    const moving: string = assigned.AssignedPrivateIpAddressesSet.PrivateIpSet.PrivateIpAddress[0];
    await ip('-n', pod1, 'addr', 'add', `${moving}/32`, 'dev', 'eth0');
    await ip('-n', N1, 'route', 'add', `${moving}/32`, 'dev', 'pv1');
    await ip('-n', N1, 'rule', 'add', 'from', `${moving}/32`, 'lookup', '101', 'prio', '111');
    // The first packet gets through: the VPC carries the address once the API has answered.
    expect((await ping(pod1, host().ip, ['-I', moving])).code).toBe(0);
    expect((await ping(host().netns, moving)).code).toBe(0);

    await ecs.request('UnassignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: a.id,
      PrivateIpAddress: [moving],
    });
    expect((await ping(host().netns, moving)).code).not.toBe(0);
    const [spoofed, echoes] = [(await vpc.drops(a.id)).spoofed, await echoesIn(host().netns)];
    expect((await ping(pod1, host().ip, ['-I', moving])).code).not.toBe(0);
    expect(await echoesIn(host().netns)).toBe(echoes);
    expect((await vpc.drops(a.id)).spoofed).toBe(spoofed + 1);

    // Assigned to b (on the same node, the same vSwitch), it arrives on b's device, not a's.
    await ecs.request('AssignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: b.id,
      PrivateIpAddress: [moving],
    });
    await ip('-n', N1, 'rule', 'del', 'from', `${moving}/32`, 'lookup', '101', 'prio', '111');
    await ip('-n', N1, 'rule', 'add', 'from', `${moving}/32`, 'lookup', '102', 'prio', '111');
    const [onA, onB] = [await rxPackets(N1, devA), await rxPackets(N1, devB)];
    for (let i = 0; i < 3; i++) expect((await ping(host().netns, moving)).code).toBe(0);
    expect(await rxPackets(N1, devA)).toBe(onA);
    expect((await rxPackets(N1, devB)) - onB).toBeGreaterThanOrEqual(3);
    expect((await ping(pod1, host().ip, ['-I', moving])).code).toBe(0);
  }, 30_000);

  it('puts back what is changed behind its back: a route, the rules, a port', async () => {
    await ip('-n', vpc.netns, 'route', 'del', `${a.ips[1]}/32`);
    await inNs(vpc.netns, 'iptables', '-t', 'raw', '-F');
    expect((await ping(host().netns, a.ips[1]!)).code).not.toBe(0);
    await eventually(async () => (await ping(host().netns, a.ips[1]!)).code === 0, 5000, 100);
    // The anti-spoofing rules are back: b's address out of a's device is dropped again.
    await ip('-n', N1, 'rule', 'add', 'from', `${b.ips[1]}/32`, 'lookup', '101', 'prio', '110');
    const echoes = await echoesIn(host().netns);
    expect((await ping(pod1, host().ip, ['-I', b.ips[1]!])).code).not.toBe(0);
    expect(await echoesIn(host().netns)).toBe(echoes);
    await ip('-n', N1, 'rule', 'del', 'prio', '110');
    // A port deleted (its device with it) is made again, as a fresh NIC.
    await ip('-n', vpc.netns, 'link', 'del', vpc.portOf(b.id)!);
    expect(await deviceOf(N1, b.mac)).toBeUndefined();
    const back = await eventually(() => deviceOf(N1, b.mac), 5000, 100);
    expect(back.flags).not.toContain('UP');
  }, 30_000);
});

const ROUTER6 = 'fe80::ecff:ffff:feff:ffff';
/** An address of an IPv6 prefix: its base plus `offset`. */
const addressIn = (prefix: string, offset: bigint): string => {
  const base = BigInt(`0x${Buffer.from(ipaddr.IPv6.parseCIDR(prefix)[0].toByteArray()).toString('hex')}`);
  return ipaddr.IPv6.parse((base + offset).toString(16).padStart(32, '0').match(/.{4}/g)!.join(':')).toString();
};
const ping6 = (netns: string, to: string, from?: string) =>
  sh('ip', ['netns', 'exec', netns, 'ping', '-6', '-c', '1', '-W', '1', ...(from ? ['-I', from] : []), to]);

/**
 * A dual-stack node's pod by hand, IPv6 half: the ENI's device up, a pod with `addrs` behind a
 * veth whose host side holds a link-local gateway, and per address rules to `table`, whose
 * default route goes to the VPC router's link-local address on the ENI's device.
 */
async function pod6Behind(node: string, dev: string, addrs: string[], table: number): Promise<string> {
  const k = ++pods;
  const pod = `${P}pod${k}`;
  const hostSide = `pv${k}`;
  await ip('netns', 'add', pod);
  await inNs(node, 'sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1');
  await ip('-n', node, 'link', 'set', dev, 'up');
  await ip('-n', node, 'link', 'add', hostSide, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod);
  await ip('-n', node, 'addr', 'add', 'fe80::1/128', 'dev', hostSide, 'nodad');
  await ip('-n', node, 'link', 'set', hostSide, 'up');
  await ip('-n', pod, 'link', 'set', 'lo', 'up');
  for (const a of addrs) await ip('-n', pod, 'addr', 'add', `${a}/128`, 'dev', 'eth0', 'nodad');
  await ip('-n', pod, 'link', 'set', 'eth0', 'up');
  await ip('-n', pod, '-6', 'route', 'add', 'default', 'via', 'fe80::1', 'dev', 'eth0');
  await ip('-n', node, '-6', 'route', 'replace', 'default', 'via', ROUTER6, 'dev', dev, 'table', String(table));
  for (const a of addrs) {
    await ip('-n', node, '-6', 'route', 'add', `${a}/128`, 'dev', hostSide);
    await ip('-n', node, '-6', 'rule', 'add', 'from', `${a}/128`, 'lookup', String(table), 'prio', '111');
    await ip('-n', node, '-6', 'rule', 'add', 'to', `${a}/128`, 'lookup', 'main', 'prio', '20');
  }
  return pod;
}

maybe('the emulated VPC carries IPv6 where the vSwitch has it (root)', () => {
  let eni: { id: string; mac: string; ipv6: string[] };
  let pod: string;
  let dev: string;
  const host = () => vpc.vpcHost!;

  it('gives the vpc-host an address of its vSwitch’s IPv6 CIDR', () => {
    expect(host().vSwitchId).toBe('vsw-j-pods');
    expect(host().ipv6).toMatch(/^2408:4005:3c0:a100:/);
  });

  it('delivers an ENI’s IPv6 addresses to its device, through the router’s link-local address, and back', async () => {
    const r: any = await ecs.request(
      'CreateNetworkInterface',
      { RegionId: REGION, VSwitchId: 'vsw-j-pods', SecurityGroupIds: ['sg-demo-pods'], Ipv6AddressCount: 3 },
      { method: 'POST' },
    );
    eni = { id: r.NetworkInterfaceId, mac: r.MacAddress, ipv6: r.Ipv6Sets.Ipv6Set.map((s: any) => s.Ipv6Address) };
    expect(eni.ipv6).toHaveLength(3);
    await attach({ ...eni, ips: [], vSwitchId: 'vsw-j-pods', gateway: '' }, 'i-demo-03');
    dev = (await eventually(() => deviceOf(N4, eni.mac), 3000)).ifname;
    pod = await pod6Behind(N4, dev, [eni.ipv6[1]!, '2408:4005:3c0:a100::dead'], 104);
    // The node's device may still be checking its own link-local address: a few tries.
    await eventually(async () => (await ping6(pod, host().ipv6!, eni.ipv6[1])).code === 0, 10_000, 300);
    const seen = JSON.parse(
      await inNs(pod, 'curl', '-sS', '--max-time', '3', `http://[${host().ipv6}]:${host().ports.http}/`),
    );
    expect(seen.client).toBe(eni.ipv6[1]);
    expect(await inNs(N4, 'ip', '-6', 'neigh', 'show', ROUTER6, 'dev', dev)).toMatch(/lladdr ee:ff:ff:ff:ff:ff/);
    // And from the host to the pod: delivered to the ENI's port, to its MAC.
    expect((await ping6(host().netns, eni.ipv6[1]!)).code).toBe(0);
  }, 30_000);

  it('drops what an ENI sends from an IPv6 address not its own, and stops delivering one unassigned', async () => {
    const before = (await vpc.drops(eni.id)).spoofed6;
    expect((await ping6(pod, host().ipv6!, '2408:4005:3c0:a100::dead')).code).not.toBe(0);
    expect((await vpc.drops(eni.id)).spoofed6).toBeGreaterThan(before);
    await ecs.request('UnassignIpv6Addresses', {
      RegionId: REGION,
      NetworkInterfaceId: eni.id,
      Ipv6Address: [eni.ipv6[1]!],
    });
    // In effect when the call answers: the same pod, the same address, now spoofed.
    const spoofed = (await vpc.drops(eni.id)).spoofed6;
    expect((await ping6(pod, host().ipv6!, eni.ipv6[1])).code).not.toBe(0);
    expect((await vpc.drops(eni.id)).spoofed6).toBeGreaterThan(spoofed);
    expect((await ping6(host().netns, eni.ipv6[1]!)).code).not.toBe(0);
  }, 30_000);

  let withPrefix: { id: string; mac: string; prefix: string };
  let podP: string;
  it('delivers every address of an ENI’s /80 prefix to that ENI’s device only, to its MAC, and takes them as its sources', async () => {
    const r: any = await ecs.request(
      'CreateNetworkInterface',
      { RegionId: REGION, VSwitchId: 'vsw-j-pods', SecurityGroupIds: ['sg-demo-pods'], Ipv6PrefixCount: 1 },
      { method: 'POST' },
    );
    withPrefix = { id: r.NetworkInterfaceId, mac: r.MacAddress, prefix: r.Ipv6PrefixSets.Ipv6PrefixSet[0].Ipv6Prefix };
    expect(withPrefix.prefix).toMatch(/^2408:4005:3c0:a100:[0-9a-f]{1,4}::\/80$/);
    await attach({ ...withPrefix, ips: [], vSwitchId: 'vsw-j-pods', gateway: '' }, 'i-demo-03');
    const devP = (await eventually(() => deviceOf(N4, withPrefix.mac), 3000)).ifname;
    // Two addresses far apart in the prefix, neither ever assigned one by one.
    const [near, far] = [addressIn(withPrefix.prefix, 5n), addressIn(withPrefix.prefix, 0xabcd_ef01_2345n)];
    podP = await pod6Behind(N4, devP, [near, far], 105);
    await eventually(async () => (await ping6(podP, host().ipv6!, near)).code === 0, 10_000, 300);
    const seen = JSON.parse(
      await inNs(
        podP,
        'curl',
        '-sS',
        '--max-time',
        '3',
        '--interface',
        far,
        `http://[${host().ipv6}]:${host().ports.http}/`,
      ),
    );
    expect(seen.client).toBe(far);
    expect((await vpc.drops(withPrefix.id)).spoofed6).toBe(0);

    // From the host: on this ENI's device, to its MAC; nothing on the other ENI's device of the node.
    const capture = startInNs(N4, ['tcpdump', '-i', devP, '-e', '-n', '-l', '-c', '1', `icmp6 and dst host ${far}`]);
    let captured = '';
    capture.stdout!.on('data', (d) => (captured += d));
    await sleep(800);
    const count = async () => [await rxPackets(N4, devP), await rxPackets(N4, dev)];
    const before = await count();
    for (let i = 0; i < 5; i++) expect((await ping6(host().netns, far)).code).toBe(0);
    const after = await count();
    expect(after[0]! - before[0]!).toBeGreaterThanOrEqual(5);
    expect(after[1]! - before[1]!).toBe(0);
    await Promise.race([once(capture, 'exit'), sleep(3000)]);
    capture.kill();
    expect(captured).toContain(`> ${withPrefix.mac}`);
    // An address of a /80 no ENI holds goes nowhere.
    const unheld = addressIn(withPrefix.prefix, (1n << 48n) + 5n);
    expect(emu.world.vSwitches.get('vsw-j-pods')!.pool6!.prefixOf(unheld)).toBeUndefined();
    const quiet = await count();
    expect((await ping6(host().netns, unheld)).code).not.toBe(0);
    expect(await count()).toEqual(quiet);
  }, 30_000);

  it('drops what another ENI sends from an address of the prefix, and stops delivering the prefix unassigned', async () => {
    // The first pod (behind the other ENI's device) sends from an address of the prefix: dropped at that port.
    const stolen = addressIn(withPrefix.prefix, 9n);
    await ip('-n', pod, 'addr', 'add', `${stolen}/128`, 'dev', 'eth0', 'nodad');
    await ip('-n', N4, '-6', 'route', 'add', `${stolen}/128`, 'dev', `pv${pod.slice(`${P}pod`.length)}`);
    await ip('-n', N4, '-6', 'rule', 'add', 'from', `${stolen}/128`, 'lookup', '104', 'prio', '111');
    const before = (await vpc.drops(eni.id)).spoofed6;
    expect((await ping6(pod, host().ipv6!, stolen)).code).not.toBe(0);
    expect((await vpc.drops(eni.id)).spoofed6).toBeGreaterThan(before);

    const [near, far] = [addressIn(withPrefix.prefix, 5n), addressIn(withPrefix.prefix, 0xabcd_ef01_2345n)];
    expect((await ping6(host().netns, far)).code).toBe(0);
    await ecs.request('UnassignIpv6Addresses', {
      RegionId: REGION,
      NetworkInterfaceId: withPrefix.id,
      Ipv6Prefix: [withPrefix.prefix],
    });
    // In effect when the call answers: not delivered, and the same pod's packets now spoofed.
    expect((await ping6(host().netns, far)).code).not.toBe(0);
    const spoofed = (await vpc.drops(withPrefix.id)).spoofed6;
    expect((await ping6(podP, host().ipv6!, near)).code).not.toBe(0);
    expect((await vpc.drops(withPrefix.id)).spoofed6).toBeGreaterThan(spoofed);
  }, 30_000);
});

maybe('the emulated VPC’s knobs: device names and late devices (root)', () => {
  let late: Vpc;
  beforeAll(async () => {
    late = await startVpc({
      world: emu.world,
      nodes: [{ instanceId: 'i-demo-07', netns: N3, primaryDevice: null }],
      prefix: `${P}k-`,
      vpcHost: false,
      deviceName: (e) => `enp0s${5 + (e.deviceIndex ?? 0)}`,
      deviceDelayMs: 1500,
    });
  });
  afterAll(() => late?.stop());

  it('names the device as told and plugs it 1.5 s after the ENI is InUse; the node’s own interfaces stay its own', async () => {
    const eni = await createEni('vsw-h-pods', 1);
    const inUse = await attach(eni, 'i-demo-07');
    await sleep(700);
    await late.sync();
    expect(await deviceOf(N3, eni.mac)).toBeUndefined();
    const dev = await eventually(() => deviceOf(N3, eni.mac), 3000, 20);
    expect(Date.now() - inUse).toBeGreaterThanOrEqual(1400);
    expect(dev.ifname).toBe('enp0s6');
    expect(dev.operstate).toBe('DOWN');
    // primaryDevice null: no eth0 made; the first VPC does not see this node.
    expect((await links(N3)).map((l) => l.ifname).sort()).toEqual(['enp0s6', 'lo']);
    expect(await deviceOf(N1, eni.mac)).toBeUndefined();
    // The instance released (its node scaled in): its ENIs are detached, their devices go.
    expect((await fetch(`${emu.url}/_emulator/instances/i-demo-07`, { method: 'DELETE' })).status).toBe(200);
    await eventually(async () => !(await deviceOf(N3, eni.mac)), 2000, 20);
  }, 20_000);
});

maybe('stopping the emulated VPC (root)', () => {
  it('removes every namespace, port and device it made, and frees the vpc-host’s address', async () => {
    const macs = [...emu.world.enis.values()].filter((e) => e.instanceId === 'i-demo-01').map((e) => e.mac);
    const { vSwitchId, ip: hostIp } = vpc.vpcHost!;
    expect(emu.world.vSwitches.get(vSwitchId)!.pool.isUsed(hostIp)).toBe(true);
    await vpc.stop();
    const left = (await sh('ip', ['netns', 'list'])).stdout;
    expect(left).not.toContain(`${P}vpc`);
    expect(left).not.toContain(`${P}host`);
    const devices = await links(N1);
    expect(devices.filter((l) => macs.includes(l.address))).toEqual([]);
    expect(devices.map((l) => l.ifname)).not.toContain('eth0');
    expect(emu.world.vSwitches.get(vSwitchId)!.pool.isUsed(hostIp)).toBe(false);
  });
});
