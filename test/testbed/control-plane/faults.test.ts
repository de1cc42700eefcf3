/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { nodeObject, startEcsEmulator, type EcsEmulator } from '../../../testbed/ecs/index.js';
import type { ControlPlane } from '../../../testbed/control-plane/index.js';
import { eventually, fastWorld } from '../../helpers/ecs.js';
import { http, kubeWithPool, kubectlFor, type Kubectl } from '../../helpers/kube.js';

let emu: ControlPlane;
let kc: KubeConfig;
let ecs: EcsEmulator;
let k: Kubectl;
beforeAll(async () => {
  ({ emu, kc } = await kubeWithPool('node-a', { cidr: '10.1.0.0/24', gateway: '10.1.0.253', ips: ['10.1.0.7'] }));
  ecs = await startEcsEmulator({ fixture: fastWorld() });
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNode({ body: nodeObject(ecs.world, [...ecs.world.instances.keys()][0]!) });
  k = kubectlFor(emu);
});
afterAll(async () => {
  await emu.close();
  await ecs.close();
});
afterEach(() => emu.clearFaultRules());

const failure = async (p: Promise<unknown>): Promise<{ code: number; body: any; headers: Record<string, string> }> => {
  try {
    await p;
  } catch (e) {
    const err = e as { code: number; body: string; headers: Record<string, string> };
    return {
      code: err.code,
      body: typeof err.body === 'string' ? JSON.parse(err.body) : err.body,
      headers: err.headers,
    };
  }
  throw new Error('expected the call to fail');
};

