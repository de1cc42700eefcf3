import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, rmdirSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Agent, ENI_RESOURCE } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { IpRouteKernel } from '../../src/agent/datapath/kernel.js';
import { nodeName } from '../../src/agent/datapath/exclusive.js';
import { vSwitchGateway } from '../../src/ipam/gateway.js';
import { silentLogger } from '../../src/observability/logger.js';
import { vpcUnavailable, type Vpc } from '../../testbed/vpc/index.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';
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
  type PodSpec,
} from '../helpers/netns.js';

/*
 * eniMode Exclusive on the strict VPC emulation: each pod that requests eniipam.io/eni gets a
 * whole secondary ENI, its device moved into the pod's namespace as eth0 by the shipped
 * exclusive conflist (eni-ipam-cni as the main plugin). Two Exclusive nodes and one Shared node;
 * the VPC delivers an ENI's addresses to its own device only and drops what a device sends from
 * an address not its ENI's.
 */
const why = datapathUnavailable() ?? vpcUnavailable();
if (why) console.warn(`exclusive datapath test skipped: ${why}`);
const describeDatapath = why ? describe.skip : describe;

const P = `eipx${process.pid % 10000}-`;
const SHARED = join(ROOT, 'examples/10-eni-ipam.conflist');
const EXCLUSIVE = join(ROOT, 'examples/10-eni-ipam-exclusive.conflist');

interface Node {
  name: string;
  instance: string;
  netns: string;
  dir: string;
  conflist: string;
  agent: Agent;
  server: Server;
  runtime: MiniRuntime;
}
interface Pod extends PodSpec {
  node: Node;
  ip: string;
}

let c: TestCluster;
let vpc: Vpc;
let bin: string;
const nodes: Node[] = [];
const servers: ChildProcess[] = [];

let createdRunDir = false;

async function startAgent(n: Pick<Node, 'name' | 'netns' | 'dir'>): Promise<{ agent: Agent; server: Server }> {
  const agent = new Agent({
    kc: c.kc,
    node: n.name,
    stateDir: n.dir,
    cooldownMs: 500,
    statusIntervalMs: 100,
    logger: silentLogger(),
    registry: new Registry(),
    datapath: {
      config: { tableBase: 3000, mtu: 1500 },
      kernel: new IpRouteKernel({ netns: n.netns }),
      nodeNetns: `/run/netns/${n.netns}`,
      deviceTimeoutMs: 5000,
      resyncMs: 60_000,
    },
  });
  await agent.start();
  const server = await serveAgentApi(agent, join(n.dir, 'agent.sock'));
  await eventually(() => agent.ready, 15_000);
  return { agent, server };
}

/** The Pod object as the API server holds it (what the agent reads for the resource request), then its ADD. */
async function startPod(
  node: Node,
  name: string,
  o: { eni?: boolean; bandwidth?: PodSpec['bandwidth']; retryMs?: number } = {},
): Promise<Pod> {
  const core = c.kc.makeApiClient(CoreV1Api);
  const resources = o.eni === false ? {} : { limits: { [ENI_RESOURCE]: '1' }, requests: { [ENI_RESOURCE]: '1' } };
  await core.createNamespacedPod({
    namespace: 'default',
    body: {
      metadata: { name },
      spec: { nodeName: node.name, containers: [{ name: 'main', image: 'toolbox', resources }] },
    },
  });
  const spec: PodSpec = { id: `ctr-${name}`, namespace: 'default', name, netns: `${P}${name}`, bandwidth: o.bandwidth };
  await ip('netns', 'add', spec.netns);
  const result = await eventually(() => node.runtime.add(spec).catch(() => undefined), o.retryMs ?? 30_000, 500);
  return { ...spec, node, ip: result.ips[0]!.address.split('/')[0]! };
}

