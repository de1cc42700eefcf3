import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeEmulator } from '../../../testbed/kube/index.js';
import { http, kube } from '../../helpers/kube-emulator.js';

// A pod on a node with a kubelet terminates gracefully: the DELETE only marks it, and it stays
// through the kubelet's status writes until the kubelet deletes it for good (after its sandbox is
// gone), as the API server keeps it (an update deletes only an object being finalized).
let emu: KubeEmulator;
const POD = '/api/v1/namespaces/default/pods/web';

beforeAll(async () => {
  ({ emu } = await kube());
  emu.store.hooks.kubeletRuns = (node) => node === 'node-01';
});

afterAll(async () => {
  await emu.close();
});

describe('graceful pod deletion', () => {
  it('keeps a terminating pod through status writes; the kubelet’s DELETE with no grace removes it', async () => {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web', namespace: 'default' },
      spec: { nodeName: 'node-01', containers: [{ name: 'c', image: 'x' }] },
    };
    expect((await http(emu, 'POST', '/api/v1/namespaces/default/pods', pod)).status).toBe(201);
    const marked = await http(emu, 'DELETE', POD);
    expect(marked.status).toBe(200);
    expect(marked.body.metadata.deletionTimestamp).toBeDefined();
    expect(marked.body.metadata.deletionGracePeriodSeconds).toBe(30);
    const status = {
      status: { phase: 'Running', containerStatuses: [{ name: 'c', state: { terminated: { exitCode: 143 } } }] },
    };
    const written = await http(emu, 'PATCH', `${POD}/status`, status, 'application/merge-patch+json');
    expect(written.status).toBe(200);
    expect((await http(emu, 'GET', POD)).status).toBe(200);
    const gone = await http(emu, 'DELETE', POD, { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0 });
    expect(gone.status).toBe(200);
    expect((await http(emu, 'GET', POD)).status).toBe(404);
  });

  it('still deletes an object whose last finalizer an update removes', async () => {
    const cm = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'held', namespace: 'default', finalizers: ['x.io/hold'] },
    };
    expect((await http(emu, 'POST', '/api/v1/namespaces/default/configmaps', cm)).status).toBe(201);
    expect((await http(emu, 'DELETE', '/api/v1/namespaces/default/configmaps/held')).status).toBe(200);
    const patch = { metadata: { finalizers: null } };
    const r = await http(
      emu,
      'PATCH',
      '/api/v1/namespaces/default/configmaps/held',
      patch,
      'application/merge-patch+json',
    );
    expect(r.status).toBe(200);
    expect((await http(emu, 'GET', '/api/v1/namespaces/default/configmaps/held')).status).toBe(404);
  });
});