describe('fault rules of the front before kube-apiserver', () => {
  it('answers a LIST of nodes 403 Forbidden as the API server words it, and nothing else', async () => {
    emu.setFaultRules([{ verbs: ['list'], resource: 'nodes', action: 'respond', code: 403 }]);
    const core = kc.makeApiClient(CoreV1Api);
    const f = await failure(core.listNode());
    expect(f.code).toBe(403);
    expect(f.body).toMatchObject({
      kind: 'Status',
      reason: 'Forbidden',
      code: 403,
      message:
        'nodes is forbidden: User "system:serviceaccount:kube-system:eni-ipam-operator" cannot list resource "nodes" in API group "" at the cluster scope',
    });
    const r = await k(['get', 'nodes']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('Error from server (Forbidden): nodes is forbidden: User');
    // GET of one node and LIST of pools are not covered by the rule.
    const name = nodeObject(ecs.world, [...ecs.world.instances.keys()][0]!).metadata.name;
    expect((await core.readNode({ name })).metadata?.name).toBe(name);
    expect((await k(['get', 'enipools', '-o', 'name'])).stdout).toContain('enipool.eniipam.io/node-a');
    expect(emu.faultRules()[0]).toMatchObject({ hits: 2, active: true });
  });

  it('words a namespaced, named 403 and a subresource as RBAC does', async () => {
    emu.setFaultRules([
      { resource: 'leases', action: 'respond', code: 403, user: 'system:serviceaccount:kube-system:x' },
      { resource: 'enipools/status', action: 'respond', code: 403 },
    ]);
    const r = await http(emu, 'GET', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l1');
    expect(r.body.message).toBe(
      'leases.coordination.k8s.io "l1" is forbidden: User "system:serviceaccount:kube-system:x" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "kube-system"',
    );
    const s = await http(
      emu,
      'PATCH',
      '/apis/eniipam.io/v1alpha1/enipools/node-a/status',
      { status: {} },
      'application/merge-patch+json',
    );
    expect(s.status).toBe(403);
    expect(s.body.message).toContain(
      'cannot patch resource "enipools/status" in API group "eniipam.io" at the cluster scope',
    );
    // The main resource is another resource, as in RBAC.
    expect((await http(emu, 'GET', '/apis/eniipam.io/v1alpha1/enipools/node-a')).status).toBe(200);
  });

  it('answers 429 with Retry-After a given number of times: kubectl waits and retries through it', async () => {
    emu.setFaultRules([
      { verbs: ['list'], resource: 'namespaces', action: 'respond', code: 429, retryAfterSeconds: 1, times: 2 },
    ]);
    const t0 = Date.now();
    const r = await k(['get', 'namespaces', '-o', 'name']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('namespace/default');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2000);
    expect(emu.faultRules()[0]).toMatchObject({ hits: 2, active: false });
    emu.setFaultRules([{ verbs: ['get'], action: 'respond', code: 429, retryAfterSeconds: 7 }]);
    const raw = await http(emu, 'GET', '/api/v1/namespaces/default');
    expect(raw.status).toBe(429);
    expect(raw.headers['retry-after']).toBe('7');
    expect(raw.body).toMatchObject({ reason: 'TooManyRequests', details: { retryAfterSeconds: 7 } });
  });

  it('answers 410 Expired to a LIST, and an in-stream ERROR 410 to a WATCH', async () => {
    emu.setFaultRules([{ verbs: ['list', 'watch'], resource: 'enipools', action: 'respond', code: 410 }]);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const f = await failure(
      custom.listClusterCustomObject({ group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools' }),
    );
    expect(f.code).toBe(410);
    expect(f.body).toMatchObject({ reason: 'Expired', code: 410 });
    const events: { type: string; code?: number }[] = [];
    await new Promise<void>(
      (resolve) =>
        void new Watch(kc).watch(
          '/apis/eniipam.io/v1alpha1/enipools',
          { resourceVersion: '1' },
          (type, obj) => events.push({ type, code: obj.code }),
          () => resolve(),
        ),
    );
    expect(events).toEqual([{ type: 'ERROR', code: 410 }]);
  });

  it('conflicts on status writes only (409), as often as asked', async () => {
    emu.setFaultRules([
      { verbs: ['patch', 'update'], resource: 'enipools/status', action: 'respond', code: 409, times: 1 },
    ]);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const patch = (body: object) =>
      custom.patchClusterCustomObjectStatus(
        { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: 'node-a', body },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const f = await failure(patch({ status: { cooling: {} } }));
    expect(f.code).toBe(409);
    expect(f.body.message).toBe(
      'Operation cannot be fulfilled on enipools.eniipam.io "node-a": the object has been modified; please apply your changes to the latest version and try again',
    );
    await patch({ status: { cooling: {} } });
  });

  it('delays matching requests, and ends a rule after its duration', async () => {
    emu.setFaultRules([{ pathPrefix: '/api/v1/namespaces', action: 'delay', ms: 700, durationMs: 2500 }]);
    let t0 = Date.now();
    expect((await http(emu, 'GET', '/api/v1/namespaces/default')).status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(650);
    t0 = Date.now();
    await http(emu, 'GET', '/api/v1/nodes');
    expect(Date.now() - t0).toBeLessThan(500);
    await eventually(() => !emu.faultRules()[0]!.active, 4000);
    t0 = Date.now();
    await http(emu, 'GET', '/api/v1/namespaces/default');
    expect(Date.now() - t0).toBeLessThan(500);
  });

  it('holds a request without an answer until the rule is removed, then resets it', async () => {
    emu.setFaultRules([{ verbs: ['get'], resource: 'leases', action: 'hang' }]);
    let settled = false;
    const pending = http(emu, 'GET', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x')
      .then(
        () => 'answered',
        () => 'reset',
      )
      .finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 1500));
    expect(settled).toBe(false);
    expect((await http(emu, 'GET', '/api/v1/namespaces/default')).status).toBe(200);
    emu.clearFaultRules();
    expect(await pending).toBe('reset');
  });

  it('closes matching watches every few seconds; other watches stay open', async () => {
    const closed: string[] = [];
    const watch = (path: string) =>
      new Watch(kc).watch(
        path,
        {},
        () => {},
        () => void closed.push(path),
      );
    const a = await watch('/api/v1/nodes');
    const b = await watch('/api/v1/namespaces');
    emu.setFaultRules([{ resource: 'nodes', action: 'close-watches', everySeconds: 1 }]);
    await eventually(() => closed.includes('/api/v1/nodes'), 3000);
    expect(closed).not.toContain('/api/v1/namespaces');
    await watch('/api/v1/nodes');
    await eventually(() => closed.filter((p) => p === '/api/v1/nodes').length === 2, 3000);
    expect(emu.faultRules()[0]!.hits).toBe(2);
    a.abort();
    b.abort();
  });

  it('takes rules over HTTP (PUT, GET, DELETE /_emulator/faults), with errors that name the field', async () => {
    const bad = await http(emu, 'PUT', '/_emulator/faults', {
      rules: [{ verbs: ['lsit'], action: 'respond', code: 403 }],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^faults\.rules\[0\]\.verbs\[0\]: must be equal to one of the allowed values/);
    const noCode = await http(emu, 'PUT', '/_emulator/faults', { rules: [{ action: 'respond' }] });
    expect(noCode.body.error).toBe('faults.rules[0].code: a "respond" rule needs code');
    expect((await http(emu, 'PUT', '/_emulator/faults', '{')).body.error).toMatch(/^the body is not JSON/);
    const ok = await http(emu, 'PUT', '/_emulator/faults', {
      rules: [{ verbs: ['list'], resource: 'nodes', action: 'respond', code: 500 }],
    });
    expect(ok.status).toBe(200);
    expect((await k(['get', 'nodes'])).stderr).toContain('Internal error occurred: injected fault');
    expect((await http(emu, 'GET', '/_emulator/faults')).body.rules[0]).toMatchObject({ code: 500, active: true });
    expect((await http(emu, 'DELETE', '/_emulator/faults')).status).toBe(200);
    expect((await k(['get', 'nodes', '-o', 'name'])).code).toBe(0);
  });

  it('goes unreachable for a while when asked over HTTP, then serves on the same port', async () => {
    const r = await http(emu, 'PUT', '/_emulator/faults', { unreachableMs: 1500 });
    expect(r.status).toBe(200);
    await eventually(
      async () =>
        http(emu, 'GET', '/version').then(
          () => false,
          (e: Error) => /ECONNREFUSED/.test(String(e)),
        ),
      1000,
    );
    await eventually(
      async () =>
        http(emu, 'GET', '/version').then(
          (x) => x.status === 200,
          () => false,
        ),
      5000,
      100,
    );
  });
});