async function stopPod(pod: Pod): Promise<void> {
  await pod.node.runtime.del(pod);
  await ip('netns', 'del', pod.netns);
  await c.kc
    .makeApiClient(CoreV1Api)
    .deleteNamespacedPod({ namespace: 'default', name: pod.name, gracePeriodSeconds: 0 });
}

const enis = () => [...c.ecs.world.enis.values()];
const eniWithPrimary = (addr: string) => enis().find((e) => e.primaryIp === addr)!;
const links = async (netns: string) =>
  JSON.parse(await inNs(netns, 'ip', '-j', 'addr', 'show')) as Array<{
    ifname: string;
    address: string;
    operstate: string;
    mtu: number;
    link_type: string;
    addr_info: Array<{ local: string; prefixlen: number }>;
  }>;
const ping = (pod: Pod, to: string) => inNs(pod.netns, 'ping', '-c', '1', '-W', '2', to);

beforeAll(async () => {
  if (why) return;
  deleteNamespaces(P);
  if (!existsSync('/run/eni-ipam')) {
    mkdirSync('/run/eni-ipam', { recursive: true });
    createdRunDir = true;
  }
  c = await testCluster();
  const common = { securityGroupIDs: ['sg-demo-pods'], releaseDelaySeconds: 0 };
  await c.addClass('ex', {
    ...common,
    eniMode: 'Exclusive',
    preAllocate: 1,
    vSwitchIDs: ['vsw-h-pods'],
    nodeSelector: { matchLabels: { datapath: 'ex' } },
  });
  await c.addClass('sh', {
    ...common,
    preAllocate: 2,
    deleteEmptyENIs: true,
    vSwitchIDs: ['vsw-h-pods-2'],
    nodeSelector: { matchLabels: { datapath: 'sh' } },
  });
  await c.startOperator();
  // ecs.g7.large: two secondary ENIs each.
  const plan = [
    { instance: 'i-demo-01', label: 'ex', conflist: EXCLUSIVE },
    { instance: 'i-demo-04', label: 'ex', conflist: EXCLUSIVE },
    { instance: 'i-demo-07', label: 'sh', conflist: SHARED },
  ];
  const names = await Promise.all(plan.map((p) => c.addNode(p.instance, { datapath: p.label })));
  await allReady(c, names, 30_000);
  bin = await installCniPlugins([SHARED, EXCLUSIVE]);
  let netnses: string[];
  ({ netnses, vpc } = await vpcNodes({ world: c.ecs.world, instances: plan.map((p) => p.instance), prefix: P }));
  for (const [k, p] of plan.entries()) {
    const n = {
      name: names[k]!,
      instance: p.instance,
      netns: netnses[k]!,
      dir: mkdtempSync(join(tmpdir(), `agent-x${k}-`)),
      conflist: p.conflist,
    };
    const runtime = new MiniRuntime(p.conflist, [bin, SYSTEM_CNI_DIR], { netns: n.netns, socketDir: n.dir });
    nodes.push({ ...n, runtime, ...(await startAgent(n)) });
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

describeDatapath('eniMode Exclusive: a whole ENI in each pod, on the strict VPC', () => {
  const pods: Pod[] = [];

  it('moves a distinct ENI’s device into each pod as eth0, with the ENI’s primary address, the MTU and the default route; no veth', async () => {
    const [x1, x2] = nodes;
    pods.push(await startPod(x1!, 'ex-a'), await startPod(x1!, 'ex-b'), await startPod(x2!, 'ex-c'));
    const used = pods.map((p) => eniWithPrimary(p.ip));
    expect(new Set(used.map((e) => e.id)).size).toBe(3);
    for (const [k, pod] of pods.entries()) {
      const eni = used[k]!;
      expect(eni.instanceId).toBe(pod.node.instance);
      expect(eni.secondaryIps).toEqual([]);
      const inPod = (await links(pod.netns)).filter((l) => l.ifname !== 'lo');
      expect(inPod).toHaveLength(1);
      expect(inPod[0]).toMatchObject({ ifname: 'eth0', address: eni.mac, operstate: 'UP', mtu: 1500 });
      const cidr = c.ecs.world.vSwitches.get(eni.vSwitchId)!.cidr;
      expect(inPod[0]!.addr_info.filter((a) => !a.local.startsWith('fe80'))).toEqual([
        expect.objectContaining({ local: pod.ip, prefixlen: Number(cidr.split('/')[1]) }),
      ]);
      expect(await inNs(pod.netns, 'ip', 'route', 'show', 'default')).toBe(
        `default via ${vSwitchGateway(cidr)} dev eth0 \n`,
      );
      // Gone from the node: no device with its MAC, no rule or route of the agent's for it.
      expect((await links(pod.node.netns)).some((l) => l.address === eni.mac)).toBe(false);
      expect(await inNs(pod.node.netns, 'ip', 'rule', 'show')).not.toContain(pod.ip);
      const pool = await c.pool(pod.node.name);
      await eventually(async () => Boolean((await c.pool(pod.node.name)).status?.used?.[pod.ip]), 10_000, 50);
      // The instance type's secondary ENIs: what the agent advertises as eniipam.io/eni.
      const type = c.ecs.world.instanceTypes.get(c.ecs.world.instances.get(pod.node.instance)!.instanceType)!;
      expect(pool.status!.summary!.podENIs).toBe(type.eniQuantity - 1);
    }
  }, 120_000);

  it('advertises each Exclusive node’s ENIs for pods as eniipam.io/eni in its status, and none on a Shared node', async () => {
    const core = c.kc.makeApiClient(CoreV1Api);
    for (const n of nodes) {
      const type = c.ecs.world.instanceTypes.get(c.ecs.world.instances.get(n.instance)!.instanceType)!;
      const want = n.conflist === EXCLUSIVE ? String(type.eniQuantity - 1) : undefined;
      await eventually(
        async () => (await core.readNode({ name: n.name })).status?.allocatable?.[ENI_RESOURCE] === want,
        10_000,
        100,
      );
      expect((await core.readNode({ name: n.name })).status?.capacity?.[ENI_RESOURCE]).toBe(want);
    }
  }, 30_000);

  it('connects exclusive pods to each other, to the VPC host and to a pod of a Shared node, by ping and TCP', async () => {
    const shared = await startPod(nodes[2]!, 'sh-a', { eni: false });
    const host = vpc.vpcHost!;
    for (const a of pods) {
      for (const b of [...pods, shared]) if (a !== b) await ping(a, b.ip);
      await ping(a, host.ip);
      const answer = await inNs(a.netns, 'curl', '-s', '--max-time', '3', `http://${host.ip}/`);
      expect(JSON.parse(answer)).toMatchObject({ client: a.ip });
      await ping(shared, a.ip);
    }
    await stopPod(shared);
  }, 120_000);

  it('negative control: the same pod with another ENI’s address on its device is dropped by the VPC as spoofed', async () => {
    const [a, b] = pods;
    const other = eniWithPrimary(b!.ip);
    const own = eniWithPrimary(a!.ip);
    await inNs(a!.netns, 'ip', 'addr', 'add', `${other.primaryIp}/32`, 'dev', 'eth0');
    const before = (await vpc.drops(own.id)).spoofed;
    const lost = await sh('ip', [
      'netns',
      'exec',
      a!.netns,
      'ping',
      '-I',
      other.primaryIp,
      '-c',
      '3',
      '-i',
      '0.2',
      '-W',
      '1',
      vpc.vpcHost!.ip,
    ]);
    expect(lost.stdout).toMatch(/100% packet loss/);
    await eventually(async () => (await vpc.drops(own.id)).spoofed >= before + 3, 5000, 100);
    await inNs(a!.netns, 'ip', 'addr', 'del', `${other.primaryIp}/32`, 'dev', 'eth0');
    await ping(a!, vpc.vpcHost!.ip);
  }, 30_000);

  it('refuses a pod that does not request eniipam.io/eni, and a pod beyond the node’s ENIs, saying why', async () => {
    const node = nodes[0]!;
    const core = c.kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace: 'default',
      body: { metadata: { name: 'plain' }, spec: { nodeName: node.name, containers: [{ name: 'main', image: 'x' }] } },
    });
    const plain: PodSpec = { id: 'ctr-plain', namespace: 'default', name: 'plain', netns: `${P}plain` };
    await ip('netns', 'add', plain.netns);
    await expect(node.runtime.add(plain)).rejects.toThrow(/does not request eniipam\.io\/eni/);
    // Both ENIs of the node are its pods': a third waits (the scheduler would keep it Pending).
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'third' },
        spec: {
          nodeName: node.name,
          containers: [{ name: 'main', image: 'x', resources: { limits: { [ENI_RESOURCE]: '1' } } }],
        },
      },
    });
    const third: PodSpec = { id: 'ctr-third', namespace: 'default', name: 'third', netns: `${P}third` };
    await ip('netns', 'add', third.netns);
    await expect(node.runtime.add(third)).rejects.toThrow(/no free exclusive ENI/);
    const pool = await c.pool(node.name);
    expect(pool.status!.summary).toMatchObject({ enis: 2, available: 2, used: 2, podENIs: 2 });
    await node.runtime.del(third);
    await node.runtime.del(plain);
  }, 30_000);

  it('restarts the agent with exclusive pods running: nothing moves, and they keep their network', async () => {
    const node = nodes[0]!;
    const mine = pods.filter((p) => p.node === node);
    const before = await Promise.all(mine.map((p) => links(p.netns)));
    node.server.close();
    await node.agent.stop();
    Object.assign(node, await startAgent(node));
    expect(await Promise.all(mine.map((p) => links(p.netns)))).toEqual(before);
    for (const p of mine) await ping(p, vpc.vpcHost!.ip);
  }, 60_000);

  it('restarted without its state file, the agent keeps the pods’ ENIs (from its last status) and a DEL still brings the device home', async () => {
    const node = nodes[0]!;
    const mine = pods.filter((p) => p.node === node);
    node.server.close();
    await node.agent.stop();
    rmSync(join(node.dir, 'allocations.json'), { force: true });
    Object.assign(node, await startAgent(node));
    // Taken back in: held for their pods, handed to no one else.
    const held = node.agent.list().map((a) => a.ip);
    for (const p of mine) expect(held).toContain(p.ip);
    const pod = mine.at(-1)!;
    const eni = eniWithPrimary(pod.ip);
    await pod.node.runtime.del(pod);
    const back = (await links(pod.node.netns)).find((l) => l.address === eni.mac)!;
    expect(back).toMatchObject({ ifname: nodeName(eni.mac), operstate: 'DOWN' });
    expect(node.agent.list().map((a) => a.ip)).not.toContain(pod.ip);
    // The pod starts again on an ENI: the same one, now free.
    await ip('netns', 'del', pod.netns);
    await ip('netns', 'add', pod.netns);
    const again = await eventually(() => pod.node.runtime.add(pod).catch(() => undefined), 30_000, 500);
    expect(again.ips[0]!.address.split('/')[0]).toBe(eni.primaryIp);
    await ping(pod, vpc.vpcHost!.ip);
  }, 90_000);

  it('DEL brings the device back to the node, down and without address; the ENI serves the next pod', async () => {
    const pod = pods.shift()!;
    const eni = eniWithPrimary(pod.ip);
    await stopPod(pod);
    const back = (await links(pod.node.netns)).find((l) => l.address === eni.mac)!;
    expect(back).toMatchObject({ ifname: nodeName(eni.mac), operstate: 'DOWN' });
    expect(back.addr_info.filter((a) => !a.local.startsWith('fe80'))).toEqual([]);
    // A repeated DEL is fine.
    await pod.node.runtime.del(pod);
    const next = await startPod(pod.node, 'ex-d');
    expect(next.ip).toBe(eni.primaryIp);
    await ping(next, vpc.vpcHost!.ip);
    pods.push(next);
  }, 60_000);

  it('a DEL that comes while its ADD is still moving the device in waits for that ADD, then brings the device home', async () => {
    const node = nodes[1]!;
    const core = c.kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'race' },
        spec: {
          nodeName: node.name,
          containers: [{ name: 'main', image: 'x', resources: { limits: { [ENI_RESOURCE]: '1' } } }],
        },
      },
    });
    const race: PodSpec = { id: 'ctr-race', namespace: 'default', name: 'race', netns: `${P}race` };
    await ip('netns', 'add', race.netns);
    const before = new Set((await links(node.netns)).map((l) => l.address));
    // The runtime gives up on the ADD and tears the sandbox down while the agent is mid-move.
    const add = node.runtime.add(race).then(
      (r) => r.ips[0]!.address.split('/')[0]!,
      () => undefined,
    );
    // The ENI taken (the allocation saved), its device on its way: then the DEL.
    await eventually(() => node.agent.list().some((a) => a.containerId === race.id), 10_000, 1);
    let movedYet = false;
    const del = node.runtime.del(race);
    movedYet = (await links(race.netns)).some((l) => l.ifname === 'eth0');
    await del;
    const ip4 = await add;
    // Whatever the ADD answered, the DEL came after it: nothing held, the device (if one moved) home.
    expect(node.agent.list().filter((a) => a.containerId === race.id)).toEqual([]);
    expect((await links(race.netns)).filter((l) => l.ifname !== 'lo')).toEqual([]);
    const home = new Set((await links(node.netns)).map((l) => l.address));
    for (const mac of before) expect(home.has(mac)).toBe(true);
    if (ip4) expect(home.has(eniWithPrimary(ip4).mac)).toBe(true);
    // The DEL did come mid-ADD: the device was not in the pod yet when it was sent.
    expect(movedYet).toBe(false);
    await ip('netns', 'del', race.netns);
    await core.deleteNamespacedPod({ namespace: 'default', name: 'race', gracePeriodSeconds: 0 });
  }, 60_000);

  it('holds an exclusive pod with egress-bandwidth 4M to about 4 Mbit/s, on its own device', async () => {
    const node = nodes[1]!;
    // As kubelet turns kubernetes.io/egress-bandwidth: 4M into the runtime's bandwidth capability.
    const limited = await startPod(node, 'ex-slow', { bandwidth: { egressRate: 4_000_000, egressBurst: 256_000 } });
    const out = await inNs(limited.netns, 'iperf3', '-c', vpc.vpcHost!.ip, '-t', '5', '-J');
    const bps = JSON.parse(out).end.sum_received.bits_per_second as number;
    expect(bps).toBeGreaterThanOrEqual(3.5e6);
    expect(bps).toBeLessThanOrEqual(4.5e6);
    expect(await inNs(limited.netns, 'tc', 'qdisc', 'show', 'dev', 'eth0')).toMatch(/tbf/);
    await stopPod(limited);
  }, 60_000);

  it('gives an idle ENI back once the pods leave: requested by its id, acked by the agent, detached and deleted', async () => {
    const node = nodes[1]!;
    const pod = pods.find((p) => p.node === node)!;
    await stopPod(pod);
    pods.splice(pods.indexOf(pod), 1);
    // preAllocate 1: one of the node's two idle ENIs goes.
    await eventually(
      async () =>
        (await c.pool(node.name)).status?.summary?.enis === 1 &&
        enis().filter((e) => e.instanceId === node.instance && e.type !== 'Primary').length === 1,
      30_000,
      200,
    );
  }, 60_000);
});
