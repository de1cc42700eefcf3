/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { silentLogger } from '../../../src/observability/logger.js';
import { startControllers, type Controllers } from '../../../testbed/cluster/controllers/index.js';
import { Objects, podReady, setCondition } from '../../../testbed/cluster/objects.js';
import type { KubeEmulator } from '../../../testbed/kube/index.js';
import { eventually } from '../../helpers/ecs.js';

const until = (fn: () => void) => eventually(() => (fn(), true), 8000);
import { kubectlFor, type Kubectl } from '../../helpers/kube.js';
import { http, kube } from '../../helpers/kube-emulator.js';

// The controllers with real kubectl; the test plays the kubelet (it marks bound pods Ready),
// since no node runtime runs here (the runtime's own tests need root).
let emu: KubeEmulator;
let kubectl: Kubectl;
let controllers: Controllers;
let objects: Objects;
let kubelet: NodeJS.Timeout;
/** Pods the fake kubelet leaves not ready (by name prefix). */
const holdBack = new Set<string>();

const node = (name: string, extra: any = {}) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name, labels: { 'kubernetes.io/hostname': name, ...extra.labels } },
  spec: extra.spec ?? {},
  status: { conditions: [{ type: 'Ready', status: 'True' }] },
});

const deployment = (image: string, o: { replicas?: number; strategy?: any } = {}) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web', namespace: 'default' },
  spec: {
    replicas: o.replicas ?? 3,
    selector: { matchLabels: { app: 'web' } },
    strategy: o.strategy,
    template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image }] } },
  },
});

const daemonSet = (image: string) => ({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  metadata: { name: 'agent', namespace: 'default' },
  spec: {
    selector: { matchLabels: { app: 'agent' } },
    template: {
      metadata: { labels: { app: 'agent' } },
      spec: { nodeSelector: { 'kubernetes.io/os': 'linux' }, containers: [{ name: 'agent', image }] },
    },
  },
});

const apply = async (o: unknown) => {
  const r = await kubectl(['apply', '-f', '-'], JSON.stringify(o));
  expect(r.code).toBe(0);
  return r;
};

const pods = (selector: string) => objects.list('pods', 'default').filter((p) => p.metadata.labels?.app === selector);

beforeAll(async () => {
  ({ emu } = await kube());
  kubectl = kubectlFor(emu);
  objects = new Objects(emu.store);
  controllers = startControllers(objects, silentLogger());
  for (const n of [
    node('node-a', { labels: { 'kubernetes.io/os': 'linux' } }),
    node('node-b', { labels: { 'kubernetes.io/os': 'linux' } }),
    node('node-c', {
      labels: { 'kubernetes.io/os': 'linux' },
      spec: { taints: [{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }] },
    }),
    node('node-win', { labels: { 'kubernetes.io/os': 'windows' } }),
  ]) {
    expect((await http(emu, 'POST', '/api/v1/nodes', n)).status).toBe(201);
  }
  kubelet = setInterval(() => {
    for (const p of objects.list('pods')) {
      if (
        !p.spec?.nodeName ||
        p.metadata.deletionTimestamp ||
        podReady(p) ||
        [...holdBack].some((h) => p.spec.containers[0].image.includes(h))
      )
        continue;
      objects.updateStatus('pods', p.metadata.namespace, p.metadata.name!, {
        ...p.status,
        phase: 'Running',
        conditions: setCondition(setCondition(p.status?.conditions, { type: 'ContainersReady', status: 'True' }), {
          type: 'Ready',
          status: 'True',
        }),
        containerStatuses: p.spec.containers.map((c: any) => ({
          name: c.name,
          image: c.image,
          ready: true,
          restartCount: 0,
          started: true,
          state: { running: { startedAt: new Date().toISOString() } },
        })),
      });
    }
  }, 50);
});

afterAll(async () => {
  clearInterval(kubelet);
  controllers.stop();
  await emu.close();
});

