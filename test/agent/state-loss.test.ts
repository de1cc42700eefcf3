import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type CustomObjectsApi } from '@kubernetes/client-node';
import type { ENIPool } from '../../src/api/types.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { BIN } from '../helpers/cli.js';
import { eventually } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';
import { agentArgs, servingOf } from '../../testbed/harness/process.js';

const NODE = 'node-7';
const IPS = Array.from({ length: 12 }, (_, i) => `10.7.0.${i + 10}`);
let emu: ControlPlane;
let custom: CustomObjectsApi;
let core: CoreV1Api;
let dir: string;
const children: ChildProcess[] = [];
beforeAll(async () => {
  const k = await kubeWithPool(NODE, { cidr: '10.7.0.0/24', gateway: '10.7.0.253', ips: IPS });
  emu = k.emu;
  custom = k.custom;
  core = k.kc.makeApiClient(CoreV1Api);
  dir = mkdtempSync(join(tmpdir(), 'agent-loss-'));
  writeFileSync(join(dir, 'kubeconfig'), emu.kubeconfig);
});
afterAll(async () => {
  children.forEach((c) => c.kill('SIGKILL'));
  await emu.close();
});

async function agent(stateDir: string, socket: string): Promise<ChildProcess> {
  const child = spawn(
    BIN,
    [
      ...agentArgs({ node: NODE, kubeconfig: join(dir, 'kubeconfig'), stateDir: stateDir, socket: socket }),
      '--status-interval',
      '0.1',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  const lines: string[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
  child.stderr!.resume();
  const { health } = (await eventually(() => lines.map(servingOf).find(Boolean), 15_000))!;
  await eventually(async () => (await fetch(health.replace('/healthz', '/readyz'))).status === 200, 15_000);
  return child;
}

const allocate = (socket: string, containerId: string) =>
  new Promise<string>((resolve, reject) => {
    const req = http.request({ socketPath: socket, path: '/v1/allocate', method: 'POST' }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () =>
        res.statusCode === 200
          ? resolve(JSON.parse(text).lease.ip)
          : reject(new Error(`HTTP ${res.statusCode} ${text}`)),
      );
    });
    req.on('error', reject);
    req.end(JSON.stringify({ containerId, ifName: 'eth0', pod: `default/${containerId}` }));
  });

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const pool = async () =>
  (await custom.getClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipools',
    name: NODE,
  })) as ENIPool;

describe('an agent restarted without its state file', () => {
  it('hands none of the addresses in use to new containers, keeps them in status.used, and says so', async () => {
    const socket = join(dir, 'a.sock');
    const first = await agent(join(dir, 'state-a'), socket);
    const before = [];
    for (let i = 0; i < 4; i++) before.push(await allocate(socket, `old${i}`));
    await eventually(async () => Object.keys((await pool()).status?.used ?? {}).length === 4);
    // A pod running on the node with an address of the pool that neither record names.
    await core.createNamespacedPod({
      namespace: 'default',
      body: { metadata: { name: 'elder' }, spec: { nodeName: NODE, containers: [{ name: 'c', image: 'x' }] } },
    });
    await core.patchNamespacedPodStatus(
      { namespace: 'default', name: 'elder', body: { status: { phase: 'Running', podIP: IPS[11] } } },
      merge,
    );
    first.kill('SIGKILL');
    await once(first, 'exit');

    const second = await agent(join(dir, 'state-b'), socket); // a wiped disk: a new, empty state directory
    const after = [];
    for (let i = 0; i < 4; i++) after.push(await allocate(socket, `new${i}`));
    for (const ip of after) expect([...before, IPS[11]]).not.toContain(ip);
    await eventually(async () => Object.keys((await pool()).status?.used ?? {}).length === 9); // 4 old, the elder pod's, 4 new
    const used = (await pool()).status!.used!;
    for (const ip of before) expect(used[ip]).toBeDefined();
    const events = await core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${NODE}`,
    });
    expect(events.items.find((e) => e.reason === 'RecoveredAllocations')?.message).toMatch(
      /^the agent's state lacked 5 addresses in use/,
    );
    second.kill('SIGTERM');
    await once(second, 'exit');
  }, 60_000);
});
