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
import { silentLogger } from '../../src/observability/logger.js';
import { runCli } from '../helpers/cli.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';
import { ROOT } from '../helpers/helm.js';
import {
  MiniRuntime,
  SYSTEM_CNI_DIR,
  datapathUnavailable,
  deleteNamespaces,
  inNs,
  ip,
  sh,
  startInNs,
  type PodSpec,
} from '../helpers/netns.js';

/*
 * Two "nodes" (network namespaces) on a "VPC" (a namespace with a bridge for the node vSwitch and
 * one route per ENI address to the node that holds it, as the VPC routes ENI addresses), the
 * operator and both emulators, one agent per node, and "pods" started by the shipped conflist
 * (ptp + eni-ipam-cni + bandwidth) exactly as a container runtime runs it.
 */
const why = datapathUnavailable();
if (why) console.warn(`datapath test skipped: ${why}`);
const describeDatapath = why ? describe.skip : describe;

const P = `eipam${process.pid % 10000}-`;
const VPC = `${P}vpc`;
const CONFLIST = join(ROOT, 'examples/10-eni-ipam.conflist');
const COOLDOWN_MS = 1000;

interface Node {
  name: string;
  instance: string;
  netns: string;
  ip: string;
  agent: Agent;
  server: Server;
  runtime: MiniRuntime;
}
interface Pod extends PodSpec {
  node: Node;
  ip: string;
}

let c: TestCluster;
const nodes: Node[] = [];
const pods: Pod[] = [];
const servers: ChildProcess[] = [];
let createdRunDir = false;

async function startPod(node: Node, name: string, bandwidth?: PodSpec['bandwidth']): Promise<Pod> {
  const spec: PodSpec = { id: `ctr-${name}`, namespace: 'default', name, netns: `${P}${name}`, bandwidth };
  await ip('netns', 'add', spec.netns);
  const result = await node.runtime.add(spec);
  const pod = { ...spec, node, ip: result.ips[0]!.address.split('/')[0]! };
  pods.push(pod);
  return pod;
}

/** The VPC's routes: every address of every ENI attached to a node goes to that node. */
async function routeEniAddresses(): Promise<void> {
  for (const e of c.ecs.state().enis) {
    const node = nodes.find((n) => n.instance === e.instanceId);
    if (!node || e.type === 'Primary') continue;
    for (const addr of [e.primaryIp, ...e.secondaryIps])
      await inNs(VPC, 'ip', 'route', 'replace', `${addr}/32`, 'via', node.ip);
  }
}

async function iperf(from: Pod, to: Pod, port: number): Promise<number> {
  const server = startInNs(to.netns, ['iperf3', '-s', '-1', '-p', String(port)]);
  servers.push(server);
  await eventually(async () => (await inNs(to.netns, 'ss', '-ltn')).includes(`:${port}`), 5000, 50);
  const out = await inNs(from.netns, 'iperf3', '-c', to.ip, '-p', String(port), '-t', '5', '-J');
  return JSON.parse(out).end.sum_received.bits_per_second as number;
}

