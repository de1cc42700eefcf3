import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { CRDS } from '../../src/api/crds.js';
import type { KubeEmulator } from '../../src/sim/kube/index.js';
import { BIN } from '../helpers/cli.js';
import { eventually } from '../helpers/ecs.js';
import { http as kubeHttp, kube } from '../helpers/kube.js';

let emu: KubeEmulator;
let dir: string;
beforeAll(async () => {
  const k = await kube();
  emu = k.emu;
  for (const crd of Object.values(CRDS)) await kubeHttp(emu, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
  const custom = k.kc.makeApiClient(CustomObjectsApi);
  await custom.createClusterCustomObject({ group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', body: { apiVersion: 'eniipam.io/v1alpha1', kind: 'ENIPool', metadata: { name: 'node-9' }, spec: { nodeName: 'node-9' } } });
  await custom.patchClusterCustomObjectStatus(
    { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: 'node-9', body: { status: { enis: [{ id: 'eni-a', mac: '00:16:3e:00:00:01', state: 'InUse', vSwitchCIDR: '10.1.0.0/24', gatewayIP: '10.1.0.253', ips: ['10.1.0.7'] }] } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  dir = mkdtempSync(join(tmpdir(), 'agent-cli-'));
  writeFileSync(join(dir, 'kubeconfig'), emu.kubeconfig);
});
afterAll(() => emu.close());

describe('eni-ipam agent', () => {
  it('serves its socket, is ready once it sees its pool, and stops on SIGTERM', async () => {
    const socket = join(dir, 'run', 'agent.sock');
    const child = spawn(BIN, ['agent', '--node', 'node-9', '--kubeconfig', join(dir, 'kubeconfig'), '--state-dir', join(dir, 'state'), '--socket', socket, '--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: string[] = [];
    createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
    child.stderr!.resume();
    const health = (await eventually(() => lines.find((l) => l.startsWith('health ')), 15_000))!.slice(7);
    await eventually(async () => (await fetch(health.replace('/healthz', '/readyz'))).status === 200);
    const lease = await new Promise<{ ip: string }>((resolve, reject) => {
      const req = http.request({ socketPath: socket, path: '/v1/allocate', method: 'POST' }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve(JSON.parse(text).lease));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ containerId: 'c1', ifName: 'eth0', pod: 'default/a' }));
    });
    expect(lease.ip).toBe('10.1.0.7');
    child.kill('SIGTERM');
    expect((await once(child, 'exit'))[0]).toBe(0);
  });
});
