/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { chartValues, runtimeUnavailable, type EmulatedCluster } from '../../testbed/cluster/index.js';
import { cniPluginsUnavailable } from '../../testbed/cluster/runtime/node-image.js';
import { nodeObject } from '../../testbed/ecs/index.js';
import { eventually, pop } from '../helpers/ecs.js';
import { CHART, ROOT, setArgs, template } from '../helpers/helm.js';
import { type Kubectl } from '../helpers/kube.js';
import { allPoolsReady, chartCluster, isReady, kubectlJson, type Helm } from '../helpers/chart-cluster.js';
import { nodeCni } from '../helpers/node-cni.js';
import { roleAudit } from '../helpers/rbac-audit.js';

// The chart used as users use it, start to end, under its own RBAC: addresses released, a pod
// told why it waits, a pool deleted by hand, a node leaving, a leaked ENI collected, the Lease
// deleted, an agent restarted without its state, and the README's uninstall. Then the API
// server's audit log of the run is held against the chart's roles: every request allowed, and
// every permission granted used.
const why = runtimeUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`helm lifecycle tests skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const NS = 'kube-system';
const CLUSTER = 'emulated';
const OPERATOR = `system:serviceaccount:${NS}:eni-ipam-operator`;
const AGENT = `system:serviceaccount:${NS}:eni-ipam-agent`;
let cluster: EmulatedCluster;
let kubectl: Kubectl;
let helm: Helm;
let values: string[];
/** When the README's uninstall began (requests refused after it are the roles going first). */
let uninstalledAt = Infinity;

const until = <T>(fn: () => Promise<T | undefined | false | ''>, ms = 30_000) =>
  eventually(fn as () => Promise<T>, ms, 250);
const json = kubectlJson(() => kubectl);
const pool = (node: string) => json(['get', 'enipool', node]);
const ready = isReady;
const calls = (action: string, since = 0) => cluster.ecs.calls({ since, action });
const tag = (o: { tags: Array<{ key: string; value: string }> }, key: string) =>
  o.tags.find((t) => t.key === key)?.value;
/** ENIs of this cluster the cloud still holds (what a leak would leave). */
const tagged = (node?: string) =>
  [...cluster.ecs.world.enis.values()].filter(
    (e) => tag(e, 'eni-ipam.io/cluster') === CLUSTER && (node === undefined || tag(e, 'eni-ipam.io/node') === node),
  );

async function cni(node: number, command: 'ADD' | 'DEL', containerId: string) {
  const r = await nodeCni(cluster, node, command, containerId);
  if (r.code !== 0) throw new Error(`CNI ${command} on ${cluster.kubelets[node]!.node}: ${r.stdout} ${r.stderr}`);
  return command === 'ADD' ? String(JSON.parse(r.stdout).ips[0].address).split('/')[0]! : '';
}

/** An ADD retried while the pool has no free address yet (code 11, "try again later"), as a runtime retries it. */
const add = (node: number, containerId: string) =>
  eventually(() => cni(node, 'ADD', containerId).catch(() => undefined), 60_000, 500);

maybe('the chart through a whole life, under its own RBAC (root)', () => {
  beforeAll(async () => {
    ({ cluster, kubectl, helm } = await chartCluster({ nodes: 2, backoffBaseMs: 1000, name: 'helm-life' }));
    values = [
      ...chartValues(cluster),
      'defaultClass.spec.preAllocate=2',
      'defaultClass.spec.releaseExcessIPs=true',
      'defaultClass.spec.releaseDelaySeconds=2',
      'defaultClass.spec.deleteEmptyENIs=true',
      'operator.gcIntervalSeconds=10',
      'operator.gcMinAgeSeconds=0',
      'agent.cooldownSeconds=1',
      'agent.podEventIntervalSeconds=1',
    ];
  }, 60_000);

  afterAll(async () => {
    await cluster?.close();
  });

  test('installs, and every pool becomes Ready', async () => {
    const r = await helm(['install', 'eni-ipam', CHART, '--wait', '--timeout', '90s', ...setArgs(values)]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((await kubectl(['rollout', 'status', '-n', NS, 'daemonset/eni-ipam-agent', '--timeout=60s'])).code).toBe(0);
    await until(() => allPoolsReady(json, cluster));
  }, 150_000);

  test('addresses a node no longer needs are released through the handshake, under the chart’s RBAC', async () => {
    const node = cluster.nodes[0]!;
    const since = Date.now();
    const held: string[] = [];
    for (let i = 0; i < 8; i++) held.push(await add(0, `burst-${i}`));
    await until(async () => ((await pool(node)).status?.summary?.available ?? 0) >= 10);
    const grown = (await pool(node)).status.summary.available;
    for (let i = 0; i < 8; i++) await cni(0, 'DEL', `burst-${i}`);
    // Cool-down (1 s), excess for releaseDelaySeconds (2 s), the agent's ack, a live read, the unassign.
    await until(
      async () => calls('UnassignPrivateIpAddresses', since).length + calls('DeleteNetworkInterface', since).length > 0,
      60_000,
    );
    await until(async () => (await pool(node)).status.summary.available < grown, 30_000);
    const logs = (await kubectl(['logs', '-n', NS, 'deployment/eni-ipam-operator'])).stdout;
    expect(logs).not.toContain('403');
  }, 120_000);

  test('a pod that waits for an address is told why on the pod (kubectl describe), then gets one, under the chart’s RBAC', async () => {
    const node = cluster.nodes[0]!;
    // No vSwitch of the class has an address left, and the node's pool is all taken.
    const vSwitches = [...cluster.ecs.world.vSwitches.values()].filter((v) => tag(v, 'role') === 'pods');
    const taken = vSwitches.map((v) => ({ v, ips: v.pool.take(v.pool.free) ?? [] }));
    const fillers: string[] = [];
    try {
      for (let i = 0; i < 64; i++) {
        const took = await cni(0, 'ADD', `filler-${i}`).then(
          () => true,
          () => false,
        );
        if (!took) break;
        fillers.push(`filler-${i}`);
      }
      expect(
        (
          await kubectl([
            'run',
            'waiting',
            '--image=eni-ipam/toolbox:latest',
            `--overrides={"spec":{"nodeName":"${node}"}}`,
          ])
        ).code,
      ).toBe(0);
      const uid = (await json(['get', 'pod', 'waiting'])).metadata.uid;
      // Its sandbox fails while the pool is empty: the agent says why on the pod, in the pool's words, and
      // counts the runtime's retries on that Event (agent.podEventIntervalSeconds=1 here).
      const told = await until(async () => {
        const events = (await json(['get', 'events', '--field-selector', 'involvedObject.name=waiting'])).items;
        return events.find(
          (e: any) =>
            e.source?.component === 'eni-ipam-agent' &&
            e.reason === 'WaitingForPodIP' &&
            /the pool is exhausted \(VSwitchExhausted/.test(e.message) &&
            e.count >= 2,
        );
      }, 120_000).catch(async (e) => {
        // What the pod and the node's agent saw, for a failure on a loaded machine.
        const events = (await json(['get', 'events', '--field-selector', 'involvedObject.name=waiting'])).items;
        const agent = (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items.find(
          (p: any) => p.spec.nodeName === node,
        );
        const logs = agent ? (await kubectl(['logs', '-n', NS, agent.metadata.name, '--tail=30'])).stdout : 'no agent';
        const seen = events.map((x: any) => `${x.reason} x${x.count}: ${x.message}`).join('\n');
        throw new Error(`${(e as Error).message}\n${seen}\n${logs}`);
      });
      expect(told.involvedObject).toMatchObject({ kind: 'Pod', namespace: 'default', name: 'waiting', uid });
      expect(told.message).toMatch(new RegExp(`^no free pod IP on node ${node} yet: the pool is exhausted`));
      const described = (await kubectl(['describe', 'pod', 'waiting'])).stdout;
      expect(described).toMatch(
        /Warning\s+WaitingForPodIP\s+.*eni-ipam-agent\s+no free pod IP on node \S+ yet: the pool is exhausted/,
      );
      // The runtime's own Event quotes the same reason (the CNI error).
      expect(described).toMatch(/FailedCreatePodSandBox.*the pool is exhausted/);
      // An address comes back: the pod gets it, and is told.
      await cni(0, 'DEL', fillers.shift()!);
      const running = await until(async () => {
        const p = await json(['get', 'pod', 'waiting']);
        return p.status?.podIP ? p : undefined;
      }, 60_000);
      await until(async () => {
        const events = (await json(['get', 'events', '--field-selector', 'involvedObject.name=waiting'])).items;
        return events.some(
          (e: any) => e.reason === 'PodIPAssigned' && e.message.startsWith(`${running.status.podIP} (ENI eni-`),
        );
      }, 30_000);
    } finally {
      for (const { v, ips } of taken) for (const ip of ips) v.pool.release(ip);
      await kubectl(['delete', 'pod', 'waiting', '--wait=false']);
      for (const f of fillers) await cni(0, 'DEL', f);
    }
  }, 240_000);

  test('a pool deleted by hand on a live node: its ENIs go once the agent confirms them free, and a new pool is made at once', async () => {
    const node = cluster.nodes[1]!;
    const before = await pool(node);
    const enis = before.status.enis.map((e: any) => e.id);
    const inUse = await add(1, 'holder-1');
    const deleting = kubectl(['delete', 'enipool', node, '--timeout=90s']);
    // The agent keeps an address in use: its ENI waits (the Event repeats), the others go.
    await until(async () => {
      // Events about a (cluster-scoped) pool are in `default`, as the API server requires.
      const events = (await json(['get', 'events', '-n', 'default', '--field-selector', `involvedObject.name=${node}`]))
        .items;
      return events.some((e: any) => e.reason === 'ENIsInUse' && e.count >= 2);
    }, 60_000);
    expect(tagged(node).some((e) => [e.primaryIp, ...e.secondaryIps].includes(inUse))).toBe(true);
    await cni(1, 'DEL', 'holder-1');
    expect((await deleting).code).toBe(0);
    await until(async () => enis.every((id: string) => !tagged(node).some((e) => e.id === id)), 60_000);
    const again = await until(async () => {
      const p = await pool(node).catch(() => undefined);
      return p && p.metadata.uid !== before.metadata.uid && ready(p) ? p : undefined;
    }, 60_000);
    expect(again.spec.className).toBe('default');
  }, 180_000);

  test('a node that leaves with its instance: its pool goes and its ENIs are deleted', async () => {
    const instance = [...cluster.ecs.world.instances.values()][cluster.nodes.length]!;
    const node = nodeObject(cluster.ecs.world, instance.id, {});
    expect((await kubectl(['create', '-f', '-'], JSON.stringify(node))).code).toBe(0);
    const name = node.metadata.name;
    await until(async () => ready(await pool(name).catch(() => undefined)), 60_000);
    expect(tagged(name).length).toBeGreaterThan(0);
    cluster.ecs.world.releaseInstance(instance.id);
    expect((await kubectl(['delete', 'node', name])).code).toBe(0);
    await until(async () => (await kubectl(['get', 'enipool', name])).code !== 0, 60_000);
    await until(async () => tagged(name).length === 0, 60_000);
  }, 150_000);

  test('a leaked ENI of the cluster (in no pool) is collected', async () => {
    const key = cluster.ecs.fixture.credentials[0]!;
    const vSwitch = [...cluster.ecs.world.vSwitches.values()].find((v) => tag(v, 'role') === 'pods')!;
    const client = pop(cluster.ecs.url, 'ecs', key);
    const made = (await client.request(
      'CreateNetworkInterface',
      {
        RegionId: cluster.ecs.world.region,
        VSwitchId: vSwitch.id,
        SecurityGroupIds: ['sg-demo-pods'],
        Tag: [
          { Key: 'eni-ipam.io/cluster', Value: CLUSTER },
          { Key: 'eni-ipam.io/node', Value: 'a-node-long-gone' },
          { Key: 'eni-ipam.io/creator', Value: 'eni-ipam-operator' },
        ],
      },
      { method: 'POST' },
    )) as { NetworkInterfaceId: string };
    await until(async () => !cluster.ecs.world.enis.has(made.NetworkInterfaceId), 60_000);
  }, 90_000);

  test('the Lease deleted under the operators: one of them makes it again and leads', async () => {
    expect((await kubectl(['delete', 'lease', '-n', NS, 'eni-ipam-operator'])).code).toBe(0);
    const lease = await until(async () => {
      const l = await json(['get', 'lease', '-n', NS, 'eni-ipam-operator']).catch(() => undefined);
      return l?.spec?.holderIdentity ? l : undefined;
    }, 60_000);
    expect(lease.spec.holderIdentity).toMatch(/^eni-ipam-operator-/);
    expect((await kubectl(['rollout', 'status', '-n', NS, 'deployment/eni-ipam-operator', '--timeout=90s'])).code).toBe(
      0,
    );
  }, 120_000);

  test('an agent restarted without its state keeps the address a pod holds', async () => {
    const node = cluster.nodes[0]!;
    const kept = await add(0, 'survivor-1');
    const agent = (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items.find(
      (p: any) => p.spec.nodeName === node,
    );
    const stateDir = join(cluster.kubeconfigPath, '..', 'nodes', node, 'root', 'var/lib/eni-ipam');
    rmSync(stateDir, { recursive: true, force: true });
    expect((await kubectl(['delete', 'pod', '-n', NS, agent.metadata.name])).code).toBe(0);
    await until(async () => {
      const events = (await json(['get', 'events', '-n', 'default'])).items;
      return events.some((e: any) => e.reason === 'RecoveredAllocations' && e.involvedObject.name === node);
    }, 90_000);
    // The recovered address is its holder's still: a new allocation gets another.
    const other = await add(0, 'newcomer-1');
    expect(other).not.toBe(kept);
    await cni(0, 'DEL', 'newcomer-1');
    await cni(0, 'DEL', 'survivor-1');
  }, 150_000);

  test('the README’s uninstall: classes, then pools deleted (it returns), helm uninstall, CRDs deleted; no ENI of the cluster left', async () => {
    // Classes first: while one selects a node, a deleted pool is made again at once.
    expect((await kubectl(['delete', 'enipoolclasses', '--all'])).code).toBe(0);
    // As the README's `kubectl delete enipools --all`, without holding a kubectl open for longer than its 30 s here.
    const del = await kubectl(['delete', 'enipools', '--all', '--wait=false']);
    expect(del.stderr).toBe('');
    expect(del.code).toBe(0);
    await until(async () => (await json(['get', 'enipools'])).items.length === 0, 120_000).catch(async (e) => {
      const left = (await json(['get', 'enipools'])).items.map((p: any) => ({
        name: p.metadata.name,
        finalizers: p.metadata.finalizers,
        requests: Object.keys(p.status?.releaseRequests ?? {}).length,
        acks: p.status?.releaseAcks,
        used: p.status?.used,
      }));
      const events = (await json(['get', 'events', '-n', NS])).items.map(
        (x: any) => `${x.involvedObject.name} ${x.reason}: ${x.message}`,
      );
      throw new Error(`${(e as Error).message}: ${JSON.stringify(left)}\n${events.slice(-15).join('\n')}`);
    });
    uninstalledAt = Date.now();
    const un = await helm(['uninstall', 'eni-ipam', '--wait', '--timeout', '90s']);
    expect(un.code).toBe(0);
    expect((await kubectl(['delete', '-f', join(ROOT, 'crds')])).code).toBe(0);
    await until(async () => tagged().length === 0, 30_000);
    expect(tagged()).toEqual([]);
  }, 240_000);

  test('the chart’s roles grant exactly what the operator and the agent used in this run', async () => {
    const objs = await template(values);
    for (const [user, account] of [
      [OPERATOR, 'eni-ipam-operator'],
      [AGENT, 'eni-ipam-agent'],
    ] as const) {
      const entries = cluster.kube.audit({ user });
      expect(entries.length).toBeGreaterThan(10);
      // Every request was allowed: a 403 is a permission the chart lacks. Once helm uninstall has begun, the
      // roles go while the pods still stop (a Role may go before the operator gives its Lease back): not a lack.
      // Nothing the code did that the chart does not grant, and nothing granted that the code did not use.
      expect(roleAudit(entries, objs, account, uninstalledAt)).toEqual({ refused: [], ungranted: [], unused: [] });
    }
  }, 60_000);
});
