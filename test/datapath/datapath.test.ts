import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmdirSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { IpRouteKernel } from '../../src/agent/datapath/kernel.js';
import { inIpv6Prefix } from '../../src/ipam/ipv6-prefix.js';
import { prefixAddresses } from '../../src/ipam/prefix.js';
import { createLogger, silentLogger } from '../../src/observability/logger.js';
import { destination as pinoDestination } from 'pino';
import { vpcUnavailable, type Vpc } from '../../testbed/vpc/index.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { REGION, eventually, pop, sleep } from '../helpers/ecs.js';
import { ROOT } from '../helpers/helm.js';
import {
  MiniRuntime,
  SYSTEM_CNI_DIR,
  datapathUnavailable,
  deleteNamespaces,
  inNs,
  installCniPlugins,
  ip,
  sh,
  vpcNodes,
  startInNs,
  type PodSpec,
} from '../helpers/netns.js';

/*
 * Pods on secondary ENIs, as on a real ECS node, proven the way a pod uses the network: nodes are
 * network namespaces on the strict VPC emulation (testbed/vpc: an ENI InUse appears in its node as
 * a device with its MAC, DOWN; the VPC delivers each address to its ENI's device only and drops
 * what an ENI sends from an address not its own), the operator and both emulators, an agent per
 * node with its node routing (device up, a table per ENI, a rule pair per pod address), and pods
 * started by the shipped conflist (ptp + eni-ipam-cni + bandwidth) as a container runtime runs it.
 * A third node's agent runs with its node routing off: the negative control.
 */
const why = datapathUnavailable() ?? vpcUnavailable();
if (why) console.warn(`datapath test skipped: ${why}`);
const describeDatapath = why ? describe.skip : describe;

const P = `eipam${process.pid % 10000}-`;
const CONFLIST = join(ROOT, 'examples/10-eni-ipam.conflist');
const COOLDOWN_MS = 1000;
const TABLE_BASE = 3000;
/** The agent's rule priorities (docs/datapath.md: what the agent changes on a node). */
const INGRESS = 20;
const EGRESS = 111;

interface Node {
  name: string;
  instance: string;
  netns: string;
  dir: string;
  routing: boolean;
  agent: Agent;
  server: Server;
  runtime: MiniRuntime;
}
interface Pod extends PodSpec {
  node: Node;
  ip: string;
  /** Its IPv6 address, on a dual-stack node. */
  ipv6?: string;
}

let c: TestCluster;
let vpc: Vpc;
let bin: string;
const nodes: Node[] = [];
const pods: Pod[] = [];
const servers: ChildProcess[] = [];
let createdRunDir = false;

async function startAgent(n: Omit<Node, 'agent' | 'server'>): Promise<{ agent: Agent; server: Server }> {
  const agent = new Agent({
    kc: c.kc,
    node: n.name,
    stateDir: n.dir,
    cooldownMs: COOLDOWN_MS,
    statusIntervalMs: 100,
    logger: silentLogger(),
    registry: new Registry(),
    ...(n.routing
      ? {
          datapath: {
            config: { tableBase: TABLE_BASE, mtu: 1500 },
            kernel: new IpRouteKernel({ netns: n.netns }),
            deviceTimeoutMs: 5000,
            resyncMs: 60_000,
          },
        }
      : {}),
  });
  await agent.start();
  const server = await serveAgentApi(agent, join(n.dir, 'agent.sock'));
  await eventually(() => agent.ready, 15_000);
  return { agent, server };
}

async function startPod(node: Node, name: string, bandwidth?: PodSpec['bandwidth']): Promise<Pod> {
  const spec: PodSpec = { id: `ctr-${name}`, namespace: 'default', name, netns: `${P}${name}`, bandwidth };
  await ip('netns', 'add', spec.netns);
  // A runtime retries an ADD refused with "try again later" (code 11): the pool is being topped up.
  const result = await eventually(() => node.runtime.add(spec).catch(() => undefined), 30_000, 500);
  const ipv6 = result.ips[1]?.address.split('/')[0];
  const pod = { ...spec, node, ip: result.ips[0]!.address.split('/')[0]!, ...(ipv6 ? { ipv6 } : {}) };
  pods.push(pod);
  return pod;
}

async function stopPod(pod: Pod): Promise<void> {
  await pod.node.runtime.del(pod);
  await ip('netns', 'del', pod.netns);
  pods.splice(pods.indexOf(pod), 1);
}

/** The ENI of the cloud that holds an address. */
const eniOf = (addr: string) =>
  [...c.ecs.world.enis.values()].find(
    (e) => e.secondaryIps.includes(addr) || e.ipv4Prefixes.some((p) => prefixAddresses(p).includes(addr)),
  )!;
const primaryEniOf = (instance: string) => c.ecs.world.instances.get(instance)!.primaryEniId;
const rules = async (netns: string) =>
  (await inNs(netns, 'ip', '-4', 'rule', 'show'))
    .split('\n')
    .filter((l) => l.startsWith(`${INGRESS}:`) || l.startsWith(`${EGRESS}:`))
    .sort((a, b) => parseInt(a, 10) - parseInt(b, 10) || (a < b ? -1 : 1));

async function iperf(from: Pod, to: Pod, port: number): Promise<number> {
  const server = startInNs(to.netns, ['iperf3', '-s', '-1', '-p', String(port)]);
  servers.push(server);
  await eventually(async () => (await inNs(to.netns, 'ss', '-ltn')).includes(`:${port}`), 5000, 50);
  const out = await inNs(from.netns, 'iperf3', '-c', to.ip, '-p', String(port), '-t', '5', '-J');
  return JSON.parse(out).end.sum_received.bits_per_second as number;
}