beforeAll(async () => {
  if (why) return;
  deleteNamespaces('eipam');
  if (!existsSync('/run/eni-ipam')) {
    mkdirSync('/run/eni-ipam', { recursive: true });
    createdRunDir = true;
  }
  c = await testCluster();
  await c.addClass('pods', { vSwitchIDs: ['vsw-h-pods'], securityGroupIDs: ['sg-demo-pods'], preAllocate: 4 });
  await c.startOperator();
  // Two instances in zone h, whose node vSwitch vsw-h-nodes is 192.168.0.0/24 (gateway .253).
  const instances = ['i-demo-01', 'i-demo-04'];
  const names = await Promise.all(instances.map((i) => c.addNode(i)));
  await allReady(c, names, 30_000);

  const bin = mkdtempSync(join(tmpdir(), 'cni-bin-'));
  // Installed as the agent DaemonSet's init container does it.
  const installed = await runCli([
    'install-cni',
    '--bin-dir',
    bin,
    '--conf-dir',
    mkdtempSync(join(tmpdir(), 'cni-conf-')),
    '--conflist',
    CONFLIST,
  ]);
  if (installed.code !== 0) throw new Error(`install-cni failed: ${installed.stderr}`);

  await ip('netns', 'add', VPC);
  await inNs(VPC, 'ip', 'link', 'set', 'lo', 'up');
  await inNs(VPC, 'ip', 'link', 'add', 'br0', 'type', 'bridge');
  await inNs(VPC, 'ip', 'addr', 'add', '192.168.0.253/24', 'dev', 'br0');
  await inNs(VPC, 'ip', 'link', 'set', 'br0', 'up');
  await inNs(VPC, 'sysctl', '-qw', 'net.ipv4.ip_forward=1');
  for (const [k, instance] of instances.entries()) {
    const netns = `${P}node${k + 1}`;
    const primary = c.ecs.world.enis.get(c.ecs.world.instances.get(instance)!.primaryEniId)!.primaryIp;
    await ip('netns', 'add', netns);
    await ip('link', 'add', `${P}n${k + 1}`, 'netns', VPC, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns);
    await inNs(VPC, 'ip', 'link', 'set', `${P}n${k + 1}`, 'master', 'br0', 'up');
    await inNs(netns, 'ip', 'link', 'set', 'lo', 'up');
    await inNs(netns, 'ip', 'addr', 'add', `${primary}/24`, 'dev', 'eth0');
    await inNs(netns, 'ip', 'link', 'set', 'eth0', 'up');
    await inNs(netns, 'ip', 'route', 'add', 'default', 'via', '192.168.0.253');
    const dir = mkdtempSync(join(tmpdir(), `agent-${k}-`));
    const agent = new Agent({
      kc: c.kc,
      node: names[k]!,
      stateDir: dir,
      cooldownMs: COOLDOWN_MS,
      statusIntervalMs: 100,
      logger: silentLogger(),
      registry: new Registry(),
    });
    await agent.start();
    const server = await serveAgentApi(agent, join(dir, 'agent.sock'));
    await eventually(() => agent.ready);
    nodes.push({
      name: names[k]!,
      instance,
      netns,
      ip: primary,
      agent,
      server,
      runtime: new MiniRuntime(CONFLIST, [bin, SYSTEM_CNI_DIR], { netns, socketDir: dir }),
    });
  }
  await routeEniAddresses();
}, 90_000);

afterAll(async () => {
  for (const s of servers) s.kill('SIGKILL');
  for (const n of nodes) {
    n.server.close();
    await n.agent.stop();
  }
  await c?.close();
  if (!why) deleteNamespaces(P);
  if (createdRunDir && readdirSync('/run/eni-ipam').length === 0) rmdirSync('/run/eni-ipam');
});