describe('Deployments', () => {
  test('kubectl rollout status waits for the replicas; pods spread over the nodes that fit; -o wide shows the node', async () => {
    await apply(deployment('web:1'));
    const r = await kubectl(['rollout', 'status', 'deployment/web', '--timeout=20s']);
    expect(r.stdout).toContain('deployment "web" successfully rolled out');
    const placed = pods('web')
      .map((p) => p.spec.nodeName)
      .sort();
    expect(placed).toEqual(['node-a', 'node-b', 'node-win'].sort());
    const wide = await kubectl(['get', 'pods', '-o', 'wide', '-l', 'app=web']);
    expect(wide.stdout).toMatch(/web-\w+-\w+\s+1\/1\s+Running\s+0\s+\S+\s+<none>\s+node-/);
    const d = JSON.parse((await kubectl(['get', 'deployment', 'web', '-o', 'json'])).stdout);
    expect(d.status).toMatchObject({
      observedGeneration: 1,
      replicas: 3,
      updatedReplicas: 3,
      readyReplicas: 3,
      availableReplicas: 3,
    });
    expect(d.status.conditions.map((c: any) => `${c.type}=${c.status}/${c.reason}`)).toEqual([
      'Available=True/MinimumReplicasAvailable',
      'Progressing=True/NewReplicaSetAvailable',
    ]);
    const rs = JSON.parse((await kubectl(['get', 'rs', '-l', 'app=web', '-o', 'json'])).stdout).items;
    expect(rs).toHaveLength(1);
    expect(rs[0].metadata.annotations['deployment.kubernetes.io/revision']).toBe('1');
    expect(rs[0].metadata.ownerReferences[0]).toMatchObject({ kind: 'Deployment', name: 'web', controller: true });
    expect(pods('web')[0]!.metadata.ownerReferences![0]).toMatchObject({
      kind: 'ReplicaSet',
      name: rs[0].metadata.name,
    });
  });

  test('a new template rolls within maxSurge and maxUnavailable; a stuck rollout is not reported done; rollout undo goes back', async () => {
    holdBack.add('web:2');
    await apply(
      deployment('web:2', { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }),
    );
    // maxUnavailable 0: all three old pods stay while the one surge pod is not ready.
    await until(() => {
      const all = pods('web').filter((p) => !p.metadata.deletionTimestamp);
      expect(all.filter((p) => p.spec.containers[0].image === 'web:2')).toHaveLength(1);
      expect(all.filter((p) => p.spec.containers[0].image === 'web:1')).toHaveLength(3);
    });
    const stuck = await kubectl(['rollout', 'status', 'deployment/web', '--timeout=1s']);
    expect(stuck.code).not.toBe(0);
    expect(stuck.stdout).toContain('1 out of 3 new replicas have been updated');
    holdBack.delete('web:2');
    expect((await kubectl(['rollout', 'status', 'deployment/web', '--timeout=20s'])).stdout).toContain(
      'successfully rolled out',
    );
    expect(
      pods('web')
        .filter((p) => !p.metadata.deletionTimestamp)
        .map((p) => p.spec.containers[0].image),
    ).toEqual(['web:2', 'web:2', 'web:2']);
    const history = await kubectl(['rollout', 'history', 'deployment/web']);
    expect(history.stdout).toMatch(/1\s+<none>\n2\s+<none>/);

    expect((await kubectl(['rollout', 'undo', 'deployment/web'])).code).toBe(0);
    expect((await kubectl(['rollout', 'status', 'deployment/web', '--timeout=20s'])).stdout).toContain(
      'successfully rolled out',
    );
    const rs = JSON.parse((await kubectl(['get', 'rs', '-l', 'app=web', '-o', 'json'])).stdout).items;
    const active = rs.find((x: any) => x.spec.replicas === 3);
    expect(active.spec.template.spec.containers[0].image).toBe('web:1');
    expect(active.metadata.annotations['deployment.kubernetes.io/revision']).toBe('3');
  });

  test('kubectl scale changes the pod count', async () => {
    expect((await kubectl(['scale', 'deployment/web', '--replicas=1'])).code).toBe(0);
    await until(() => expect(pods('web').filter((p) => !p.metadata.deletionTimestamp)).toHaveLength(1));
    expect((await kubectl(['rollout', 'status', 'deployment/web', '--timeout=20s'])).stdout).toContain(
      'successfully rolled out',
    );
  });

  test('deleting the Deployment deletes its ReplicaSets and their pods (background cascade)', async () => {
    expect((await kubectl(['delete', 'deployment', 'web'])).code).toBe(0);
    await until(() => {
      expect(objects.list('replicasets.apps', 'default')).toHaveLength(0);
      expect(pods('web')).toHaveLength(0);
    });
  });

  test("a pod no node fits stays Pending with the scheduler's reason", async () => {
    const d = deployment('web:1', { replicas: 1 });
    (d.spec.template.spec as any).nodeSelector = { disk: 'ssd' };
    await apply(d);
    await until(() => {
      const p = pods('web')[0]!;
      expect(p.status.conditions.find((c: any) => c.type === 'PodScheduled')).toMatchObject({
        status: 'False',
        reason: 'Unschedulable',
        message: expect.stringContaining(
          "0/4 nodes are available: 3 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {dedicated: gpu}",
        ),
      });
    });
    await kubectl(['delete', 'deployment', 'web']);
  });
});

