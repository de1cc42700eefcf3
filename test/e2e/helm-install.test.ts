/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { runtimeUnavailable, type EmulatedCluster } from '../../testbed/cluster/index.js';
import { eventually } from '../helpers/ecs.js';
import { CHART, setArgs } from '../helpers/helm.js';
import { type Kubectl } from '../helpers/kube.js';
import {
  allPoolsReady,
  chartCluster,
  isReady,
  kubectlJson,
  type Helm,
  installChart,
} from '../helpers/chart-cluster.js';
import { nodeCni } from '../helpers/node-cni.js';

// The chart installed for real: `helm install --wait` into an emulated cluster whose nodes run
// the chart's pods as local processes, with TLS, service-account tokens and the chart's RBAC.
// One cluster for the whole suite; the tests run in order.
const why = runtimeUnavailable();
if (why) console.warn(`helm install tests skipped: ${why}`);
const maybe = why ? describe.skip : describe;

let cluster: EmulatedCluster;
let kubectl: Kubectl;
let helm: Helm;
const NS = 'kube-system';
const until = <T>(fn: () => Promise<T | undefined | false | ''>, ms = 30_000) =>
  eventually(fn as () => Promise<T>, ms, 200);
const json = kubectlJson(() => kubectl);
const pods = async (component: string) =>
  (await json(['get', 'pods', '-n', NS, '-l', `app.kubernetes.io/component=${component}`])).items as any[];
const ready = isReady;
const leader = async () =>
  String((await json(['get', 'lease', '-n', NS, 'eni-ipam-operator'])).spec.holderIdentity ?? '');
/** The processes of the pods that ran (their container IDs carry the PID). */
const seenPids = new Set<number>();
const notePids = (ps: any[]) => {
  for (const p of ps)
    for (const c of p.status?.containerStatuses ?? [])
      if (c.containerID) seenPids.add(Number(c.containerID.split('/').at(-1)));
};
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const cni = (node: number, command: 'ADD' | 'DEL', containerId: string) => nodeCni(cluster, node, command, containerId);