/** What a capture on an ENI's port in the VPC sees while `act` runs (the VPC's side of the wire). */
async function captured(port: string, filter: string, act: () => Promise<unknown>): Promise<string> {
  const capture = startInNs(vpc.netns, ['tcpdump', '-i', port, '-n', '-l', '-e', filter]);
  servers.push(capture);
  let seen = '';
  capture.stdout!.on('data', (d) => (seen += d));
  await sleep(800);
  await act();
  await sleep(500);
  capture.kill('SIGINT');
  await Promise.race([once(capture, 'exit'), sleep(3000)]);
  return seen;
}

/**
 * Negative control: once the ENI no longer holds an address of `pod` (taken off it through the
 * ECS API: `action` with `params`), the VPC drops what the pod sends from it, as spoofed.
 */
async function droppedOnceUnassigned(
  pod: Pod,
  eniId: string,
  action: 'UnassignPrivateIpAddresses' | 'UnassignIpv6Addresses',
  params: Record<string, string>,
  to: string,
): Promise<void> {
  await pop(c.ecs.url).request(action, { RegionId: REGION, NetworkInterfaceId: eniId, ...params }, { method: 'POST' });
  const counter = action === 'UnassignIpv6Addresses' ? 'spoofed6' : 'spoofed';
  const before = (await vpc.drops(eniId))[counter];
  const family = to.includes(':') ? ['-6'] : [];
  const lost = await sh('ip', ['netns', 'exec', pod.netns, 'ping', ...family, '-c', '3', '-i', '0.2', '-W', '1', to]);
  expect(lost.stdout).toMatch(/100% packet loss/);
  await eventually(async () => (await vpc.drops(eniId))[counter] >= before + 3, 5000, 100);
}

beforeAll(async () => {
  if (why) return;
  deleteNamespaces(P);
  if (!existsSync('/run/eni-ipam')) {
    mkdirSync('/run/eni-ipam', { recursive: true });
    createdRunDir = true;
  }
  c = await testCluster();
  const common = { securityGroupIDs: ['sg-demo-pods'], preAllocate: 3, releaseDelaySeconds: 0, deleteEmptyENIs: true };
  // Two vSwitches of zone h: pods of node 1 in vsw-h-pods, of node 2 in vsw-h-pods-2.
  await c.addClass('a', { ...common, vSwitchIDs: ['vsw-h-pods'], nodeSelector: { matchLabels: { datapath: 'a' } } });
  await c.addClass('b', { ...common, vSwitchIDs: ['vsw-h-pods-2'], nodeSelector: { matchLabels: { datapath: 'b' } } });
  // Node 4's pods take secondary addresses of its primary ENI (usePrimaryENI), in the node's vSwitch.
  await c.addClass('p', {
    ...common,
    vSwitchIDs: ['vsw-h-pods'],
    usePrimaryENI: true,
    nodeSelector: { matchLabels: { datapath: 'p' } },
  });
  // Node 5's ENIs hold /28 prefixes (ipv4Mode Prefix): its pods' addresses are in them.
  await c.addClass('x', {
    ...common,
    vSwitchIDs: ['vsw-h-pods'],
    ipv4Mode: 'Prefix',
    nodeSelector: { matchLabels: { datapath: 'x' } },
  });
  // Nodes 6 and 7 (zone j) are dual-stack: vsw-j-pods has an IPv6 CIDR. Node 6's ENIs hold single
  // IPv6 addresses, node 7's one /80 each (ipv6Mode Prefix).
  await c.addClass('d', {
    ...common,
    vSwitchIDs: ['vsw-j-pods'],
    ipFamilies: ['IPv4', 'IPv6'],
    nodeSelector: { matchLabels: { datapath: 'd' } },
  });
  await c.addClass('dp', {
    ...common,
    vSwitchIDs: ['vsw-j-pods'],
    ipFamilies: ['IPv4', 'IPv6'],
    ipv6Mode: 'Prefix',
    nodeSelector: { matchLabels: { datapath: 'dp' } },
  });
  // Nodes 8 and 9 (zone j) are IPv6-only: their pods have an IPv6 address and no IPv4 one. Node 8's
  // are single addresses of its ENIs.
  await c.addClass('six', {
    ...common,
    vSwitchIDs: ['vsw-j-pods'],
    ipFamilies: ['IPv6'],
    nodeSelector: { matchLabels: { datapath: 'six' } },
  });
  // Node 9's pods take theirs from one /80 (ipv6Mode Prefix).
  await c.addClass('six80', {
    ...common,
    vSwitchIDs: ['vsw-j-pods'],
    ipFamilies: ['IPv6'],
    ipv6Mode: 'Prefix',
    nodeSelector: { matchLabels: { datapath: 'six80' } },
  });
  // Node 10 (zone j) is dual-stack on its primary ENI (usePrimaryENI): vsw-j-nodes has an IPv6 CIDR.
  await c.addClass('p6', {
    ...common,
    vSwitchIDs: ['vsw-j-pods'],
    ipFamilies: ['IPv4', 'IPv6'],
    usePrimaryENI: true,
    nodeSelector: { matchLabels: { datapath: 'p6' } },
  });
  await c.startOperator();
  // ecs.g7.large (2 secondary ENIs × 5 pod addresses), ecs.g7.xlarge, ecs.c7.2xlarge.
  const plan = [
    { instance: 'i-demo-01', label: 'a', routing: true },
    { instance: 'i-demo-04', label: 'b', routing: true },
    { instance: 'i-demo-07', label: 'a', routing: false },
    { instance: 'i-demo-10', label: 'p', routing: true },
    { instance: 'i-demo-13', label: 'x', routing: true },
    { instance: 'i-demo-03', label: 'd', routing: true },
    { instance: 'i-demo-06', label: 'dp', routing: true },
    { instance: 'i-demo-09', label: 'six', routing: true },
    { instance: 'i-demo-12', label: 'six80', routing: true },
    { instance: 'i-demo-15', label: 'p6', routing: true },
  ];
  const names = await Promise.all(plan.map((p) => c.addNode(p.instance, { datapath: p.label })));
  await allReady(c, names, 30_000);

  bin = await installCniPlugins([CONFLIST]);
  // The VPC makes each node's eth0 (its primary ENI, as the image's DHCP would) and its ENI devices.
  let netnses: string[];
  ({ netnses, vpc } = await vpcNodes({
    world: c.ecs.world,
    instances: plan.map((p) => p.instance),
    prefix: P,
    logger: process.env.DEBUG_VPC ? createLogger({ level: 'debug' }, pinoDestination('/tmp/vpc.log')) : undefined,
  }));
  for (const [k, p] of plan.entries()) {
    const n = {
      name: names[k]!,
      instance: p.instance,
      netns: netnses[k]!,
      dir: mkdtempSync(join(tmpdir(), `agent-${k}-`)),
      routing: p.routing,
      runtime: undefined as unknown as MiniRuntime,
    };
    n.runtime = new MiniRuntime(CONFLIST, [bin, SYSTEM_CNI_DIR], { netns: n.netns, socketDir: n.dir });
    nodes.push({ ...n, ...(await startAgent(n)) });
  }
}, 120_000);

afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  for (const n of nodes) {
    n.server.close();
    await n.agent.stop();
  }
  await vpc?.stop();
  await c?.close();
  if (!why) deleteNamespaces(P);
  if (createdRunDir && readdirSync('/run/eni-ipam').length === 0) rmdirSync('/run/eni-ipam');
});

describeDatapath('pods on secondary ENIs, on the strict VPC, through the shipped CNI chain', () => {
  it('gives three pods on each routed node addresses of their own node’s ENIs, on two vSwitches', async () => {
    const [n1, n2] = nodes;
    for (const n of [n1!, n2!]) for (const k of [1, 2, 3]) await startPod(n, `${n.netns.slice(P.length)}-pod${k}`);
    await eventually(
      async () => {
        for (const pod of pods) if (!(await c.pool(pod.node.name)).status?.used?.[pod.ip]) return false;
        return true;
      },
      10_000,
      50,
    );
    for (const pod of pods) {
      const pool = await c.pool(pod.node.name);
      expect(pool.status!.enis!.some((e) => e.ips!.includes(pod.ip))).toBe(true);
      expect(pool.status!.used![pod.ip]).toMatchObject({ pod: `default/${pod.name}`, containerID: pod.id });
      // A secondary address of an ENI of the pod's own node (an ENI's own primary is the node's).
      const eni = eniOf(pod.ip);
      expect(eni.instanceId).toBe(pod.node.instance);
      expect(eni.primaryIp).not.toBe(pod.ip);
    }
    expect(new Set(pods.filter((p) => p.node === n1).map((p) => eniOf(p.ip).vSwitchId))).toEqual(
      new Set(['vsw-h-pods']),
    );
    expect(new Set(pods.filter((p) => p.node === n2).map((p) => eniOf(p.ip).vSwitchId))).toEqual(
      new Set(['vsw-h-pods-2']),
    );
    expect(new Set(pods.map((p) => p.ip)).size).toBe(6);
  }, 90_000);

  it('sets the node up as docs/datapath.md says: each ENI’s device up, a table per ENI, two rules per pod; eth0 and main untouched', async () => {
    const n1 = nodes[0]!;
    const pool = await c.pool(n1.name);
    for (const e of pool.status!.enis!.filter((x) => x.state === 'InUse')) {
      // Brought up at the agent's reconcile of the pool change that published it.
      const link = await eventually(
        async () =>
          (JSON.parse(await inNs(n1.netns, 'ip', '-j', 'link', 'show')) as Array<Record<string, unknown>>).find(
            (l) => l.address === e.mac && l.operstate === 'UP',
          ),
        10_000,
        100,
      );
      expect(link).toMatchObject({ mtu: 1500, operstate: 'UP' });
      const table = await inNs(n1.netns, 'ip', 'route', 'show', 'table', String(TABLE_BASE + e.deviceIndex!));
      expect(table).toContain(`${e.gatewayIP} dev ${link.ifname} proto 236 scope link`);
      expect(table).toContain(`default via ${e.gatewayIP} dev ${link.ifname} proto 236`);
    }
    for (const pod of pods.filter((p) => p.node === n1)) {
      const table = TABLE_BASE + pool.status!.enis!.find((e) => e.ips!.includes(pod.ip))!.deviceIndex!;
      const mine = (await rules(n1.netns)).filter((l) => l.includes(` ${pod.ip} `));
      expect(mine).toEqual([
        `${INGRESS}:\tfrom all to ${pod.ip} lookup main proto 236`,
        `${EGRESS}:\tfrom ${pod.ip} lookup ${table} proto 236`,
      ]);
    }
    // The node's own network: eth0 (the primary ENI, as its DHCP set it) and the main table's default route.
    expect(await inNs(n1.netns, 'ip', 'route', 'show', 'default')).toMatch(/^default via 192\.168\.0\.253 dev eth0/);
  }, 30_000);

  it('connects every pod to every other pod, across nodes and vSwitches, and to a host of the VPC, by ping and TCP', async () => {
    const host = vpc.vpcHost!;
    for (const p of pods)
      servers.push(
        startInNs(p.netns, [
          'node',
          '-e',
          `require('net').createServer((s) => s.end('hello from ${p.name}\\n')).listen(7000)`,
        ]),
      );
    for (const p of pods) await eventually(async () => (await inNs(p.netns, 'ss', '-ltn')).includes(':7000'), 5000, 50);
    const client =
      "const s=require('net').connect(+process.argv[2],process.argv[1]);s.setEncoding('utf8');s.on('data',(d)=>process.stdout.write(d));s.on('error',(e)=>{console.error(e.message);process.exit(1)})";
    for (const a of pods) {
      for (const b of pods) {
        if (a === b) continue;
        await inNs(a.netns, 'ping', '-c', '1', '-W', '2', b.ip);
        expect(await inNs(a.netns, 'node', '-e', client, b.ip, '7000')).toBe(`hello from ${b.name}\n`);
      }
      await inNs(a.netns, 'ping', '-c', '1', '-W', '2', host.ip);
      // The VPC host sees the pod's own address: no masquerade, no overlay.
      const answer = await inNs(a.netns, 'curl', '-s', '--max-time', '3', `http://${host.ip}/`);
      expect(JSON.parse(answer)).toMatchObject({ client: a.ip });
    }
  }, 120_000);

  it('usePrimaryENI: pods get secondary addresses of the node’s primary ENI, leave by eth0, and reach pods of other nodes and the VPC host', async () => {
    const node = nodes[3]!;
    const primary = primaryEniOf(node.instance);
    const [p1, p2] = [await startPod(node, 'primary-1'), await startPod(node, 'primary-2')];
    const eni = c.ecs.world.enis.get(primary)!;
    for (const p of [p1, p2]) expect(eni.secondaryIps).toContain(p.ip);
    expect([p1.ip, p2.ip]).not.toContain(eni.primaryIp);
    const pool = await c.pool(node.name);
    expect(pool.status!.enis!.find((e) => e.id === primary)).toMatchObject({
      deviceIndex: 0,
      vSwitchID: 'vsw-h-nodes',
    });
    // Its pods leave by the main table: the node's own interface, which the agent never changes.
    expect((await rules(node.netns)).filter((l) => l.includes(` ${p1.ip} `))).toEqual([
      `${INGRESS}:\tfrom all to ${p1.ip} lookup main proto 236`,
      `${EGRESS}:\tfrom ${p1.ip} lookup main proto 236`,
    ]);
    const host = vpc.vpcHost!;
    const [other1, other2] = [pods[0]!, pods[3]!];
    for (const target of [other1.ip, other2.ip, host.ip]) await inNs(p1.netns, 'ping', '-c', '1', '-W', '2', target);
    await inNs(other1.netns, 'ping', '-c', '1', '-W', '2', p1.ip);
    const answer = await inNs(p1.netns, 'curl', '-s', '--max-time', '3', `http://${host.ip}/`);
    expect(JSON.parse(answer)).toMatchObject({ client: p1.ip });
    // The VPC sees them on the primary ENI's port, from its MAC.
    const seen = await captured(vpc.portOf(primary)!, `icmp and src host ${p1.ip}`, () =>
      inNs(p1.netns, 'ping', '-c', '3', '-i', '0.2', '-W', '2', host.ip),
    );
    expect(seen).toMatch(new RegExp(`^\\S+ ${eni.mac} > `, 'm'));
    // Negative control: an address the primary ENI no longer holds is neither delivered nor let out.
    await droppedOnceUnassigned(p2, primary, 'UnassignPrivateIpAddresses', { 'PrivateIpAddress.1': p2.ip }, host.ip);
    await inNs(p1.netns, 'ping', '-c', '1', '-W', '2', host.ip);
  }, 60_000);

  it('ipv4Mode Prefix: pods get addresses of their ENI’s /28, reach pods of other nodes and the VPC host, and the VPC takes them from that ENI alone', async () => {
    const node = nodes[4]!;
    const [x1, x2] = [await startPod(node, 'prefix-1'), await startPod(node, 'prefix-2')];
    const eni = eniOf(x1.ip);
    expect(eni.secondaryIps).toEqual([]);
    expect(eni.ipv4Prefixes).toHaveLength(1);
    const prefix = eni.ipv4Prefixes[0]!;
    for (const p of [x1, x2]) expect(prefixAddresses(prefix)).toContain(p.ip);
    const host = vpc.vpcHost!;
    for (const target of [pods[0]!.ip, pods[3]!.ip, host.ip])
      await inNs(x1.netns, 'ping', '-c', '1', '-W', '2', target);
    await inNs(pods[0]!.netns, 'ping', '-c', '1', '-W', '2', x2.ip);
    const answer = await inNs(x2.netns, 'curl', '-s', '--max-time', '3', `http://${host.ip}/`);
    expect(JSON.parse(answer)).toMatchObject({ client: x2.ip });
    const seen = await captured(vpc.portOf(eni.id)!, `icmp and src host ${x1.ip}`, () =>
      inNs(x1.netns, 'ping', '-c', '3', '-i', '0.2', '-W', '2', host.ip),
    );
    expect(seen).toMatch(new RegExp(`^\\S+ ${eni.mac} > `, 'm'));
    // Negative control: once the ENI no longer holds the prefix, its addresses are neither delivered nor let out.
    await droppedOnceUnassigned(x1, eni.id, 'UnassignPrivateIpAddresses', { 'Ipv4Prefix.1': prefix }, host.ip);
  }, 60_000);

  it('dual-stack: pods get an IPv4 and an IPv6 address of one ENI (a single one, or one of its /80), reach each other across nodes and the VPC host in both families, through that ENI', async () => {
    const [d1, d2] = [nodes[5]!, nodes[6]!];
    const [a, b] = [await startPod(d1, 'dual-1'), await startPod(d2, 'dual-2')];
    const host = vpc.vpcHost!;
    for (const p of [a, b]) {
      expect(p.ipv6).toMatch(/^2408:4005:3c0:a100:/);
      // Both addresses on one ENI of the pod's own node, both reported in use.
      const eni = eniOf(p.ip);
      expect(eni.instanceId).toBe(p.node.instance);
      await eventually(async () => Boolean((await c.pool(p.node.name)).status?.used?.[p.ipv6!]), 10_000, 50);
    }
    // Node 6's pod has a single IPv6 address of its ENI; node 7's an address of its ENI's /80.
    expect(eniOf(a.ip).ipv6).toContain(a.ipv6);
    const prefixB = eniOf(b.ip).ipv6Prefixes.find((p) => inIpv6Prefix(b.ipv6!, p));
    expect(prefixB).toBeDefined();
    expect(eniOf(b.ip).ipv6).toEqual([]);
    const pool = await c.pool(d1.name);
    const published = pool.status!.enis!.find((e) => e.ipv6s?.includes(a.ipv6!))!;
    expect(published).toMatchObject({
      vSwitchIPv6CIDR: '2408:4005:3c0:a100::/64',
      gatewayIPv6: 'fe80::ecff:ffff:feff:ffff',
    });
    const table = TABLE_BASE + published.deviceIndex!;
    const rules6 = await inNs(d1.netns, 'ip', '-6', 'rule', 'show');
    expect(rules6).toContain(`${INGRESS}:\tfrom all to ${a.ipv6} lookup main proto 236`);
    expect(rules6).toContain(`${EGRESS}:\tfrom ${a.ipv6} lookup ${table} proto 236`);
    expect(await inNs(d1.netns, 'ip', '-6', 'route', 'show', 'table', String(table))).toMatch(
      /^default via fe80::ecff:ffff:feff:ffff dev \S+ proto 236/m,
    );
    // Both families, both ways, across nodes; and to the VPC host, which sees the pod's own addresses.
    const ping6 = (p: Pod, to: string) => inNs(p.netns, 'ping', '-6', '-c', '1', '-W', '2', to);
    await eventually(() => ping6(a, b.ipv6!).then(() => true), 10_000, 300);
    await ping6(b, a.ipv6!);
    await inNs(a.netns, 'ping', '-c', '1', '-W', '2', b.ip);
    await ping6(a, host.ipv6!);
    const answer = await inNs(a.netns, 'curl', '-s', '--max-time', '3', `http://[${host.ipv6}]/`);
    expect(JSON.parse(answer)).toMatchObject({ client: a.ipv6 });
    expect(JSON.parse(await inNs(a.netns, 'curl', '-s', '--max-time', '3', `http://${host.ip}/`))).toMatchObject({
      client: a.ip,
    });
    // The VPC sees the pod's IPv6 packets on its ENI's port, from that ENI's MAC.
    const eni = eniOf(a.ip);
    const seen = await captured(vpc.portOf(eni.id)!, `icmp6 and src host ${a.ipv6}`, () =>
      inNs(a.netns, 'ping', '-6', '-c', '3', '-i', '0.2', '-W', '2', host.ipv6!),
    );
    expect(seen).toMatch(new RegExp(`^\\S+ ${eni.mac} > `, 'm'));
    // Negative control: without the agent's IPv6 egress rule the pod's packets do not leave by its ENI.
    const egress = `priority ${EGRESS} protocol 236 from ${a.ipv6}/128 lookup ${table}`.split(' ');
    await inNs(d1.netns, 'ip', '-6', 'rule', 'del', ...egress);
    const cut = await sh('ip', ['netns', 'exec', a.netns, 'ping', '-6', '-c', '2', '-i', '0.2', '-W', '1', host.ipv6!]);
    expect(cut.code).not.toBe(0);
    await inNs(d1.netns, 'ip', '-6', 'rule', 'add', ...egress);
    await ping6(a, host.ipv6!);
    // And once the ENI no longer holds the pod's IPv6 address, the VPC drops what the pod sends from it.
    await droppedOnceUnassigned(a, eni.id, 'UnassignIpv6Addresses', { 'Ipv6Address.1': a.ipv6! }, host.ipv6!);
    // The same for the /80: delivered whole to its ENI while it holds it, dropped once it does not.
    await ping6(b, host.ipv6!);
    await droppedOnceUnassigned(b, eniOf(b.ip).id, 'UnassignIpv6Addresses', { 'Ipv6Prefix.1': prefixB! }, host.ipv6!);
    // A DEL takes both addresses back and both families' rules off the node.
    await stopPod(b);
    expect(await inNs(d2.netns, 'ip', '-6', 'rule', 'show')).not.toContain(b.ipv6!);
    expect(await inNs(d2.netns, 'ip', '-4', 'rule', 'show')).not.toContain(` ${b.ip} `);
    await eventually(async () => {
      const used = (await c.pool(d2.name)).status?.used ?? {};
      return !(b.ip in used) && !(b.ipv6! in used);
    }, 10_000);
  }, 90_000);

  it('IPv6-only: pods get one IPv6 address of their node’s ENI (a single one, or one of its /80) and no IPv4 one, and reach each other across nodes and the VPC host through that ENI', async () => {
    const [s1, s2] = [nodes[7]!, nodes[8]!];
    const [a, b] = [await startPod(s1, 'six-1'), await startPod(s2, 'six-2')];
    const host = vpc.vpcHost!;
    const eniOf6 = (addr: string) =>
      [...c.ecs.world.enis.values()].find(
        (e) => e.ipv6.includes(addr) || e.ipv6Prefixes.some((p) => inIpv6Prefix(addr, p)),
      )!;
    for (const p of [a, b]) {
      // The one address of the result is IPv6, of an ENI of the pod's own node that holds no IPv4 for pods.
      expect(p.ip).toMatch(/^2408:4005:3c0:a100:/);
      expect(p.ipv6).toBeUndefined();
      const eni = eniOf6(p.ip);
      expect(eni.instanceId).toBe(p.node.instance);
      expect(eni.secondaryIps).toEqual([]);
      await eventually(async () => Boolean((await c.pool(p.node.name)).status?.used?.[p.ip]), 10_000, 50);
      expect(await inNs(p.netns, 'ip', '-4', 'addr', 'show', 'dev', 'eth0')).not.toContain('inet ');
    }
    // Node 8's pod holds a single address of its ENI, node 9's one of its ENI's /80 (which holds no single one).
    expect(eniOf6(a.ip).ipv6).toContain(a.ip);
    const prefixB = eniOf6(b.ip).ipv6Prefixes.find((p) => inIpv6Prefix(b.ip, p));
    expect(prefixB).toBeDefined();
    expect(eniOf6(b.ip).ipv6).toEqual([]);
    const table = TABLE_BASE + (await c.pool(s1.name)).status!.enis!.find((e) => e.ipv6s?.includes(a.ip))!.deviceIndex!;
    expect(await inNs(s1.netns, 'ip', '-6', 'rule', 'show')).toContain(
      `${EGRESS}:\tfrom ${a.ip} lookup ${table} proto 236`,
    );
    const ping6 = (p: Pod, to: string) => inNs(p.netns, 'ping', '-6', '-c', '1', '-W', '2', to);
    await eventually(() => ping6(a, b.ip).then(() => true), 10_000, 300);
    await ping6(b, a.ip);
    await ping6(a, host.ipv6!);
    const answer = await inNs(b.netns, 'curl', '-s', '--max-time', '3', `http://[${host.ipv6}]/`);
    expect(JSON.parse(answer)).toMatchObject({ client: b.ip });
    // And to a dual-stack pod of another node, by its IPv6 address (the dual-stack test's pods are gone or cut off).
    const dual = await startPod(nodes[5]!, 'dual-3');
    await eventually(() => ping6(a, dual.ipv6!).then(() => true), 5000, 300);
    const eni = eniOf6(a.ip);
    const seen = await captured(vpc.portOf(eni.id)!, `icmp6 and src host ${a.ip}`, () =>
      inNs(a.netns, 'ping', '-6', '-c', '3', '-i', '0.2', '-W', '2', host.ipv6!),
    );
    expect(seen).toMatch(new RegExp(`^\\S+ ${eni.mac} > `, 'm'));
    // Negative control: an address the ENI no longer holds is neither delivered nor let out.
    await droppedOnceUnassigned(a, eni.id, 'UnassignIpv6Addresses', { 'Ipv6Address.1': a.ip }, host.ipv6!);
    // The same for node 9's /80: delivered whole to its ENI while it holds it, dropped once it does not.
    await ping6(b, host.ipv6!);
    await droppedOnceUnassigned(b, eniOf6(b.ip).id, 'UnassignIpv6Addresses', { 'Ipv6Prefix.1': prefixB! }, host.ipv6!);
    await stopPod(b);
    expect(await inNs(s2.netns, 'ip', '-6', 'rule', 'show')).not.toContain(b.ip);
  }, 90_000);

  it('usePrimaryENI with dual-stack: a pod gets an IPv4 and an IPv6 address of the primary ENI, leaves by eth0 in both families, and reaches pods of other nodes and the VPC host', async () => {
    const node = nodes[9]!;
    const primary = primaryEniOf(node.instance);
    const pod = await startPod(node, 'primary-dual');
    const host = vpc.vpcHost!;
    const eni = c.ecs.world.enis.get(primary)!;
    expect(eni.secondaryIps).toContain(pod.ip);
    expect(eni.ipv6).toContain(pod.ipv6);
    expect(pod.ipv6).toMatch(/^2408:4005:3c0:a000:/);
    const published = (await c.pool(node.name)).status!.enis!.find((e) => e.id === primary)!;
    expect(published).toMatchObject({ deviceIndex: 0, gatewayIPv6: 'fe80::ecff:ffff:feff:ffff' });
    // IPv4 by main (the node's own default route); IPv6 by the primary ENI's own table, base + 0.
    const rules6 = await inNs(node.netns, 'ip', '-6', 'rule', 'show');
    expect(rules6).toContain(`${EGRESS}:\tfrom ${pod.ipv6} lookup ${TABLE_BASE} proto 236`);
    expect(await inNs(node.netns, 'ip', '-4', 'rule', 'show')).toContain(
      `${EGRESS}:\tfrom ${pod.ip} lookup main proto 236`,
    );
    expect(await inNs(node.netns, 'ip', '-6', 'route', 'show', 'table', String(TABLE_BASE))).toMatch(
      /^default via fe80::ecff:ffff:feff:ffff dev eth0 proto 236/m,
    );
    const ping6 = (to: string) => inNs(pod.netns, 'ping', '-6', '-c', '1', '-W', '2', to);
    await eventually(() => ping6(host.ipv6!).then(() => true), 10_000, 300);
    const answer = await inNs(pod.netns, 'curl', '-s', '--max-time', '3', `http://[${host.ipv6}]/`);
    expect(JSON.parse(answer)).toMatchObject({ client: pod.ipv6 });
    await inNs(pod.netns, 'ping', '-c', '1', '-W', '2', host.ip);
    // To a dual-stack pod of a secondary ENI on another node, in both families.
    const other = await startPod(nodes[5]!, 'dual-peer');
    await eventually(() => ping6(other.ipv6!).then(() => true), 10_000, 300);
    await inNs(other.netns, 'ping', '-6', '-c', '1', '-W', '2', pod.ipv6!);
    await inNs(pod.netns, 'ping', '-c', '1', '-W', '2', other.ip);
    // The VPC sees its IPv6 packets on the primary ENI's port, from its MAC.
    const seen = await captured(vpc.portOf(primary)!, `icmp6 and src host ${pod.ipv6}`, () =>
      inNs(pod.netns, 'ping', '-6', '-c', '3', '-i', '0.2', '-W', '2', host.ipv6!),
    );
    expect(seen).toMatch(new RegExp(`^\\S+ ${eni.mac} > `, 'm'));
    // Negative control: without the primary ENI's IPv6 table the pod's IPv6 goes nowhere (main has no IPv6 default).
    const route = [
      'default',
      'via',
      'fe80::ecff:ffff:feff:ffff',
      'dev',
      'eth0',
      'table',
      String(TABLE_BASE),
      'proto',
      '236',
      'metric',
      '1024',
    ];
    await inNs(node.netns, 'ip', '-6', 'route', 'del', ...route);
    const cut = await sh('ip', [
      'netns',
      'exec',
      pod.netns,
      'ping',
      '-6',
      '-c',
      '2',
      '-i',
      '0.2',
      '-W',
      '1',
      host.ipv6!,
    ]);
    expect(cut.code).not.toBe(0);
    await inNs(node.netns, 'ip', '-6', 'route', 'add', ...route);
    await ping6(host.ipv6!);
    // And once the primary ENI no longer holds the pod's IPv6 address, the VPC drops what it sends from it.
    await droppedOnceUnassigned(pod, primary, 'UnassignIpv6Addresses', { 'Ipv6Address.1': pod.ipv6! }, host.ipv6!);
    await stopPod(other);
  }, 90_000);

  it('sends each pod’s packets out of its own ENI: the VPC sees them on that ENI’s port, none on the primary’s', async () => {
    const host = vpc.vpcHost!;
    for (const pod of [pods[0]!, pods[3]!]) {
      const eni = eniOf(pod.ip);
      const ping = () => inNs(pod.netns, 'ping', '-c', '3', '-i', '0.2', '-W', '2', host.ip);
      const onEni = await captured(vpc.portOf(eni.id)!, `icmp and src host ${pod.ip}`, ping);
      // The pod's own address, from the ENI's own MAC (the node's device), to the gateway's.
      expect(onEni).toMatch(
        new RegExp(`^\\S+ ${eni.mac} > ee:ff:ff:ff:ff:ff, .* ${pod.ip.replace(/\./g, '\\.')} > `, 'm'),
      );
      expect(onEni.split('\n').filter((l) => l.includes('ICMP echo request')).length).toBeGreaterThanOrEqual(3);
      const onPrimary = await captured(vpc.portOf(primaryEniOf(pod.node.instance))!, `src host ${pod.ip}`, ping);
      expect(onPrimary.split('\n').filter((l) => l.includes(pod.ip))).toEqual([]);
    }
  }, 60_000);

  it('carries a full 1500-byte packet with DF set, and not one byte more; no encapsulation on the wire', async () => {
    const [a, b] = [pods.find((p) => p.node === nodes[0])!, pods.find((p) => p.node === nodes[1])!];
    await inNs(a.netns, 'ping', '-c', '1', '-W', '2', '-M', 'do', '-s', '1472', b.ip);
    await inNs(a.netns, 'ping', '-c', '1', '-W', '2', '-M', 'do', '-s', '1472', vpc.vpcHost!.ip);
    const tooBig = await sh('ip', [
      'netns',
      'exec',
      a.netns,
      'ping',
      '-c',
      '1',
      '-W',
      '2',
      '-M',
      'do',
      '-s',
      '1473',
      b.ip,
    ]);
    expect(tooBig.code).not.toBe(0);
    expect(tooBig.stdout + tooBig.stderr).toMatch(/message too long|mtu=1500/i);
    const seen = await captured(vpc.portOf(eniOf(a.ip).id)!, `icmp and src host ${a.ip} and dst host ${b.ip}`, () =>
      inNs(a.netns, 'ping', '-c', '2', '-W', '2', '-M', 'do', '-s', '1472', b.ip),
    );
    expect(seen).toMatch(/ethertype IPv4 \(0x0800\), length 1514: /);
    expect(seen).not.toMatch(/UDP|VXLAN|GRE|ipip/i);
  }, 30_000);

  it('holds a pod with egress-bandwidth 4M to about 4 Mbit/s, while an unlimited pod on the node goes at least 50 times faster', async () => {
    const node = nodes[0]!;
    // As kubelet turns kubernetes.io/egress-bandwidth: 4M into the runtime's bandwidth capability.
    const limited = await startPod(node, 'limited', { egressRate: 4_000_000, egressBurst: 256_000 });
    const free = await startPod(node, 'unlimited');
    const target = pods.find((p) => p.node === nodes[1])!;
    const slow = await iperf(limited, target, 5201);
    const fast = await iperf(free, target, 5202);
    expect(slow).toBeGreaterThanOrEqual(3.5e6);
    expect(slow).toBeLessThanOrEqual(4.5e6);
    expect(fast).toBeGreaterThanOrEqual(50 * slow);
    expect(await inNs(node.netns, 'tc', 'qdisc', 'show')).toMatch(/qdisc tbf .* rate 4Mbit/);
    await stopPod(limited);
    await stopPod(free);
  }, 90_000);

  it('negative control: with the agent’s node routing off, the same pods cannot reach the VPC (their packets leave by eth0 and the VPC drops them)', async () => {
    const control = nodes[2]!;
    const pod = await startPod(control, 'control-pod');
    const eni = eniOf(pod.ip);
    expect(eni.instanceId).toBe(control.instance);
    const before = await vpc.drops(primaryEniOf(control.instance));
    const ping = await sh('ip', [
      'netns',
      'exec',
      pod.netns,
      'ping',
      '-c',
      '3',
      '-i',
      '0.2',
      '-W',
      '1',
      vpc.vpcHost!.ip,
    ]);
    expect(ping.code).not.toBe(0);
    expect(ping.stdout).toMatch(/100% packet loss/);
    // The VPC's anti-spoofing: a pod address of eni-X sent from the primary ENI is not that ENI's.
    await eventually(
      async () => (await vpc.drops(primaryEniOf(control.instance))).spoofed >= before.spoofed + 3,
      5000,
      100,
    );
    expect(await rules(control.netns)).toEqual([]);
    await stopPod(pod);
  }, 30_000);

  it('restarts the agent with pods running: a ping through it loses at most a few packets, no rule is added twice, a stale rule goes', async () => {
    const n1 = nodes[0]!;
    const pod = pods.find((p) => p.node === n1)!;
    const before = await rules(n1.netns);
    // A rule an earlier agent left for an address no pod holds any more (ours: priority and protocol).
    const table = (await c.pool(n1.name)).status!.enis!.find((e) => e.ips!.includes(pod.ip))!.deviceIndex! + TABLE_BASE;
    await inNs(
      n1.netns,
      'ip',
      'rule',
      'add',
      'from',
      '192.168.16.254/32',
      'lookup',
      String(table),
      'priority',
      String(EGRESS),
      'protocol',
      '236',
    );
    const ping = startInNs(pod.netns, ['ping', '-i', '0.1', '-c', '60', '-W', '1', vpc.vpcHost!.ip]);
    servers.push(ping);
    let out = '';
    ping.stdout!.on('data', (d) => (out += d));
    await sleep(1500);
    n1.server.close();
    await n1.agent.stop();
    await sleep(1000);
    Object.assign(n1, await startAgent(n1));
    await once(ping, 'exit');
    const received = Number(/(\d+) received/.exec(out)?.[1] ?? 0);
    expect(received).toBeGreaterThanOrEqual(57);
    await eventually(async () => JSON.stringify(await rules(n1.netns)) === JSON.stringify(before), 10_000, 200);
    expect(await rules(n1.netns)).toEqual(before);
  }, 60_000);

  it('scales down: an ENI emptied and detached takes its device, its table and its rules with it', async () => {
    const n1 = nodes[0]!;
    // Fill the node past one ENI (5 pod addresses each), then let the second ENI empty out.
    const extra: Pod[] = [];
    for (let k = 0; k < 6; k++) extra.push(await startPod(n1, `grow-${k}`));
    const pool = await eventually(async () => {
      const p = await c.pool(n1.name);
      return (p.status?.enis ?? []).filter((e) => e.state === 'InUse').length === 2 ? p : undefined;
    }, 20_000);
    const [first, second] = pool.status!.enis!;
    expect(pods.some((p) => p.node === n1 && second!.ips!.includes(p.ip))).toBe(true);
    // All but one pod go (one stays on the first ENI): the excess is now more than the second ENI holds.
    const keep = pods.find((p) => p.node === n1 && first!.ips!.includes(p.ip))!;
    // The second ENI's pods first: excess is released as pods go (no release delay), from the ENI
    // with the fewest addresses in use, so the second one empties out whatever the timing.
    const leaving = pods.filter((x) => x.node === n1 && x !== keep);
    const onSecond = (x: Pod) => second!.ips!.includes(x.ip);
    for (const p of [...leaving.filter(onSecond), ...leaving.filter((x) => !onSecond(x))]) await stopPod(p);
    // The operator requests the excess, the agent confirms it, the emptied ENI is detached and deleted.
    await eventually(() => !c.ecs.world.enis.has(second!.id), 60_000, 200);
    const links = async () =>
      JSON.parse(await inNs(n1.netns, 'ip', '-j', 'link', 'show')) as Array<{ address: string }>;
    await eventually(async () => !(await links()).some((l) => l.address === second!.mac), 10_000, 200);
    await eventually(
      async () =>
        (await inNs(n1.netns, 'ip', 'route', 'show', 'table', String(TABLE_BASE + second!.deviceIndex!))) === '',
      10_000,
      200,
    );
    expect(
      (await rules(n1.netns)).filter((l) => l.endsWith(`lookup ${TABLE_BASE + second!.deviceIndex!} proto 236`)),
    ).toEqual([]);
    // The first ENI and its pods are untouched.
    expect((await links()).some((l) => l.address === first!.mac)).toBe(true);
    for (const p of pods.filter((x) => x.node === n1))
      await inNs(p.netns, 'ping', '-c', '1', '-W', '2', vpc.vpcHost!.ip);
  }, 120_000);

  it('leaves nothing behind on DEL: no address held, no veth, rule or qdisc, and a repeated DEL succeeds', async () => {
    for (const pod of [...pods]) await pod.node.runtime.del(pod);
    for (const pod of [...pods]) await pod.node.runtime.del(pod); // again, as a runtime may
    for (const n of nodes) {
      expect(n.agent.list()).toEqual([]);
      expect(await inNs(n.netns, 'ip', '-o', 'link', 'show', 'type', 'ifb')).toBe('');
      expect(await inNs(n.netns, 'tc', 'qdisc', 'show')).not.toMatch(/tbf|ingress/);
      await eventually(async () => (await rules(n.netns)).length === 0, 10_000, 200);
    }
  }, 60_000);
});
