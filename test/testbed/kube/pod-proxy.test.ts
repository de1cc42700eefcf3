import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KubeEmulator } from '../../../testbed/kube/index.js';
import { kubectlFor, type Kubectl } from '../../helpers/kube.js';
import { http, kube } from '../../helpers/kube-emulator.js';

// The API server's proxy to a pod's port, as `kubectl get --raw .../pods/NAME:PORT/proxy/...` uses it.
let emu: KubeEmulator;
let kubectl: Kubectl;
let target: Server;
let port: number;

beforeAll(async () => {
  ({ emu } = await kube());
  kubectl = kubectlFor(emu);
  target = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`you asked ${req.url}`));
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  port = (target.address() as AddressInfo).port;
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'default' },
    spec: { containers: [{ name: 'web', image: 'x', ports: [{ containerPort: port }] }] },
  };
  expect((await http(emu, 'POST', '/api/v1/namespaces/default/pods', pod)).status).toBe(201);
  const status = { status: { phase: 'Running', podIP: '127.0.0.1' } };
  const r = await http(
    emu,
    'PATCH',
    '/api/v1/namespaces/default/pods/web/status',
    status,
    'application/merge-patch+json',
  );
  expect(r.status).toBe(200);
});

afterAll(async () => {
  target.close();
  await emu.close();
});

describe('pods/proxy', () => {
  it('answers what the pod serves on the port, with kubectl get --raw', async () => {
    const r = await kubectl(['get', '--raw', `/api/v1/namespaces/default/pods/web:${port}/proxy/metrics?x=1`]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('you asked /metrics?x=1');
    // No port: the pod's first container port.
    expect((await kubectl(['get', '--raw', '/api/v1/namespaces/default/pods/web/proxy/healthz'])).stdout).toBe(
      'you asked /healthz',
    );
  });

  it('says why when the pod is unknown or its port does not answer', async () => {
    const missing = await kubectl(['get', '--raw', '/api/v1/namespaces/default/pods/nope:80/proxy/']);
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('pods "nope" not found');
    const closed = await kubectl(['get', '--raw', '/api/v1/namespaces/default/pods/web:1/proxy/']);
    expect(closed.code).not.toBe(0);
    expect(closed.stderr).toContain('error trying to reach service: dial tcp 127.0.0.1:1');
  });
});