describeDatapath('pods in network namespaces, on the shipped CNI chain', () => {
  it('gives three pods on each node addresses from their own node’s pool and ENIs', async () => {
    for (const n of nodes) for (const k of [1, 2, 3]) await startPod(n, `${n.netns.slice(P.length)}-pod${k}`);
    // The agents' status writes are coalesced: wait until each pool reports its pods.
    await eventually(
      async () => {
        for (const pod of pods) if (!(await c.pool(pod.node.name)).status?.used?.[pod.ip]) return false;
        return true;
      },
      10_000,
      50,
    );
    for (const pod of pods) {
      expect((await inNs(pod.netns, 'ip', '-4', '-o', 'addr', 'show', 'eth0')).split(/\s+/)).toContain(`${pod.ip}/20`);
      const pool = await c.pool(pod.node.name);
      expect(pool.status!.enis!.some((e) => e.ips!.includes(pod.ip))).toBe(true);
      expect(pool.status!.used![pod.ip]).toEqual({ pod: `default/${pod.name}`, containerID: pod.id, ifName: 'eth0' });
      const eni = c.ecs.state().enis.find((e) => e.secondaryIps.includes(pod.ip) || e.primaryIp === pod.ip)!;
      expect(eni.instanceId).toBe(pod.node.instance);
    }
    expect(new Set(pods.map((p) => p.ip)).size).toBe(6);
  }, 60_000);

  it('connects every pod to every other pod, by ping and by TCP', async () => {
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
      "const s=require('net').connect(7000,process.argv[1]);s.setEncoding('utf8');s.on('data',(d)=>process.stdout.write(d));s.on('error',(e)=>{console.error(e.message);process.exit(1)})";
    for (const a of pods) {
      for (const b of pods) {
        if (a === b) continue;
        await inNs(a.netns, 'ping', '-c', '1', '-W', '2', b.ip);
        expect(await inNs(a.netns, 'node', '-e', client, b.ip)).toBe(`hello from ${b.name}\n`);
      }
    }
  }, 60_000);

  it('carries traffic between nodes as plain IP: a full 1500-byte path and no encapsulation on the wire', async () => {
    const [a, b] = [pods.find((p) => p.node === nodes[0])!, pods.find((p) => p.node === nodes[1])!];
    for (const ns of [a.netns, a.node.netns, VPC, b.node.netns, b.netns]) {
      for (const line of (await inNs(ns, 'ip', '-o', 'link', 'show'))
        .split('\n')
        .filter((l) => l && !l.includes(' lo:')))
        expect(line).toMatch(/ mtu 1500 /);
    }
    await inNs(a.netns, 'ping', '-c', '1', '-W', '2', '-M', 'do', '-s', '1472', b.ip);
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
    // On the VPC's wire the packet is the pod's own: pod address to pod address, ICMP, 1500 bytes.
    const capture = startInNs(VPC, [
      'tcpdump',
      '-i',
      'br0',
      '-n',
      '-c',
      '1',
      '-l',
      '-v',
      `icmp and src host ${a.ip} and dst host ${b.ip}`,
    ]);
    servers.push(capture);
    let seen = '';
    capture.stdout!.on('data', (d) => (seen += d));
    await new Promise((r) => setTimeout(r, 1000));
    await inNs(a.netns, 'ping', '-c', '2', '-W', '2', '-M', 'do', '-s', '1472', b.ip);
    await Promise.race([once(capture, 'exit'), new Promise((r) => setTimeout(r, 5000))]);
    expect(seen).toMatch(
      new RegExp(
        `proto ICMP \\(1\\), length 1500\\)\\s+${a.ip.replace(/\./g, '\\.')} > ${b.ip.replace(/\./g, '\\.')}: ICMP echo request`,
      ),
    );
    expect(seen).not.toMatch(/UDP|VXLAN|GRE|ipip/i);
  }, 30_000);

  it('holds a pod with egress-bandwidth 4M to about 4 Mbit/s, while an unlimited pod on the node goes at least 50 times faster', async () => {
    const node = nodes[0]!;
    // As kubelet turns kubernetes.io/egress-bandwidth: 4M into the runtime's bandwidth capability.
    const limited = await startPod(node, 'limited', { egressRate: 4_000_000, egressBurst: 256_000 });
    const free = await startPod(node, 'unlimited');
    const target = pods.find((p) => p.node === nodes[1])!;
    await routeEniAddresses();
    const slow = await iperf(limited, target, 5201);
    const fast = await iperf(free, target, 5202);
    expect(slow).toBeGreaterThanOrEqual(3.5e6);
    expect(slow).toBeLessThanOrEqual(4.5e6);
    expect(fast).toBeGreaterThanOrEqual(50 * slow);
    // The limit is the bandwidth plugin's: a TBF on an IFB device that mirrors the pod's host veth.
    expect(await inNs(node.netns, 'tc', 'qdisc', 'show')).toMatch(/qdisc tbf .* rate 4Mbit/);
  }, 60_000);

  it('leaves nothing behind on DEL: no address held, no veth or qdisc, and a repeated DEL succeeds', async () => {
    expect(nodes.reduce((k, n) => k + n.agent.list().length, 0)).toBe(pods.length);
    for (const pod of pods) await pod.node.runtime.del(pod);
    for (const pod of pods) await pod.node.runtime.del(pod); // again, as a runtime may
    for (const n of nodes) {
      expect(n.agent.list()).toEqual([]);
      expect(await inNs(n.netns, 'ip', '-o', 'link', 'show', 'type', 'veth')).toMatch(/^\d+: eth0@/);
      expect((await inNs(n.netns, 'ip', '-o', 'link', 'show', 'type', 'veth')).trim().split('\n')).toHaveLength(1);
      expect(await inNs(n.netns, 'ip', '-o', 'link', 'show', 'type', 'ifb')).toBe('');
      expect(await inNs(n.netns, 'tc', 'qdisc', 'show')).not.toMatch(/tbf|ingress/);
    }
    // After the cool-down every released address is free in the agent again.
    for (const n of nodes) {
      const pool = await c.pool(n.name);
      const total = pool.status!.enis!.reduce((k, e) => k + e.ips!.length, 0);
      await eventually(async () => {
        const p = await c.pool(n.name);
        return Object.keys(p.status?.used ?? {}).length === 0 && Object.keys(p.status?.cooling ?? {}).length === 0;
      }, 10_000);
      expect(total).toBeGreaterThanOrEqual(pods.filter((p) => p.node === n).length);
      for (const p of pods.filter((x) => x.node === n))
        expect(n.agent.allocate({ containerId: `again-${p.id}`, ifName: 'eth0', pod: 'default/again' })).not.toBe(
          'pool-empty',
        );
    }
  }, 60_000);
});
