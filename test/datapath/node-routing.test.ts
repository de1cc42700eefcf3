/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { agentClient } from '../../src/agent/client.js';
import { IpRouteKernel, type KernelPort } from '../../src/agent/datapath/kernel.js';
import { CRDS } from '../../src/api/crds.js';
import { createLogger } from '../../src/observability/logger.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { eventually } from '../helpers/ecs.js';
import { run, tool } from '../helpers/helm.js';
import { kube } from '../helpers/kube.js';
import { datapathUnavailable, deleteNamespaces, inNs, ip, sh } from '../helpers/netns.js';
import { cniVars, ipamConf } from '../helpers/cni-call.js';

/*
 * The agent's node routing in a "node" network namespace, without a VPC: a primary eth0 with the
 * node's routes, ENI devices that are veths whose other end sits in a second namespace, with the
 * ENI's MAC, DOWN as a hot-plugged NIC comes up, renamed, late or never. The pool lives in the
 * Kubernetes emulator (the test writes its status as the operator would); agents run in-process
 * on the node namespace and are called as eni-ipam-cni calls them (POST /v1/cni).
 */
const why = datapathUnavailable();
if (why) console.warn(`node routing test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const P = `eiprt${process.pid % 10000}-`;
const NS = `${P}node`;
const PEER = `${P}vpc`;
const NODE = 'node-a';
const MTU = 8500;

interface TestEni {
  id: string;
  mac: string;
  deviceIndex: number;
  vSwitchCIDR: string;
  gatewayIP: string;
  primaryIP: string;
  ips: string[];
}
const eni = (n: number, ips: string[]): TestEni => ({
  id: `eni-${n}`,
  mac: `00:16:3e:aa:00:0${n}`,
  deviceIndex: n - 1,
  vSwitchCIDR: `10.1.${n}.0/24`,
  gatewayIP: `10.1.${n}.253`,
  primaryIP: `10.1.${n}.5`,
  ips,
});
const ENI2 = eni(2, ['10.1.2.10', '10.1.2.11']);
// Its own primary address first, as the operator publishes it; the image will have DHCP'd it on the device.
const ENI3 = eni(3, ['10.1.3.5', '10.1.3.10']);
const ENI4 = eni(4, ['10.1.4.10']);

let emu: ControlPlane;
let kc: KubeConfig;
let custom: CustomObjectsApi;
const stateDir = mkdtempSync(join(tmpdir(), 'node-routing-'));

interface Running {
  agent: Agent;
  server: Server;
  socket: string;
  registry: Registry;
  stop(): Promise<void>;
}
let running: Running | undefined;
/** What the agents logged, one JSON object a line. */
const logged: Array<Record<string, unknown>> = [];
const logger = createLogger(
  { level: 'info', name: 'eni-ipam-agent' },
  {
    write: (line: string) => void logged.push(JSON.parse(line)),
  },
);

/**
 * The kernel as the agent sees it, with a fault to switch on for the egress rule of an address:
 * one the kernel's side refuses (a table lookup cannot be an l3mdev rule: that line fails, the
 * others run), or one ip cannot parse (it stops there, without saying which line).
 */
const faults: { egress?: 'refused' | 'unparsable' } = {};
class FaultyKernel implements KernelPort {
  private readonly real = new IpRouteKernel({ netns: NS });
  read() {
    return this.real.read();
  }
  apply(batch: string[]) {
    const spoil = { refused: ' l3mdev', unparsable: ' nosuchkey' };
    return this.real.apply(
      batch.map((l) => (faults.egress && l.startsWith('rule add priority 111 ') ? `${l}${spoil[faults.egress]}` : l)),
    );
  }
}

async function startAgent(o: { routing?: boolean; node?: string; dir?: string } = {}): Promise<Running> {
  const registry = new Registry();
  const dir = o.dir ?? stateDir;
  const agent = new Agent({
    kc,
    node: o.node ?? NODE,
    stateDir: dir,
    cooldownMs: 300,
    statusIntervalMs: 100,
    logger,
    registry,
    ...(o.routing === false
      ? {}
      : {
          datapath: {
            config: { tableBase: 3000, mtu: MTU },
            kernel: new FaultyKernel(),
            deviceTimeoutMs: 1500,
            resyncMs: 60_000,
          },
        }),
  });
  await agent.start();
  const socket = join(dir, 'agent.sock');
  const server = await serveAgentApi(agent, socket);
  await eventually(() => agent.ready, 10_000);
  return {
    agent,
    server,
    socket,
    registry,
    async stop() {
      server.close();
      await agent.stop();
    },
  };
}

async function publish(enis: TestEni[], node = NODE): Promise<void> {
  await custom.patchClusterCustomObjectStatus(
    {
      group: 'eniipam.io',
      version: 'v1alpha1',
      plural: 'enipools',
      name: node,
      body: { status: { enis: enis.map((e) => ({ ...e, state: 'InUse' })) } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

async function createPool(node: string, enis: TestEni[]): Promise<void> {
  await custom.createClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipools',
    body: { apiVersion: 'eniipam.io/v1alpha1', kind: 'ENIPool', metadata: { name: node }, spec: { nodeName: node } },
  });
  await publish(enis, node);
}

/** A CNI call as eni-ipam-cni makes it. */
async function cni(socket: string, command: 'ADD' | 'DEL', container: string) {
  const a = await agentClient.cni(socket, { env: cniVars(command, container), stdin: ipamConf(socket) });
  const out = a.stdout.trim() ? JSON.parse(a.stdout) : undefined;
  return { code: a.exitCode, out, ip: out?.ips?.[0]?.address?.split('/')[0] as string | undefined };
}

const lines = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
const rules = async (ns = NS) => lines(await inNs(ns, 'ip', 'rule', 'show'));
/** A table's routes; a table never written is empty. */
const table = async (n: number | string, ns = NS) => {
  const r = await sh('ip', ['-n', ns, 'route', 'show', 'table', String(n)]);
  if (r.code !== 0 && !r.stderr.includes('FIB table does not exist')) throw new Error(r.stderr);
  return lines(r.stdout);
};
const link = async (name: string, ns = NS) => JSON.parse(await inNs(ns, 'ip', '-json', 'link', 'show', name))[0];
/** Everything the agent could change, for before/after comparisons. */
const snapshot = async () => ({
  rules: await rules(),
  routes: lines(await inNs(NS, 'ip', 'route', 'show', 'table', 'all')),
  links: JSON.parse(await inNs(NS, 'ip', '-json', 'addr', 'show')).map((l: any) => ({
    name: l.ifname,
    flags: l.flags,
    mtu: l.mtu,
    addrs: l.addr_info.map((a: any) => `${a.local}/${a.prefixlen}`),
  })),
});
const podRules = (ip: string, table: number) => [
  `20:\tfrom all to ${ip} lookup main proto 236`,
  `111:\tfrom ${ip} lookup ${table} proto 236`,
];
const mentions = (all: string[], ip: string) => all.filter((r) => r.split(/\s+/).includes(ip));

/** An ENI device as the VPC hot-plugs one: a veth with the ENI's MAC, its other end in the peer namespace, DOWN. */
async function plugDevice(e: TestEni, name: string): Promise<void> {
  await ip(
    'link',
    'add',
    name,
    'netns',
    NS,
    'address',
    e.mac,
    'type',
    'veth',
    'peer',
    'name',
    `v${e.id}`,
    'netns',
    PEER,
  );
  await inNs(PEER, 'ip', 'link', 'set', `v${e.id}`, 'up');
}

let mainBefore: string[];
const foreignRules = ['500:\tfrom 10.9.9.9 lookup 100', '111:\tfrom 10.1.2.99 lookup 3001'];

beforeAll(async () => {
  if (why) return;
  deleteNamespaces(P);
  for (const ns of [NS, PEER]) {
    await ip('netns', 'add', ns);
    await inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
    // IPv4 only: the kernel's own IPv6 link-local addresses and routes would come and go in what is compared.
    await inNs(ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1');
  }
  // The node's primary interface and its own routes and rules, which the agent must never touch.
  await ip('link', 'add', 'eth0', 'netns', NS, 'type', 'veth', 'peer', 'name', 'veth0', 'netns', PEER);
  await inNs(PEER, 'ip', 'link', 'set', 'veth0', 'up');
  await inNs(NS, 'ip', 'addr', 'add', '192.168.0.5/24', 'dev', 'eth0');
  await inNs(NS, 'ip', 'link', 'set', 'eth0', 'up');
  await inNs(NS, 'ip', 'route', 'add', 'default', 'via', '192.168.0.253');
  await inNs(NS, 'ip', 'route', 'add', '10.50.0.0/16', 'via', '192.168.0.1');
  await inNs(NS, 'ip', 'rule', 'add', 'from', '10.9.9.9', 'lookup', '100', 'priority', '500');
  // At one of our priorities, into one of our tables, but not ours (no protocol 236).
  await inNs(NS, 'ip', 'rule', 'add', 'from', '10.1.2.99', 'lookup', '3001', 'priority', '111');
  // eni-2's device is there at start, DOWN with the image's MTU.
  await plugDevice(ENI2, 'eth1');
  mainBefore = await table('main');

  ({ emu, kc } = await kube());
  await emu.createCrds(Object.values(CRDS));
  custom = kc.makeApiClient(CustomObjectsApi);
  await createPool(NODE, [ENI2]);
}, 60_000);

afterAll(async () => {
  await running?.stop();
  await emu?.close();
  if (!why) deleteNamespaces(P);
});

maybe('the node’s datapath, set up by the agent (root, network namespaces)', () => {
  it('at start: the ENI’s device (found by MAC) is up with the pool’s MTU and its table holds exactly the gateway and default routes; eth0, main and foreign rules untouched', async () => {
    expect((await link('eth1')).flags).not.toContain('UP');
    running = await startAgent();
    const eth1 = await link('eth1');
    expect(eth1.flags).toContain('UP');
    expect(eth1.mtu).toBe(MTU);
    expect(await table(3001)).toEqual([
      'default via 10.1.2.253 dev eth1 proto 236',
      '10.1.2.253 dev eth1 proto 236 scope link',
    ]);
    expect((await link('eth0')).mtu).toBe(1500);
    expect(await table('main')).toEqual(mainBefore);
    expect(await rules()).toEqual(expect.arrayContaining(foreignRules));
    expect((await rules()).filter((r) => r.includes('proto 236'))).toEqual([]);
  }, 30_000);

  it('an ADD sets the pod address’s two rules before it answers; a DEL takes them away', async () => {
    const a = await cni(running!.socket, 'ADD', 'pod-a');
    expect(a.code).toBe(0);
    expect(a.ip).toBe('10.1.2.10');
    expect(mentions(await rules(), a.ip!)).toEqual(podRules(a.ip!, 3001));
    const b = await cni(running!.socket, 'ADD', 'pod-b');
    expect(mentions(await rules(), b.ip!)).toEqual(podRules(b.ip!, 3001));
    expect((await cni(running!.socket, 'DEL', 'pod-b')).code).toBe(0);
    expect(mentions(await rules(), b.ip!)).toEqual([]);
    expect(mentions(await rules(), a.ip!)).toEqual(podRules(a.ip!, 3001));
  }, 30_000);

  it('an agent restart with a running pod changes nothing, with its state file or without (a wiped disk): the same links, routes and rules, none twice, ip monitor silent', async () => {
    const before = await snapshot();
    const monitor: ChildProcess = spawn('ip', ['-n', NS, 'monitor', 'link', 'address', 'route', 'rule'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let seen = '';
    monitor.stdout!.on('data', (d) => (seen += d));
    try {
      // The monitor hears changes (a control), then nothing while the agent restarts.
      await eventually(
        async () => {
          await inNs(NS, 'ip', 'rule', 'add', 'from', '10.9.9.8', 'lookup', '100', 'priority', '501');
          await inNs(NS, 'ip', 'rule', 'del', 'from', '10.9.9.8', 'lookup', '100', 'priority', '501');
          return seen.includes('10.9.9.8');
        },
        5000,
        200,
      );
      await new Promise((r) => setTimeout(r, 200));
      // Its own state, then none (it takes pod-a's address back from the pool's status before it
      // reconciles), then its own again for the tests that follow.
      for (const dir of [stateDir, mkdtempSync(join(tmpdir(), 'node-routing-wiped-')), stateDir]) {
        seen = '';
        await running!.stop();
        running = await startAgent({ dir });
        await new Promise((r) => setTimeout(r, 500));
        expect(seen).toBe('');
        expect(await snapshot()).toEqual(before);
      }
    } finally {
      monitor.kill();
    }
    expect(await snapshot()).toEqual(before);
    expect(mentions(await rules(), '10.1.2.10')).toEqual(podRules('10.1.2.10', 3001));
    expect(await running!.registry.getSingleMetricAsString('eni_ipam_agent_datapath_changes_total')).not.toMatch(
      /_total\{[^}]*\} [1-9]/,
    );
  }, 30_000);

  it('at start, the rules of an address released while the agent was down and a stray route of its table go; the pod’s and foreign rules stay', async () => {
    await running!.stop();
    running = undefined;
    // What an agent killed mid-DEL leaves behind: pod-b's released address kept its rules.
    for (const r of [
      ['from', '10.1.2.11/32', 'lookup', '3001', 'priority', '111'],
      ['to', '10.1.2.11/32', 'lookup', 'main', 'priority', '20'],
    ])
      await inNs(NS, 'ip', 'rule', 'add', ...r, 'protocol', '236');
    await inNs(NS, 'ip', 'route', 'add', '10.1.2.0/24', 'dev', 'eth1', 'table', '3001', 'proto', '236');
    running = await startAgent();
    expect(mentions(await rules(), '10.1.2.11')).toEqual([]);
    expect(mentions(await rules(), '10.1.2.10')).toEqual(podRules('10.1.2.10', 3001));
    expect(await rules()).toEqual(expect.arrayContaining(foreignRules));
    expect(await table(3001)).toEqual([
      'default via 10.1.2.253 dev eth1 proto 236',
      '10.1.2.253 dev eth1 proto 236 scope link',
    ]);
    expect(await table('main')).toEqual(mainBefore);
  }, 30_000);

  it('a late ENI device, renamed, with the image’s DHCP address: an ADD waits for it; the ENI’s own address stays the node’s, on the device and out of the pods’ reach', async () => {
    // eni-2 full (pod-a, pod-b), so pods now get eni-3's addresses.
    await eventually(async () => (await cni(running!.socket, 'ADD', 'pod-b')).code === 0, 5000, 100);
    await publish([ENI2, ENI3]);
    // One free: eni-3's own (primary) address is the node's.
    await eventually(async () => /^eni_ipam_agent_ips_free 1$/m.test(await running!.registry.metrics()));
    const started = Date.now();
    const pending = cni(running!.socket, 'ADD', 'pod-c');
    await new Promise((r) => setTimeout(r, 600));
    // The VPC attaches it a moment later; the image's scripts name it lan7 and DHCP its primary address, leaving it DOWN.
    await plugDevice(ENI3, 'lan7');
    await inNs(NS, 'ip', 'addr', 'add', '10.1.3.5/24', 'dev', 'lan7');
    const added = await pending;
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    expect(added.code).toBe(0);
    expect(added.ip).toBe('10.1.3.10');
    expect(mentions(await rules(), '10.1.3.10')).toEqual(podRules('10.1.3.10', 3002));
    expect(mentions(await rules(), '10.1.3.5')).toEqual([]);
    const lan7 = await link('lan7');
    expect([lan7.flags.includes('UP'), lan7.mtu]).toEqual([true, MTU]);
    expect(await table(3002)).toEqual([
      'default via 10.1.3.253 dev lan7 proto 236',
      '10.1.3.253 dev lan7 proto 236 scope link',
    ]);
    // Not fought: the image's address stays on the device, and nobody gets it.
    expect(lines(await inNs(NS, 'ip', '-4', '-o', 'addr', 'show', 'lan7')).join()).toContain('10.1.3.5/24');
    expect(running!.agent.list().map((a) => a.ip)).not.toContain('10.1.3.5');
  }, 30_000);

  it('a device that never appears fails the ADD with a CNI error naming the ENI; nothing is left behind, and the log and metrics name the ENI', async () => {
    await publish([ENI2, ENI3, ENI4]);
    // Free: eni-4's one address (eni-3's own address is the node's, its other pod-c's).
    await eventually(async () => /^eni_ipam_agent_ips_free 1$/m.test(await running!.registry.metrics()));
    const before = await snapshot();
    const started = Date.now();
    const r = await cni(running!.socket, 'ADD', 'pod-d');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
    expect(r.code).toBe(1);
    expect(r.out).toMatchObject({
      code: 11,
      msg: expect.stringMatching(/no device with MAC 00:16:3e:aa:00:04 \(ENI eni-4\).*waited 1\.5 s/),
    });
    expect(running!.agent.list().map((a) => a.containerId)).not.toContain('pod-d');
    expect(mentions(await rules(), '10.1.4.10')).toEqual([]);
    expect(await table(3003)).toEqual([]);
    expect(await snapshot()).toEqual(before);
    const metrics = await running!.registry.metrics();
    expect(metrics).toMatch(/eni_ipam_agent_datapath_pod_failures_total\{eni="eni-4",reason="device-missing"\} 1/);
    expect(metrics).toMatch(/eni_ipam_agent_datapath_eni_problems\{eni="eni-4",reason="device-missing"\} 1/);
    expect(logged).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        eni: 'eni-4',
        ip: '10.1.4.10',
        pod: 'default/pod-d',
        reason: 'device-missing',
        msg: 'the datapath of a pod address could not be set up; the ADD fails and the address is released',
      }),
    );
  }, 30_000);

  it('an ENI detached from the pool takes its table with it (the device is left alone); a DEL took its pod’s rules', async () => {
    expect((await cni(running!.socket, 'DEL', 'pod-c')).code).toBe(0);
    expect(mentions(await rules(), '10.1.3.10')).toEqual([]);
    await publish([ENI2]);
    await eventually(async () => (await table(3002)).length === 0, 5000, 100);
    expect(await table(3001)).toHaveLength(2);
    expect(mentions(await rules(), '10.1.2.10')).toEqual(podRules('10.1.2.10', 3001));
    expect((await link('lan7')).flags).toContain('UP');
    await eventually(async () =>
      (await running!.registry.metrics()).match(/eni_ipam_agent_datapath_enis_ready \d+/)?.[0]?.endsWith(' 1'),
    );
    expect(await running!.registry.metrics()).not.toMatch(/eni_ipam_agent_datapath_eni_problems\{eni="eni-4"/);
    // The datapath's metrics, with values by now, as Prometheus' own linter reads them.
    const text = await running!.registry.metrics();
    expect(text).toMatch(/^eni_ipam_agent_datapath_changes_total\{change="rule-add"\} [1-9]/m);
    const lint = await run(tool('promtool'), ['check', 'metrics'], text);
    expect(lint.stdout + lint.stderr).toBe('');
  }, 30_000);

  it('a rule the kernel refuses fails the ADD with a CNI error naming the ENI and the command; the rule set before it is taken back and the address released', async () => {
    expect((await cni(running!.socket, 'DEL', 'pod-b')).code).toBe(0);
    await new Promise((r) => setTimeout(r, 400)); // 10.1.2.11 cools down
    const before = await snapshot();
    const said = {
      refused:
        /cannot set up 10\.1\.2\.11 on ENI eni-2: `ip rule add priority 111 protocol 236 from 10\.1\.2\.11\/32 lookup 3001` failed: .*l3mdev/,
      unparsable: /cannot set up 10\.1\.2\.11 on ENI eni-2: ip -batch stopped: .*nosuchkey/,
    };
    for (const fault of ['refused', 'unparsable'] as const) {
      faults.egress = fault;
      let r: Awaited<ReturnType<typeof cni>>;
      try {
        r = await cni(running!.socket, 'ADD', 'pod-e');
      } finally {
        delete faults.egress;
      }
      expect(r.code).toBe(1);
      expect(r.out).toMatchObject({ code: 5, msg: expect.stringMatching(said[fault]) });
      // The ingress rule ran before it: taken back.
      expect(mentions(await rules(), '10.1.2.11')).toEqual([]);
      expect(await snapshot()).toEqual(before);
      expect(running!.agent.list().map((a) => a.containerId)).not.toContain('pod-e');
      await new Promise((r2) => setTimeout(r2, 400)); // the address cools down
    }
    expect(await running!.registry.metrics()).toMatch(
      /eni_ipam_agent_datapath_pod_failures_total\{eni="eni-2",reason="apply-failed"\} 2/,
    );
    // Once the kernel takes it, the retry works.
    const again = await cni(running!.socket, 'ADD', 'pod-e');
    expect(again.code).toBe(0);
    expect(mentions(await rules(), again.ip!)).toEqual(podRules(again.ip!, 3001));
  }, 30_000);

  it('without node routing (--node-routing=false), the same ADD succeeds and sets up nothing', async () => {
    const other = `${P}other`;
    await ip('netns', 'add', other);
    await ip(
      'link',
      'add',
      'eth1',
      'netns',
      other,
      'address',
      ENI2.mac,
      'type',
      'veth',
      'peer',
      'name',
      'vo',
      'netns',
      PEER,
    );
    await createPool('node-b', [ENI2]);
    const off = await startAgent({ routing: false, node: 'node-b', dir: mkdtempSync(join(tmpdir(), 'no-routing-')) });
    try {
      const r = await cni(off.socket, 'ADD', 'pod-x');
      expect(r.code).toBe(0);
      expect((await link('eth1', other)).flags).not.toContain('UP');
      expect(await table(3001, other)).toEqual([]);
      expect((await rules(other)).filter((x) => x.includes('proto 236'))).toEqual([]);
      expect(await off.registry.metrics()).not.toMatch(/eni_ipam_agent_datapath_/);
    } finally {
      await off.stop();
    }
  }, 30_000);
});
