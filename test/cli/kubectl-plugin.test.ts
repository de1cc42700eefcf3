/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import YAML from 'yaml';
import { POD_CLASS, allReady, conditionOf, poolWhere, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

// `kubectl eni-ipam` as a user runs it: found by kubectl's own plugin discovery on the PATH, against
// the emulated cluster, with a kubeconfig file; every number it prints checked against the world.
const BIN = fileURLToPath(new URL('../../bin', import.meta.url));
let c: TestCluster;
let dir: string;
let kubeconfig: string;
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function kubectl(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      'kubectl',
      args,
      {
        env: {
          ...process.env,
          PATH: `${BIN}${delimiter}${process.env.PATH}`,
          HOME: dir,
          KUBECONFIG: kubeconfig,
          ...env,
        },
        timeout: 30_000,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}
const plugin = (args: string[], env?: Record<string, string>) => kubectl(['eni-ipam', ...args], env);
const json = async (args: string[]) => {
  const r = await plugin([...args, '-o', 'json']);
  if (r.code !== 0) throw new Error(`kubectl eni-ipam ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};

let nodes: string[];
let exhausted: string;
beforeAll(async () => {
  c = await testCluster();
  dir = mkdtempSync(join(tmpdir(), 'kubectl-plugin-'));
  kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, c.kube.kubeconfig);
  // Zone i: vsw-i-pods and the nearly full vsw-i-small; zone j: vsw-j-pods.
  await c.addClass('default', { ...POD_CLASS, preAllocate: 4 });
  // A class whose one vSwitch has no address left: its node's pool is Exhausted, and says why.
  const small = c.ecs.world.vSwitches.get('vsw-i-small')!;
  small.pool.take(small.pool.free);
  await c.addClass('small', {
    vSwitchIDs: ['vsw-i-small'],
    securityGroupIDs: ['sg-demo-pods'],
    preAllocate: 4,
    priority: 10,
    nodeSelector: { matchLabels: { pool: 'small' } },
  });
  await c.startOperator();
  nodes = [await c.addNode('i-demo-02'), await c.addNode('i-demo-03')];
  exhausted = await c.addNode('i-demo-05', { pool: 'small' });
  await allReady(c, nodes);
  await poolWhere(c, exhausted, (p) => conditionOf(p, 'Exhausted')?.status === 'True', 20_000);
  // Judged again after the pools filled (as every resync does): the class publishes the room left.
  await c.operators[0]!.resync();
}, 60_000);
afterAll(() => c?.close());

describe('kubectl eni-ipam', () => {
  it('is found by kubectl’s plugin discovery, and says how it is used', async () => {
    const list = await kubectl(['plugin', 'list']);
    expect(list.stdout).toContain(join(BIN, 'kubectl-eni_ipam'));
    const help = await plugin(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: kubectl eni-ipam <command>/);
    for (const command of ['status', 'why POD', 'plan --class NAME --nodes N']) expect(help.stdout).toContain(command);
  });

  it('status: per vSwitch the room the cloud has and what the pools hold of it, per zone the nodes Ready', async () => {
    const s = await eventually(async () => {
      const view = await json(['status']);
      // The class's room as last described equals the world's once it has been judged after the fill.
      const fresh = view.vSwitches.every(
        (v: any) => v.freeIPs === undefined || v.freeIPs === c.ecs.world.vSwitches.get(v.vSwitch)!.pool.free,
      );
      return fresh ? view : undefined;
    }, 20_000);
    const pools = await c.pools();
    expect(s.totals).toEqual({
      nodes: 3,
      ready: 2,
      notReady: 1,
      enis: pools.reduce((n, p) => n + (p.status!.summary!.enis ?? 0), 0),
      availableIPs: pools.reduce((n, p) => n + (p.status!.summary!.available ?? 0), 0),
      usedIPs: 0,
    });
    for (const id of ['vsw-i-pods', 'vsw-i-small', 'vsw-j-pods']) {
      const row = s.vSwitches.find((v: any) => v.vSwitch === id);
      const held = pools.flatMap((p) => (p.status!.enis ?? []).filter((e) => e.vSwitchID === id));
      expect(row).toMatchObject({
        freeIPs: c.ecs.world.vSwitches.get(id)!.pool.free,
        enis: held.length,
        poolIPs: held.reduce((n, e) => n + e.ips!.length, 0),
        usedIPs: 0,
        classes: id === 'vsw-i-small' ? ['default', 'small'] : ['default'],
      });
    }
    expect(s.vSwitches.find((v: any) => v.vSwitch === 'vsw-i-small').freeIPs).toBe(0);
    expect(s.zones.map((z: any) => [z.zone, z.nodes, z.ready, z.exhausted])).toEqual([
      ['cn-hangzhou-i', 2, 1, 1],
      ['cn-hangzhou-j', 1, 1, 0],
    ]);
    expect(s.problems).toEqual([
      {
        node: exhausted,
        zone: 'cn-hangzhou-i',
        state: 'Exhausted',
        reason: 'VSwitchExhausted',
        message: expect.stringContaining('vsw-i-small'),
      },
    ]);
    const types = (await c.pools()).map((p) => p.spec.instanceType);
    expect(s.classes).toEqual([
      expect.objectContaining({
        name: 'default',
        nodes: 2,
        valid: 'True',
        zones: ['cn-hangzhou-h', 'cn-hangzhou-i', 'cn-hangzhou-j'],
        instanceTypes: expect.arrayContaining([expect.stringMatching(new RegExp(`^(${types.join('|')}) \\(\\d\\)$`))]),
      }),
      expect.objectContaining({ name: 'small', nodes: 1, valid: 'True', vSwitches: ['vsw-i-small'] }),
    ]);
    // The table says the same, as kubectl prints tables.
    const table = await plugin(['status']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^Nodes: +3 \(2 Ready, 1 not Ready\)$/m);
    expect(table.stdout).toMatch(/^ZONE +VSWITCH +FREE IN VSWITCH +ENIS +POOL IPS +USED +CLASSES$/m);
    const small = s.vSwitches.find((v: any) => v.vSwitch === 'vsw-i-small');
    expect(table.stdout).toMatch(
      new RegExp(
        `^cn-hangzhou-i +vsw-i-small +${small.freeIPs} +${small.enis} +${small.poolIPs} +0 +default,small$`,
        'm',
      ),
    );
    expect(table.stdout).toMatch(
      new RegExp(`^${exhausted} +cn-hangzhou-i +Exhausted +VSwitchExhausted +.*vsw-i-small`, 'm'),
    );
    // YAML too.
    expect(YAML.parse((await plugin(['status', '-o', 'yaml'])).stdout).totals.nodes).toBe(3);
  }, 30_000);

  it('why: a pod’s address with its ENI and vSwitch; a waiting pod, why, with its Events', async () => {
    const core = c.kc.makeApiClient(CoreV1Api);
    const [node] = nodes;
    const pool = await c.pool(node!);
    const eni = pool.status!.enis!.find((e) => e.ips?.length)!;
    const ip = eni.ips![0]!;
    await core.createNamespacedPod({
      namespace: 'default',
      body: { metadata: { name: 'web' }, spec: { nodeName: node, containers: [{ name: 'c', image: 'x' }] } },
    });
    await core.patchNamespacedPodStatus(
      { namespace: 'default', name: 'web', body: { status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] } } },
      merge,
    );
    const placed = await json(['why', 'web']);
    expect(placed.addresses).toEqual([
      { ip, eni: eni.id, vSwitch: eni.vSwitchID, zone: pool.spec.zoneID, deviceIndex: eni.deviceIndex },
    ]);
    expect(placed.waiting).toBeUndefined();
    const text = await plugin(['why', 'web', '-n', 'default']);
    expect(text.stdout).toMatch(
      new RegExp(
        `^IP: +${ip.replaceAll('.', '\\.')} on ENI ${eni.id} \\(device \\d+\\), vSwitch ${eni.vSwitchID}, zone ${pool.spec.zoneID}$`,
        'm',
      ),
    );

    // A pod in another namespace whose node's pool waits (its vSwitch is exhausted): the pool's words, and the pod's Events.
    await core.createNamespace({ body: { metadata: { name: 'apps' } } });
    const made = await core.createNamespacedPod({
      namespace: 'apps',
      body: { metadata: { name: 'queued' }, spec: { nodeName: exhausted, containers: [{ name: 'c', image: 'x' }] } },
    });
    await core.createNamespacedEvent({
      namespace: 'apps',
      body: {
        metadata: { generateName: 'queued.' },
        involvedObject: { apiVersion: 'v1', kind: 'Pod', namespace: 'apps', name: 'queued', uid: made.metadata!.uid },
        type: 'Warning',
        reason: 'WaitingForPodIP',
        message: 'no free pod IP on node yet',
        count: 3,
        source: { component: 'eni-ipam-agent' },
        firstTimestamp: new Date(),
        lastTimestamp: new Date(),
      },
    });
    const waiting = await json(['why', 'queued', '-n', 'apps']);
    expect(waiting.addresses).toEqual([]);
    const why = conditionOf(await c.pool(exhausted), 'Exhausted');
    expect(waiting.waiting).toBe(`the pool is exhausted (VSwitchExhausted: ${why.message})`);
    expect(waiting.waiting).toContain('vsw-i-small');
    expect(waiting.events).toEqual([
      expect.objectContaining({ reason: 'WaitingForPodIP', from: 'eni-ipam-agent', count: 3 }),
    ]);
    const said = (await plugin(['why', 'queued', '-n', 'apps'])).stdout;
    expect(said).toMatch(/^Waiting: +the pool is exhausted \(VSwitchExhausted: .*vsw-i-small.*\)$/m);
    expect(said).toMatch(/Warning +WaitingForPodIP +\d+s \(x3\) +eni-ipam-agent +no free pod IP on node yet/);
  }, 30_000);

  it('plan: what new nodes of a class would take, from what the cluster publishes, and where a vSwitch runs short', async () => {
    // As a node of the cluster's: the same type, the same zone; its real pool is what the planner said.
    // (nodes[1]: no pod was ever scheduled to it, so its pool is the warm pool alone.)
    const real = await c.pool(nodes[1]!);
    // The room the class publishes follows the pools within seconds (an earlier test grew one).
    const matchesWorld = (q: any) =>
      q.vSwitches.every((v: any) => v.freeBefore === c.ecs.world.vSwitches.get(v.id)!.pool.free);
    const p = await eventually(async () => {
      const q = await json([
        'plan',
        '--class',
        'default',
        '--nodes',
        '3',
        '--zone',
        real.spec.zoneID!,
        '--instance-type',
        real.spec.instanceType!,
        '--api-limits',
        'CreateNetworkInterface=60:2',
      ]);
      return matchesWorld(q) ? q : undefined;
    }, 20_000);
    expect(p).toMatchObject({
      class: 'default',
      instanceType: real.spec.instanceType,
      zone: real.spec.zoneID,
      nodes: 3,
      quotas: '--api-limits',
    });
    expect(p.perNode).toMatchObject({
      enis: real.status!.summary!.enis,
      ips: real.status!.summary!.available,
      ready: true,
    });
    expect(p.calls).toMatchObject({
      CreateNetworkInterface: 3 * p.perNode.enis,
      AttachNetworkInterface: 3 * p.perNode.enis,
    });
    // Past the burst of 2, the third create waits a second at 60 a minute.
    expect(p.predictedSeconds).toBeGreaterThanOrEqual(1);
    // Each ENI takes its own primary address from the vSwitch too.
    const taken = p.vSwitches.reduce((n: number, v: any) => n + v.freeBefore - v.freeAfter, 0);
    expect(taken).toBe(3 * (p.perNode.ips + p.perNode.enis));
    // The class whose vSwitch is full: a warning that names it, and nodes that would not be Ready.
    const short = await json(['plan', '--class', 'small', '--nodes', '2']);
    expect(short.perNode.ready).toBe(false);
    expect(short.warnings.join('\n')).toContain('vsw-i-small');
    const text = await plugin(['plan', '--class', 'small', '--nodes', '2']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^Warnings:$/m);
    expect(text.stdout).toMatch(/^Not all Ready: +2 pools would stay short/m);
    expect(short.predictedSeconds).toBeGreaterThanOrEqual(short.boundSeconds);
    const unknown = await plugin(['plan', '--class', 'default', '--nodes', '1', '--instance-type', 'ecs.x9.huge']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/the ENI limits of instance type ecs\.x9\.huge are not known here/);
  }, 30_000);

  it('bad input: one line naming what is wrong, exit 2; an unreachable cluster: one line, exit 1', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['frobnicate'], /^kubectl eni-ipam frobnicate: unknown command "frobnicate" \(commands: status, why, plan\)/],
      [['status', '--context', 'nope'], /context "nope" is not in the kubeconfig/],
      [['status', '-o', 'xml'], /-o takes table, json or yaml, not "xml"/],
      [['why'], /why needs the pod/],
      [['plan', '--class', 'default'], /plan needs --nodes N/],
      [
        ['plan', '--class', 'default', '--nodes', '2', '--pods-per-node', '5000'],
        /--pods-per-node takes a whole number from 0 to 1000/,
      ],
      [['status', '--colour'], /Unknown option '--colour'/],
    ];
    for (const [args, message] of cases) {
      const r = await plugin(args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(message)]);
    }
    const missing = await plugin(['why', 'nobody']);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe('kubectl eni-ipam why: pod default/nobody not found');
    const dead = join(dir, 'dead-kubeconfig');
    writeFileSync(dead, c.kube.kubeconfig.replace(/server: \S+/, 'server: https://127.0.0.1:1'));
    const r = await plugin(['status', '--kubeconfig', dead]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^kubectl eni-ipam status: cannot read \S+: .*ECONNREFUSED/),
    ]);
  }, 30_000);
});