maybe('helm install into an emulated cluster (root)', () => {
  beforeAll(async () => {
    ({ cluster, kubectl, helm } = await chartCluster({ nodes: 2, backoffBaseMs: 2000, name: 'helm-cluster' }));
  }, 60_000);

  afterAll(async () => {
    await cluster?.close();
  });

  test('helm install --wait brings up both operator replicas and one agent per node, all Ready; every pool becomes Ready', async () => {
    const r = await installChart(helm, cluster);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // helm --wait lets a DaemonSet or a Deployment be short of maxUnavailable (the agents' 10%, at
    // least one; the operators' 1) pods; rollout status waits for all.
    expect((await kubectl(['rollout', 'status', '-n', NS, 'daemonset/eni-ipam-agent', '--timeout=60s'])).code).toBe(0);
    expect((await kubectl(['rollout', 'status', '-n', NS, 'deployment/eni-ipam-operator', '--timeout=60s'])).code).toBe(
      0,
    );
    const operators = await pods('operator');
    const agents = await pods('agent');
    expect(operators).toHaveLength(2);
    expect(operators.every(ready)).toBe(true);
    expect(agents.map((p) => p.spec.nodeName).sort()).toEqual([...cluster.nodes].sort());
    expect(agents.every(ready)).toBe(true);
    // Agents and operators in the node's network (pod addresses come from the operator), one operator per node (its ports are the node's).
    for (const a of agents) expect(a.status.podIP).toBe(a.status.hostIP);
    for (const o of operators) expect(o.status.podIP).toBe(o.status.hostIP);
    expect(new Set(operators.map((o) => o.spec.nodeName)).size).toBe(2);
    // Requests without equal limits.
    expect(operators[0].status.qosClass).toBe('Burstable');
    // The nodes' addresses are routed from the machine: the metrics port answers there, as the README shows.
    const metrics = await (await fetch(`http://${operators[0].status.hostIP}:9492/metrics`)).text();
    expect(metrics).toContain('eni_ipam_');
    notePids([...operators, ...agents]);
    await until(() => allPoolsReady(json, cluster));
  }, 120_000);

  test('a CNI ADD through the plugin the init container installed on a node gets an IP of its pool; DEL releases it', async () => {
    const add = await cni(0, 'ADD', 'c0ffee01');
    expect(add.stderr).toBe('');
    expect(add.code).toBe(0);
    const result = JSON.parse(add.stdout);
    const ip = String(result.ips[0].address).split('/')[0];
    const pool = await json(['get', 'enipool', cluster.nodes[0]!]);
    const poolIps = JSON.stringify(pool.status);
    expect(poolIps).toContain(ip);
    const del = await cni(0, 'DEL', 'c0ffee01');
    expect(del.code).toBe(0);
  }, 60_000);

  test("the agent runs with exactly the chart's RBAC: a removed rule surfaces as a 403 in its log, not a hang", async () => {
    const role = await json(['get', 'clusterrole', 'eni-ipam-agent']);
    const without = { ...role, rules: role.rules.filter((r: any) => !(r.resources ?? []).includes('enipools/status')) };
    expect(without.rules.length).toBe(role.rules.length - 1);
    expect((await kubectl(['replace', '-f', '-'], JSON.stringify(without))).code).toBe(0);
    try {
      expect(
        (
          await kubectl([
            'auth',
            'can-i',
            'patch',
            'enipools/status',
            '--as',
            `system:serviceaccount:${NS}:eni-ipam-agent`,
          ])
        ).stdout.trim(),
      ).toBe('no');
      // An allocation changes the pool's status; writing it is now forbidden.
      expect((await cni(0, 'ADD', 'c0ffee02')).code).toBe(0);
      const agent = (await pods('agent')).find((p) => p.spec.nodeName === cluster.nodes[0])!;
      const line = await until(async () => {
        const logs = (await kubectl(['logs', '-n', NS, agent.metadata.name])).stdout;
        return logs.split('\n').find((l) => l.includes('could not write the pool status') && l.includes('403'));
      });
      // The API server's own words, once: not client-node's escaped body.
      expect(JSON.parse(line!).err).toBe(
        `403 Forbidden: enipools.eniipam.io "${cluster.nodes[0]}" is forbidden: User "system:serviceaccount:${NS}:eni-ipam-agent" cannot patch resource "enipools/status" in API group "eniipam.io" at the cluster scope`,
      );
    } finally {
      const current = await json(['get', 'clusterrole', 'eni-ipam-agent']);
      expect((await kubectl(['replace', '-f', '-'], JSON.stringify({ ...current, rules: role.rules }))).code).toBe(0);
    }
    await cni(0, 'DEL', 'c0ffee02');
  }, 60_000);

  test('deleting the leader pod hands leadership to another replica at once', async () => {
    const before = await until(leader);
    const operators = await pods('operator');
    const leaderPod = operators.find((p) => before.startsWith(`${p.metadata.name}-`))!;
    expect(leaderPod).toBeDefined();
    const t0 = Date.now();
    expect((await kubectl(['delete', 'pod', '-n', NS, leaderPod.metadata.name, '--wait=false'])).code).toBe(0);
    // The standby, or the replacement pod if it is quicker: either way not the deleted one.
    const after = await until(async () => {
      const h = await leader();
      return h !== '' && !h.startsWith(`${leaderPod.metadata.name}-`) && h;
    });
    expect((await pods('operator')).some((p) => after.startsWith(`${p.metadata.name}-`))).toBe(true);
    // Released on SIGTERM: taken over at once, not after the lease expires (15 s).
    expect(Date.now() - t0).toBeLessThan(12_000);
    expect((await kubectl(['rollout', 'status', '-n', NS, 'deployment/eni-ipam-operator', '--timeout=60s'])).code).toBe(
      0,
    );
    notePids(await pods('operator'));
  }, 90_000);

  test('helm upgrade --set operator.mode=read-only rolls the operator; helm rollback rolls it back', async () => {
    const up = await helm([
      'upgrade',
      'eni-ipam',
      CHART,
      '--reuse-values',
      '--set',
      'operator.mode=read-only',
      '--wait',
      '--timeout',
      '90s',
    ]);
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    // helm --wait returns with one new replica ready (maxUnavailable 1); the rollout goes on.
    expect((await kubectl(['rollout', 'status', '-n', NS, 'deployment/eni-ipam-operator', '--timeout=60s'])).code).toBe(
      0,
    );
    const rolled = await pods('operator');
    expect(
      rolled
        .filter((p) => !p.metadata.deletionTimestamp)
        .every((p) => p.spec.containers[0].args.includes('--mode=read-only')),
    ).toBe(true);
    expect(
      (await json(['get', 'deployment', '-n', NS, 'eni-ipam-operator'])).metadata.annotations[
        'deployment.kubernetes.io/revision'
      ],
    ).toBe('2');
    await until(
      async () =>
        (await leader()) !== '' &&
        (await pods('operator')).some((p) => ((p.status?.containerStatuses ?? [])[0]?.ready ?? false) as boolean),
    );
    notePids(rolled);

    const back = await helm(['rollback', 'eni-ipam', '1', '--wait', '--timeout', '90s']);
    expect(back.code).toBe(0);
    expect((await kubectl(['rollout', 'status', '-n', NS, 'deployment/eni-ipam-operator', '--timeout=60s'])).code).toBe(
      0,
    );
    const after = (await pods('operator')).filter((p) => !p.metadata.deletionTimestamp);
    expect(after.every((p) => p.spec.containers[0].args.includes('--mode=normal'))).toBe(true);
    expect(
      (await json(['get', 'deployment', '-n', NS, 'eni-ipam-operator'])).metadata.annotations[
        'deployment.kubernetes.io/revision'
      ],
    ).toBe('3');
    notePids(after);
  }, 180_000);

  test('helm upgrade --wait with a wrong AccessKey fails instead of rolling out: the working replica keeps leading', async () => {
    expect(
      (
        await kubectl([
          'create',
          'secret',
          'generic',
          'wrong-key',
          '-n',
          NS,
          '--from-literal=access-key-id=demo',
          '--from-literal=access-key-secret=not-the-secret',
        ])
      ).code,
    ).toBe(0);
    const up = await helm([
      'upgrade',
      'eni-ipam',
      CHART,
      '--reuse-values',
      '--set',
      'credentials.secret.name=wrong-key',
      '--wait',
      '--timeout',
      '40s',
    ]);
    expect(up.code).not.toBe(0);
    expect(up.stderr).toContain('context deadline exceeded');
    // The new replicas cannot read the cloud: never ready, and they leave the Lease to one that can.
    const operators = await pods('operator');
    const broken = operators.filter((p) => p.spec.volumes?.some((v: any) => v.secret?.secretName === 'wrong-key'));
    expect(broken.length).toBeGreaterThan(0);
    expect(broken.some(ready)).toBe(false);
    const holder = await leader();
    const leading = operators.find((p) => holder.startsWith(`${p.metadata.name}-`));
    expect(leading?.spec.volumes?.some((v: any) => v.secret?.secretName === 'eni-ipam-access-key')).toBe(true);
    const back = await helm(['rollback', 'eni-ipam', '3', '--wait', '--timeout', '90s']);
    expect(back.code).toBe(0);
    expect((await kubectl(['rollout', 'status', '-n', NS, 'deployment/eni-ipam-operator', '--timeout=90s'])).code).toBe(
      0,
    );
    notePids(await pods('operator'));
  }, 180_000);

  test("credentials.mode=ramRole: the operator gets the node's RAM role credentials at the instance metadata address", async () => {
    const role = cluster.ecs.fixture.ramRoles![0]!.name;
    const up = await helm([
      'upgrade',
      'eni-ipam',
      CHART,
      '--reuse-values',
      '--set',
      'credentials.mode=ramRole',
      '--set',
      `credentials.ramRole.name=${role}`,
      '--wait',
      '--timeout',
      '90s',
    ]);
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    // The leader's first ENI resync is signed with those credentials: it fails without them.
    const logs = await until(async () => {
      for (const p of await pods('operator')) {
        if (p.metadata.deletionTimestamp || !p.spec.containers[0].args.includes(`--ram-role=${role}`)) continue;
        const text = (await kubectl(['logs', '-n', NS, p.metadata.name])).stdout;
        if (text.includes('full ENI resync done')) return text;
      }
      return undefined;
    }, 60_000);
    expect(logs).toContain(`"credentials":"ECS RAM role ${role}"`);
    expect(logs).not.toContain('initial ENI resync failed');
    notePids(await pods('operator'));
  }, 120_000);

  test('credentials.mode=rrsa: the operator trades its projected service-account token with STS', async () => {
    const role = cluster.ecs.fixture.oidcRoles![0]!;
    const up = await helm([
      'upgrade',
      'eni-ipam',
      CHART,
      '--reuse-values',
      '--wait',
      '--timeout',
      '90s',
      ...setArgs([
        'credentials.mode=rrsa',
        'credentials.rrsa.roleName=eni-ipam',
        `credentials.rrsa.roleArn=${role.roleArn}`,
        `credentials.rrsa.oidcProviderArn=${role.oidcProviderArn}`,
        `endpoints.sts=${cluster.ecs.url}`,
      ]),
    ]);
    expect(up.stderr).toBe('');
    expect(up.code).toBe(0);
    const logs = await until(async () => {
      for (const p of await pods('operator')) {
        if (p.metadata.deletionTimestamp || !p.spec.containers[0].args.includes(`--sts-endpoint=${cluster.ecs.url}`))
          continue;
        const text = (await kubectl(['logs', '-n', NS, p.metadata.name])).stdout;
        if (text.includes('full ENI resync done')) return text;
      }
      return undefined;
    }, 60_000);
    expect(logs).toContain(`"credentials":"RRSA role ${role.roleArn}"`);
    expect(logs).not.toContain('initial ENI resync failed');
    notePids(await pods('operator'));
  }, 120_000);

  test('helm uninstall leaves no process, no pod and no lease behind; the CRDs and pools stay', async () => {
    const r = await helm(['uninstall', 'eni-ipam', '--wait', '--timeout', '90s']);
    expect(r.code).toBe(0);
    await until(async () => (await json(['get', 'pods', '-n', NS])).items.length === 0);
    // kube-apiserver's own identity Lease is Kubernetes', not the chart's.
    expect((await json(['get', 'leases', '-n', NS, '-l', '!apiserver.kubernetes.io/identity'])).items).toEqual([]);
    expect((await json(['get', 'deployments,daemonsets,replicasets', '-n', NS])).items).toEqual([]);
    expect(seenPids.size).toBeGreaterThanOrEqual(4);
    await until(async () => [...seenPids].every((pid) => !alive(pid)));
    expect((await json(['get', 'crd'])).items.map((c: any) => c.metadata.name).sort()).toEqual([
      'enipoolclasses.eniipam.io',
      'enipools.eniipam.io',
    ]);
    expect((await json(['get', 'enipools'])).items).toHaveLength(cluster.nodes.length);
  }, 120_000);
});
