import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import YAML from 'yaml';
import type { KubeEmulator } from '../../../testbed/kube/index.js';
import { eventually, sleep } from '../../helpers/ecs.js';
import { WIDGET_CRD, kubectlFor, type Kubectl } from '../../helpers/kube.js';
import { kube } from '../../helpers/kube-emulator.js';
import type { KubeConfig } from '@kubernetes/client-node';

let emu: KubeEmulator;
let kc: KubeConfig;
let k: Kubectl;
beforeAll(async () => {
  ({ emu, kc } = await kube());
  k = kubectlFor(emu);
  const crd = await k(['apply', '-f', '-'], YAML.stringify(WIDGET_CRD));
  expect(crd).toMatchObject({
    code: 0,
    stdout: 'customresourcedefinition.apiextensions.k8s.io/widgets.example.io created\n',
  });
  const wait = await k(['wait', '--for=condition=Established', 'crd/widgets.example.io', '--timeout=10s']);
  expect(wait.stdout).toContain('condition met');
});
afterAll(() => emu.close());

const w = (name: string, extra = '') =>
  `apiVersion: example.io/v1\nkind: Widget\nmetadata:\n  name: ${name}\n  labels: {app: demo}\nspec:\n  size: 3\n${extra}`;

describe('kubectl against the emulator', () => {
  it('reports the server version kubectl dispatches on', async () => {
    expect((await k(['version'])).stdout).toContain('Server Version: v1.32.4');
  });

  it('applies and gets custom objects with printer columns, wide, yaml and jsonpath', async () => {
    expect((await k(['apply', '-f', '-'], w('alpha'))).stdout).toBe('widget.example.io/alpha created\n');
    const table = await k(['get', 'widgets']);
    expect(table.stdout).toMatch(/^NAME\s+SIZE\s+PHASE\s+AGE\nalpha\s+3\s+\d+s\n$/);
    const wide = await k(['get', 'wd', '-o', 'wide']);
    expect(wide.stdout).toMatch(/^NAME\s+SIZE\s+COLOR\s+PHASE\s+AGE\nalpha\s+3\s+red\s+/);
    const yaml = YAML.parse((await k(['get', 'widget', 'alpha', '-o', 'yaml'])).stdout);
    expect(yaml).toMatchObject({
      apiVersion: 'example.io/v1',
      kind: 'Widget',
      spec: { size: 3, color: 'red' },
      metadata: { generation: 1, labels: { app: 'demo' } },
    });
    expect((await k(['get', 'widgets', '-o', 'jsonpath={.items[*].metadata.name}'])).stdout).toBe('alpha');
    expect((await k(['apply', '-f', '-'], w('alpha'))).stdout).toBe('widget.example.io/alpha unchanged\n');
  });

  it('labels and patches with merge and JSON patches', async () => {
    await k(['apply', '-f', '-'], w('beta'));
    expect((await k(['label', 'widget', 'beta', 'tier=gold'])).stdout).toBe('widget.example.io/beta labeled\n');
    expect((await k(['patch', 'widget', 'beta', '--type', 'merge', '-p', '{"spec":{"size":5}}'])).stdout).toBe(
      'widget.example.io/beta patched\n',
    );
    expect(
      (
        await k([
          'patch',
          'widget',
          'beta',
          '--type',
          'json',
          '-p',
          '[{"op":"replace","path":"/spec/color","value":"blue"}]',
        ])
      ).code,
    ).toBe(0);
    const got = await k(['get', 'widget', 'beta', '-o', 'wide', '--show-labels', '--no-headers']);
    expect(got.stdout).toMatch(/^beta\s+5\s+blue\s+.*app=demo,tier=gold\n$/);
    expect(YAML.parse((await k(['get', 'widget', 'beta', '-o', 'yaml'])).stdout).metadata.generation).toBe(3);
    const failed = await k([
      'patch',
      'widget',
      'beta',
      '--type',
      'json',
      '-p',
      '[{"op":"test","path":"/spec/size","value":99}]',
    ]);
    expect(failed.code).not.toBe(0);
  });

  it('rejects invalid objects with the fields that are wrong', async () => {
    const r = await k(
      ['apply', '-f', '-'],
      'apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {size: -1, color: green}\n',
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('The Widget "bad" is invalid');
    expect(r.stderr).toContain('spec.color: Unsupported value: "green": supported values: "red", "blue"');
    expect(r.stderr).toContain('spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0');
    const unknown = await k(
      ['apply', '-f', '-'],
      'apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {size: 1, shape: round}\n',
    );
    expect(unknown.stderr).toContain('strict decoding error: unknown field "spec.shape"');
  });

  it('describes an object with its Events', async () => {
    await k(['apply', '-f', '-'], w('gamma'));
    const uid = (await k(['get', 'widget', 'gamma', '-o', 'jsonpath={.metadata.uid}'])).stdout;
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: 'gamma.1', namespace: 'default' },
      involvedObject: { apiVersion: 'example.io/v1', kind: 'Widget', name: 'gamma', namespace: 'default', uid },
      reason: 'Resized',
      message: 'grew to 3',
      type: 'Normal',
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: 'widget-controller' },
    };
    expect((await k(['create', '-f', '-'], JSON.stringify(event))).code).toBe(0);
    const d = await k(['describe', 'widget', 'gamma']);
    expect(d.stdout).toMatch(/Name:\s+gamma/);
    expect(d.stdout).toMatch(
      /Events:\n\s+Type\s+Reason\s+Age\s+From\s+Message\n.*\n\s+Normal\s+Resized\s+\S+\s+widget-controller\s+grew to 3/,
    );
  });

  it('server-side applies, reports a conflict between managers, and forces it', async () => {
    const spec = (size: number) =>
      `apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: delta}\nspec: {size: ${size}}\n`;
    expect((await k(['apply', '--server-side', '-f', '-'], spec(2))).stdout).toBe(
      'widget.example.io/delta serverside-applied\n',
    );
    const clash = await k(['apply', '--server-side', '--field-manager=team-b', '-f', '-'], spec(4));
    expect(clash.code).not.toBe(0);
    expect(clash.stderr).toContain('Apply failed with 1 conflict: conflict with "kubectl": .spec.size');
    const forced = await k(
      ['apply', '--server-side', '--field-manager=team-b', '--force-conflicts', '-f', '-'],
      spec(4),
    );
    expect(forced.code).toBe(0);
    const obj = YAML.parse((await k(['get', 'widget', 'delta', '-o', 'yaml', '--show-managed-fields'])).stdout);
    expect(obj.spec.size).toBe(4);
    const owners = Object.fromEntries(
      obj.metadata.managedFields.map((m: { manager: string; fieldsV1: unknown }) => [m.manager, m.fieldsV1]),
    );
    expect(owners['team-b']).toEqual({ 'f:spec': { 'f:size': {} } });
    expect(owners.kubectl).toBeUndefined(); // its only field was taken
  });

  it('watches with get -w and prints later changes', async () => {
    await k(['apply', '-f', '-'], w('epsilon'));
    const child = spawn(
      'kubectl',
      ['--kubeconfig', join(k.dir, 'kubeconfig'), 'get', 'widget', 'epsilon', '-w', '--no-headers'],
      {
        env: { ...process.env, HOME: k.dir, KUBECACHEDIR: join(k.dir, 'cache') },
      },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    try {
      await eventually(() => out.includes('epsilon'), 10_000);
      await k(['patch', 'widget', 'epsilon', '--type', 'merge', '-p', '{"spec":{"size":7}}']);
      await eventually(() => /epsilon\s+7\s/.test(out), 10_000);
    } finally {
      child.kill();
    }
  });

  it('deletes an object with a finalizer once another client removes it', async () => {
    await k(['apply', '-f', '-'], w('zeta'));
    await k(['patch', 'widget', 'zeta', '--type', 'merge', '-p', '{"metadata":{"finalizers":["example.io/cleanup"]}}']);
    const del = k(['delete', 'widget', 'zeta', '--timeout=20s']);
    const api = kc.makeApiClient(CustomObjectsApi);
    const marked = await eventually(async () => {
      const o = (await api.getNamespacedCustomObject({
        group: 'example.io',
        version: 'v1',
        namespace: 'default',
        plural: 'widgets',
        name: 'zeta',
      })) as { metadata: { deletionTimestamp?: string } };
      return o.metadata.deletionTimestamp ? o : undefined;
    });
    expect(marked.metadata.deletionTimestamp).toBeTruthy();
    await sleep(300);
    await api.patchNamespacedCustomObject(
      {
        group: 'example.io',
        version: 'v1',
        namespace: 'default',
        plural: 'widgets',
        name: 'zeta',
        body: { metadata: { finalizers: null } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const r = await del;
    expect(r).toMatchObject({ code: 0, stdout: 'widget.example.io "zeta" deleted\n' });
    expect((await k(['get', 'widget', 'zeta'])).stderr).toContain('widgets.example.io "zeta" not found');
  });

  it('runs --dry-run=server without storing anything', async () => {
    const r = await k(['apply', '--dry-run=server', '-f', '-'], w('eta'));
    expect(r.stdout).toBe('widget.example.io/eta created (server dry run)\n');
    expect((await k(['get', 'widget', 'eta'])).stderr).toContain('not found');
  });

  it('shows Nodes and Pods with their usual columns', async () => {
    const node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'node-1', labels: { 'node-role.kubernetes.io/worker': '' } },
      status: {
        conditions: [{ type: 'Ready', status: 'True' }],
        nodeInfo: { kubeletVersion: 'v1.32.4' },
        addresses: [{ type: 'InternalIP', address: '192.168.0.10' }],
      },
    };
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web', namespace: 'default' },
      spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'nginx' }] },
      status: {
        phase: 'Running',
        podIP: '192.168.16.7',
        containerStatuses: [{ name: 'c', ready: true, restartCount: 2 }],
      },
    };
    for (const o of [node, pod]) expect((await k(['apply', '-f', '-'], JSON.stringify(o))).code).toBe(0);
    expect((await k(['get', 'nodes', '-o', 'wide'])).stdout).toMatch(
      /^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION\s+INTERNAL-IP\nnode-1\s+Ready\s+worker\s+\S+\s+v1\.32\.4\s+192\.168\.0\.10\n$/,
    );
    expect((await k(['get', 'pods', '-o', 'wide'])).stdout).toMatch(
      /^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+IP\s+NODE\nweb\s+1\/1\s+Running\s+2\s+\S+\s+192\.168\.16\.7\s+node-1\n$/,
    );
  });

  it('lists built-in kinds with their usual columns', async () => {
    expect((await k(['get', 'namespaces'])).stdout).toMatch(/^NAME\s+STATUS\s+AGE\ndefault\s+Active\s+/);
    expect((await k(['api-resources', '--api-group=example.io'])).stdout).toMatch(
      /widgets\s+wd\s+example\.io\/v1\s+true\s+Widget/,
    );
  });
});