describe('DaemonSets', () => {
  test('one pod per matching node that it tolerates; status for rollout status', async () => {
    await apply(daemonSet('agent:1'));
    expect((await kubectl(['rollout', 'status', 'daemonset/agent', '--timeout=20s'])).stdout).toContain(
      'daemon set "agent" successfully rolled out',
    );
    expect(
      pods('agent')
        .map((p) => p.spec.nodeName)
        .sort(),
    ).toEqual(['node-a', 'node-b']);
    const ds = JSON.parse((await kubectl(['get', 'ds', 'agent', '-o', 'json'])).stdout);
    expect(ds.status).toMatchObject({
      desiredNumberScheduled: 2,
      currentNumberScheduled: 2,
      numberReady: 2,
      updatedNumberScheduled: 2,
      numberAvailable: 2,
      observedGeneration: 1,
    });
  });

  test('a toleration takes in the tainted node; a new template replaces pods one node at a time', async () => {
    const ds = daemonSet('agent:2');
    (ds.spec.template.spec as any).tolerations = [{ operator: 'Exists' }];
    holdBack.add('agent:2');
    await apply(ds);
    await until(() => {
      const live = pods('agent').filter((p) => !p.metadata.deletionTimestamp);
      // maxUnavailable 1: the new node's pod counts as unavailable, so no old pod is replaced yet.
      expect(live.map((p) => `${p.spec.nodeName}:${p.spec.containers[0].image}`).sort()).toEqual([
        'node-a:agent:1',
        'node-b:agent:1',
        'node-c:agent:2',
      ]);
    });
    holdBack.delete('agent:2');
    expect((await kubectl(['rollout', 'status', 'daemonset/agent', '--timeout=20s'])).stdout).toContain(
      'successfully rolled out',
    );
    expect(
      pods('agent')
        .map((p) => `${p.spec.nodeName}:${p.spec.containers[0].image}`)
        .sort(),
    ).toEqual(['node-a:agent:2', 'node-b:agent:2', 'node-c:agent:2']);
  });

  test('deleting a DaemonSet deletes its pods', async () => {
    expect((await kubectl(['delete', 'ds', 'agent'])).code).toBe(0);
    await until(() => expect(pods('agent')).toHaveLength(0));
  });
});

