/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import YAML from 'yaml';
import type { KubeEmulator } from '../../../testbed/kube/index.js';
import { k8sProtobuf, pb } from '../../helpers/protobuf-wire.js';
import { CHART, REQUIRED, CREDENTIAL_FORMS, run, setArgs, tool } from '../../helpers/helm.js';
import { WIDGET_CRD, kubectlFor, type Kubectl } from '../../helpers/kube.js';
import { kube } from '../../helpers/kube-emulator.js';

/** A chart with one ConfigMap and a values schema, small enough to read in the test. */
function tinyChart(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tiny-chart-'));
  writeFileSync(join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: tiny\nversion: 0.1.0\n');
  writeFileSync(join(dir, 'values.yaml'), 'message: hello\n');
  mkdirSync(join(dir, 'templates'));
  writeFileSync(
    join(dir, 'templates', 'cm.yaml'),
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  message: {{ .Values.message | quote }}\n',
  );
  writeFileSync(
    join(dir, 'values.schema.json'),
    JSON.stringify({ type: 'object', properties: { message: { type: 'string' } }, required: ['message'] }),
  );
  return dir;
}

let emu: KubeEmulator;
let k: Kubectl;
let helm: (args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>;
beforeAll(async () => {
  ({ emu } = await kube());
  k = kubectlFor(emu);
  const kubeconfig = join(k.dir, 'kubeconfig');
  helm = (args) => run(tool('helm'), ['--kubeconfig', kubeconfig, ...args]);
});
afterAll(() => emu.close());

const post = async (path: string, body: Buffer) => {
  const res = await fetch(`${emu.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/vnd.kubernetes.protobuf' },
    body,
  });
  return { status: res.status, body: (await res.json()) as any };
};

const getYaml = async (args: string[]) => YAML.parse((await k(['get', ...args, '-o', 'yaml'])).stdout);

describe('kubectl create sends protobuf bodies the emulator decodes', () => {
  it('creates a Namespace', async () => {
    expect(await k(['create', 'namespace', 'proto'])).toMatchObject({ code: 0, stdout: 'namespace/proto created\n' });
    expect(await getYaml(['namespace', 'proto'])).toMatchObject({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'proto' },
    });
  });

  it('creates a Secret with its bytes intact', async () => {
    const r = await k([
      'create',
      'secret',
      'generic',
      'creds',
      '-n',
      'proto',
      '--from-literal=id=LTAI-x',
      '--from-literal=key=s3cr3t/+=',
      '--type=example.io/creds',
    ]);
    expect(r).toMatchObject({ code: 0, stdout: 'secret/creds created\n' });
    const s = await getYaml(['secret', 'creds', '-n', 'proto']);
    expect(s.type).toBe('example.io/creds');
    expect(Buffer.from(s.data.key, 'base64').toString()).toBe('s3cr3t/+=');
    expect(Buffer.from(s.data.id, 'base64').toString()).toBe('LTAI-x');
  });

  it('creates a ConfigMap, empty values kept', async () => {
    expect(
      (await k(['create', 'configmap', 'settings', '-n', 'proto', '--from-literal=mode=fast', '--from-literal=empty=']))
        .code,
    ).toBe(0);
    const cm = await getYaml(['configmap', 'settings', '-n', 'proto']);
    expect(cm.data).toEqual({ mode: 'fast', empty: '' });
  });

  it('creates a ServiceAccount and a ClusterIP Service with an int target port', async () => {
    expect((await k(['create', 'serviceaccount', 'robot', '-n', 'proto'])).stdout).toBe(
      'serviceaccount/robot created\n',
    );
    expect((await k(['create', 'service', 'clusterip', 'web', '-n', 'proto', '--tcp=80:8080'])).stdout).toBe(
      'service/web created\n',
    );
    const svc = await getYaml(['service', 'web', '-n', 'proto']);
    expect(svc.spec).toMatchObject({
      type: 'ClusterIP',
      selector: { app: 'web' },
      ports: [{ name: '80-8080', port: 80, protocol: 'TCP', targetPort: 8080 }],
    });
  });

  it('creates RBAC objects with empty API groups kept', async () => {
    expect(
      (
        await k([
          'create',
          'role',
          'reader',
          '-n',
          'proto',
          '--verb=get,list',
          '--resource=pods,leases.coordination.k8s.io',
        ])
      ).code,
    ).toBe(0);
    const role = await getYaml(['role', 'reader', '-n', 'proto']);
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list'] },
    ]);
    expect(
      (
        await k([
          'create',
          'rolebinding',
          'robot-reads',
          '-n',
          'proto',
          '--role=reader',
          '--serviceaccount=proto:robot',
        ])
      ).code,
    ).toBe(0);
    expect((await getYaml(['rolebinding', 'robot-reads', '-n', 'proto'])).subjects).toEqual([
      { kind: 'ServiceAccount', name: 'robot', namespace: 'proto' },
    ]);
  });

  it('creates a Deployment with its pod template, keeping replicas 0 and the command', async () => {
    const r = await k([
      'create',
      'deployment',
      'idle',
      '-n',
      'proto',
      '--image=busybox:1.36',
      '--replicas=0',
      '--port=8080',
      '--',
      'sleep',
      '3600',
    ]);
    expect(r.stdout).toBe('deployment.apps/idle created\n');
    const d = await getYaml(['deployment', 'idle', '-n', 'proto']);
    expect(d.spec).toMatchObject({
      replicas: 0,
      selector: { matchLabels: { app: 'idle' } },
      template: {
        metadata: { labels: { app: 'idle' } },
        spec: {
          containers: [
            { name: 'busybox', image: 'busybox:1.36', command: ['sleep', '3600'], ports: [{ containerPort: 8080 }] },
          ],
        },
      },
    });
  });

  it('creates a PodDisruptionBudget with an int-or-string bound', async () => {
    expect(
      (await k(['create', 'poddisruptionbudget', 'keep', '-n', 'proto', '--selector=app=idle', '--min-available=50%']))
        .code,
    ).toBe(0);
    expect((await getYaml(['pdb', 'keep', '-n', 'proto'])).spec).toEqual({
      minAvailable: '50%',
      selector: { matchLabels: { app: 'idle' } },
    });
  });

  it('refuses a kind it does not decode, naming it; an unserved kind is not found first', async () => {
    const node = await post('/api/v1/nodes', k8sProtobuf('v1', 'Node', [pb.message(1, pb.string(1, 'n1'))]));
    expect(node).toMatchObject({
      status: 415,
      body: {
        message:
          'the emulator does not decode protobuf bodies of v1 Node; send it as JSON (Content-Type: application/json) instead',
      },
    });
    const job = await k(['create', 'job', 'once', '-n', 'proto', '--image=busybox']);
    expect(job.stderr).toContain('the server could not find the requested resource');
  });

  it('deletes what it created', async () => {
    await k(['create', 'configmap', 'doomed', '-n', 'proto']);
    expect((await k(['delete', 'configmap', 'doomed', '-n', 'proto'])).stdout).toBe('configmap "doomed" deleted\n');
  });

  it("decodes a Lease as client-go's leader election sends it (MicroTime, pointer zeros)", async () => {
    const time = (no: number, seconds: number, nanos: number) => pb.message(no, pb.int(1, seconds), pb.int(2, nanos));
    const body = k8sProtobuf('coordination.k8s.io/v1', 'Lease', [
      pb.message(1, pb.string(1, 'operator-lock'), pb.string(2, ''), pb.string(3, 'proto')),
      pb.message(
        2,
        pb.string(1, 'pod-a'),
        pb.int(2, 15),
        time(3, 1796054400, 123456789),
        time(4, 1796054401, 5000),
        pb.int(5, 0),
      ),
    ]);
    const res = await post('/apis/coordination.k8s.io/v1/namespaces/proto/leases', body);
    expect(res.status).toBe(201);
    expect((await getYaml(['lease', 'operator-lock', '-n', 'proto'])).spec).toEqual({
      holderIdentity: 'pod-a',
      leaseDurationSeconds: 15,
      acquireTime: '2026-11-30T16:00:00.123456Z',
      renewTime: '2026-11-30T16:00:01.000005Z',
      leaseTransitions: 0,
    });
  });

  it("decodes an Event as client-go's event recorder sends it", async () => {
    const body = k8sProtobuf('v1', 'Event', [
      pb.message(1, pb.string(1, 'pool-a.1'), pb.string(3, 'proto')),
      pb.message(
        2,
        pb.string(1, 'ENIPool'),
        pb.string(3, 'pool-a'),
        pb.string(4, 'uid-1'),
        pb.string(5, 'eniipam.io/v1alpha1'),
      ),
      pb.string(3, 'Throttled'),
      pb.string(4, 'the OpenAPI throttled CreateNetworkInterface'),
      pb.message(5, pb.string(1, 'eni-ipam-operator')),
      pb.message(6, pb.int(1, 1796054400), pb.int(2, 0)),
      pb.message(7, pb.int(1, 1796054460), pb.int(2, 0)),
      pb.int(8, 2),
      pb.string(9, 'Warning'),
      pb.string(14, 'eni-ipam-operator'),
    ]);
    expect((await post('/api/v1/namespaces/proto/events', body)).status).toBe(201);
    expect(await getYaml(['event', 'pool-a.1', '-n', 'proto'])).toMatchObject({
      involvedObject: { kind: 'ENIPool', name: 'pool-a', uid: 'uid-1', apiVersion: 'eniipam.io/v1alpha1' },
      reason: 'Throttled',
      message: 'the OpenAPI throttled CreateNetworkInterface',
      source: { component: 'eni-ipam-operator' },
      firstTimestamp: '2026-11-30T16:00:00Z',
      lastTimestamp: '2026-11-30T16:01:00Z',
      count: 2,
      type: 'Warning',
      reportingComponent: 'eni-ipam-operator',
    });
  });

  it('refuses a field it does not decode instead of dropping it', async () => {
    const body = k8sProtobuf('coordination.k8s.io/v1', 'Lease', [
      pb.message(1, pb.string(1, 'odd'), pb.string(3, 'proto')),
      pb.message(2, pb.string(1, 'x'), pb.string(99, 'future')),
    ]);
    const res = await post('/apis/coordination.k8s.io/v1/namespaces/proto/leases', body);
    expect(res.status).toBe(415);
    expect(res.body.message).toBe(
      'the protobuf coordination.k8s.io/v1 Lease has fields the emulator does not decode; send it as JSON (Content-Type: application/json) instead',
    );
  });

  it('refuses a protobuf body it cannot decode with a clear error', async () => {
    const res = await fetch(`${emu.url}/api/v1/namespaces/proto/configmaps`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.kubernetes.protobuf' },
      body: Buffer.from('{"not":"protobuf"}'),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).message).toContain('does not start with the Kubernetes magic bytes');
  });
});

describe('/openapi/v2 for kubectl client-side validation', () => {
  it('applies a kind: List written by kubectl get -o yaml', async () => {
    await k(['create', 'namespace', 'listed']);
    await k(['create', 'configmap', 'one', '-n', 'listed', '--from-literal=a=1']);
    await k(['create', 'serviceaccount', 'two', '-n', 'listed']);
    const list = (await k(['get', 'configmaps,serviceaccounts', '-n', 'listed', '-o', 'yaml'])).stdout;
    expect(YAML.parse(list).kind).toBe('List');
    expect((await k(['delete', 'configmap,serviceaccount', '--all', '-n', 'listed'])).code).toBe(0);
    const applied = await k(['apply', '-f', '-'], list);
    expect(applied.stderr).toBe('');
    expect(applied.stdout).toBe('configmap/one created\nserviceaccount/two created\n');
    expect((await getYaml(['configmap', 'one', '-n', 'listed'])).data).toEqual({ a: '1' });
  });

  it("validates the items of a List against a CRD's schema, as kubectl does with a real server", async () => {
    await k(['apply', '-f', '-'], YAML.stringify(WIDGET_CRD));
    await k(['wait', '--for=condition=Established', 'crd/widgets.example.io', '--timeout=10s']);
    const item = (name: string, spec: object) => ({
      apiVersion: 'example.io/v1',
      kind: 'Widget',
      metadata: { name, namespace: 'default' },
      spec,
    });
    const bad = await k(
      ['apply', '-f', '-'],
      YAML.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [item('w1', { size: 1 }), item('w2', { size: 'two', shape: 'round' })],
      }),
    );
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('unknown field "shape" in io.example.v1.Widget.spec');
    expect(bad.stderr).toContain('invalid type for io.example.v1.Widget.spec.size: got "string", expected "integer"');
    const good = await k(
      ['apply', '-f', '-'],
      YAML.stringify({ apiVersion: 'v1', kind: 'List', items: [item('w1', { size: 1 }), item('w2', { size: 2 })] }),
    );
    expect(good.stdout).toBe('widget.example.io/w1 created\nwidget.example.io/w2 created\n');
  });

  it('serves the document as JSON to clients that ask for JSON', async () => {
    const res = await fetch(`${emu.url}/openapi/v2`, { headers: { accept: 'application/json' } });
    const doc = (await res.json()) as any;
    expect(doc.swagger).toBe('2.0');
    expect(doc.definitions['io.example.v1.Widget']['x-kubernetes-group-version-kind']).toEqual([
      { group: 'example.io', version: 'v1', kind: 'Widget' },
    ]);
    expect(doc.definitions['io.k8s.api.core.v1.ConfigMap']['x-kubernetes-group-version-kind']).toEqual([
      { group: '', version: 'v1', kind: 'ConfigMap' },
    ]);
  });
});

describe('helm against the emulator', () => {
  it('installs, upgrades, rolls back and uninstalls a chart (release Secrets sent as protobuf)', async () => {
    const chart = tinyChart();
    expect((await helm(['install', 'tiny', chart, '-n', 'helm-a', '--create-namespace'])).code).toBe(0);
    expect((await getYaml(['configmap', 'tiny-cm', '-n', 'helm-a'])).data).toEqual({ message: 'hello' });
    expect(
      (await k(['get', 'secret', 'sh.helm.release.v1.tiny.v1', '-n', 'helm-a', '-o', 'jsonpath={.type}'])).stdout,
    ).toBe('helm.sh/release.v1');
    expect((await helm(['upgrade', 'tiny', chart, '-n', 'helm-a', '--set', 'message=bye'])).code).toBe(0);
    expect((await getYaml(['configmap', 'tiny-cm', '-n', 'helm-a'])).data).toEqual({ message: 'bye' });
    expect((await helm(['rollback', 'tiny', '1', '-n', 'helm-a'])).code).toBe(0);
    const history = await helm(['history', 'tiny', '-n', 'helm-a', '-o', 'json']);
    expect(JSON.parse(history.stdout).map((h: any) => h.status)).toEqual(['superseded', 'superseded', 'deployed']);
    const un = await helm(['uninstall', 'tiny', '-n', 'helm-a']);
    expect(un).toMatchObject({ code: 0, stdout: 'release "tiny" uninstalled\n' });
    expect((await k(['get', 'secrets,configmaps', '-n', 'helm-a', '-o', 'name'])).stdout).toBe('');
  });

  it("validates values against the chart's schema", async () => {
    const r = await helm(['install', 'bad', tinyChart(), '-n', 'default', '--set', 'message=null']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('message is required');
  });

  it('installs and uninstalls charts/eni-ipam (its pods do not run here)', async () => {
    const r = await helm([
      'install',
      'eni-ipam',
      CHART,
      '-n',
      'kube-system',
      ...setArgs([...REQUIRED, ...CREDENTIAL_FORMS.secret!]),
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((await k(['get', 'deployment,daemonset', '-n', 'kube-system', '-o', 'name'])).stdout).toBe(
      'deployment.apps/eni-ipam-operator\ndaemonset.apps/eni-ipam-agent\n',
    );
    expect((await helm(['uninstall', 'eni-ipam', '-n', 'kube-system'])).code).toBe(0);
    expect((await k(['get', 'deployment,daemonset,secrets', '-n', 'kube-system', '-o', 'name'])).stdout).toBe('');
  });
});
