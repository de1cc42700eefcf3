import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
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
    { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: 'node-9', body: { status: { enis: [{ id: 'eni-a', mac: '00:16:3e:00:00:01', state: 'InUse', vSwitchCIDR: '10.1.0.0/24', gatewayIP: '10.1.0.253', ips: ['10.1.0.7', ...Array.from({ length: 80 }, (_, i) => `10.1.0.${i + 100}`)] }] } } },
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

  it('killed with SIGKILL in the middle of a burst, restarts with every completed allocation and gives no IP twice', async () => {
    const socket = join(dir, 'run2', 'agent.sock');
    const args = ['agent', '--node', 'node-9', '--kubeconfig', join(dir, 'kubeconfig'), '--state-dir', join(dir, 'state2'), '--socket', socket, '--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0'];
    const start = async () => {
      const child = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      const lines: string[] = [];
      createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
      child.stderr!.resume();
      const health = (await eventually(() => lines.find((l) => l.startsWith('health ')), 15_000))!.slice(7);
      await eventually(async () => (await fetch(health.replace('/healthz', '/readyz'))).status === 200);
      return child;
    };
    const call = (method: string, path: string, payload?: unknown) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = http.request({ socketPath: socket, path, method }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end(payload === undefined ? undefined : JSON.stringify(payload));
      });
    const first = await start();
    const answered = new Map<string, string>();
    const burst = Array.from({ length: 60 }, (_, i) =>
      call('POST', '/v1/allocate', { containerId: `b${i}`, ifName: 'eth0', pod: `default/b${i}` })
        .then((r) => r.status === 200 && answered.set(`b${i}`, r.body.lease.ip))
        .catch(() => undefined),
    );
    await eventually(() => answered.size >= 10, 10_000, 1);
    first.kill('SIGKILL');
    await Promise.all(burst);
    await once(first, 'exit');
    const second = await start();
    try {
      const kept = new Map(((await call('GET', '/v1/allocations')).body.allocations as Array<{ containerId: string; ip: string }>).map((a) => [a.containerId, a.ip]));
      for (const [container, ip] of answered) expect(kept.get(container)).toBe(ip);
      const more = await Promise.all(Array.from({ length: 15 }, (_, i) => call('POST', '/v1/allocate', { containerId: `n${i}`, ifName: 'eth0', pod: `default/n${i}` })));
      const all = [...kept.values(), ...more.filter((r) => r.status === 200).map((r) => r.body.lease.ip as string)];
      expect(new Set(all).size).toBe(all.length);
    } finally {
      second.kill('SIGTERM');
      await once(second, 'exit');
    }
  }, 60_000);
});