describe('the scheduler', () => {
  const hostNetworkDeployment = (replicas: number) => {
    const d = deployment('op:1', { replicas });
    d.metadata.name = 'op';
    d.spec.selector.matchLabels.app = 'op';
    d.spec.template.metadata.labels.app = 'op';
    // No hostPort in the template: the API server gives each Pod's port its containerPort as hostPort.
    Object.assign(d.spec.template.spec, {
      hostNetwork: true,
      containers: [{ name: 'op', image: 'op:1', ports: [{ name: 'metrics', containerPort: 9492 }] }],
    });
    return d;
  };

  test('host-network replicas never share a node: its ports are taken (the NodePorts filter); the one left over stays Pending', async () => {
    await apply(hostNetworkDeployment(4));
    await until(() => {
      const placed = pods('op').filter((p) => p.spec.nodeName);
      expect(placed.map((p) => p.spec.nodeName).sort()).toEqual(['node-a', 'node-b', 'node-win']);
      for (const p of placed) expect(p.spec.containers[0].ports[0]).toMatchObject({ hostPort: 9492 });
      const pending = pods('op').filter((p) => !p.spec.nodeName);
      expect(pending).toHaveLength(1);
      expect(pending[0]!.status.conditions.find((c: any) => c.type === 'PodScheduled')).toMatchObject({
        status: 'False',
        reason: 'Unschedulable',
        message:
          "0/4 nodes are available: 3 node(s) didn't have free ports for the requested pod ports, " +
          '1 node(s) had untolerated taint {dedicated: gpu}. preemption: not eligible.',
      });
    });
    // Pod templates are not defaulted (Kubernetes 1.28 and later): only the Pods got hostPorts.
    const d = JSON.parse((await kubectl(['get', 'deployment', 'op', '-o', 'json'])).stdout);
    expect(d.spec.template.spec.containers[0].ports[0].hostPort).toBeUndefined();
    // A pod asking for another port fits beside them; one asking for the same port on UDP too.
    const other = (name: string, port: any) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default', labels: { app: name } },
      spec: {
        nodeSelector: { 'kubernetes.io/hostname': 'node-a' },
        containers: [{ name, image: 'x:1', ports: [port] }],
      },
    });
    await apply(other('other-port', { containerPort: 80, hostPort: 9493 }));
    await apply(other('other-proto', { containerPort: 80, hostPort: 9492, protocol: 'UDP' }));
    await until(() => {
      expect(pods('other-port')[0]!.spec.nodeName).toBe('node-a');
      expect(pods('other-proto')[0]!.spec.nodeName).toBe('node-a');
    });
    await kubectl(['delete', 'pod', 'other-port', 'other-proto', '--wait=false']);
    await kubectl(['delete', 'deployment', 'op']);
    await until(() => expect(pods('op')).toHaveLength(0));
  });

  test('a node that is not Ready takes only pods that tolerate node.kubernetes.io/not-ready', async () => {
    const notReady = node('node-nr', { labels: { 'kubernetes.io/os': 'linux' } });
    notReady.status.conditions = [{ type: 'Ready', status: 'False' }];
    expect((await http(emu, 'POST', '/api/v1/nodes', notReady)).status).toBe(201);
    const onIt = (name: string, tolerations?: any[]) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default', labels: { app: name } },
      spec: {
        nodeSelector: { 'kubernetes.io/hostname': 'node-nr' },
        tolerations,
        containers: [{ name, image: 'x:1' }],
      },
    });
    try {
      await apply(onIt('intolerant'));
      await apply(onIt('tolerant', [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists' }]));
      await until(() => {
        expect(pods('tolerant')[0]!.spec.nodeName).toBe('node-nr');
        const p = pods('intolerant')[0]!;
        expect(p.spec.nodeName).toBeUndefined();
        expect(p.status.conditions.find((c: any) => c.type === 'PodScheduled')?.message).toContain(
          '1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }',
        );
      });
    } finally {
      await kubectl(['delete', 'pod', 'intolerant', 'tolerant', '--wait=false']);
      await kubectl(['delete', 'node', 'node-nr']);
    }
  });
});
