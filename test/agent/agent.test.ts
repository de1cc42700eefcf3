/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { Server } from 'node:http';
import { Agent } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import type { ENIPool } from '../../src/api/types.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { eventually } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const IPS = Array.from({ length: 60 }, (_, i) => `192.168.16.${i + 1}`);
let emu: ControlPlane;
let kc: KubeConfig;
let custom: CustomObjectsApi;
let agent: Agent;
let server: Server;
let socket: string;
let dir: string;

function call(method: string, path: string, payload?: unknown): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath: socket, path, method, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload));
  });
}

const poolOf = async () =>
  (await custom.getClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipools',
    name: 'node-1',
  })) as ENIPool;

async function startAgent() {
  agent = new Agent({
    kc,
    node: 'node-1',
    stateDir: dir,
    cooldownMs: 200,
    statusIntervalMs: 100,
    logger: silentLogger(),
    registry: new Registry(),
  });
  await agent.start();
  server = await serveAgentApi(agent, socket);
}

beforeEach(async () => {
  ({ emu, kc, custom } = await kubeWithPool('node-1', {
    cidr: '192.168.16.0/20',
    gateway: '192.168.31.253',
    ips: IPS,
  }));
  dir = mkdtempSync(join(tmpdir(), 'agent-'));
  socket = join(dir, 'agent.sock');
  await startAgent();
  await eventually(() => agent.ready);
});
afterEach(async () => {
  server.close();
  await agent.stop();
  await emu.close();
});

describe('node agent', () => {
  it('hands 50 parallel pods 50 distinct IPs and reports them in a handful of status writes', async () => {
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        call('POST', '/v1/allocate', { containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` }),
      ),
    );
    const ips = answers.map((a) => a.body.lease.ip);
    expect(new Set(ips).size).toBe(50);
    for (const ip of ips) expect(IPS).toContain(ip);
    expect(answers[0]!.body.lease).toMatchObject({
      prefixLength: 20,
      gateway: '192.168.31.253',
      eniId: 'eni-a',
      mac: '00:16:3e:00:00:01',
    });
    const pool = await eventually(async () => {
      const p = await poolOf();
      return Object.keys(p.status?.used ?? {}).length === 50 ? p : undefined;
    });
    expect(pool.status!.used![ips[7]!]).toEqual({ pod: 'default/p7', containerID: 'c7', ifName: 'eth0' });
    const writes = (await agent.metrics.statusWrites.get()).values[0]!.value;
    expect(writes).toBeLessThanOrEqual(10); // a handful for 50 allocations, however the burst is spread over the 100 ms intervals
    expect(pool.status!.enis).toHaveLength(1); // the operator's fields are left alone
  });

  it('is idempotent per container and interface, survives a restart, and refuses bad requests', async () => {
    const a = await call('POST', '/v1/allocate', { containerId: 'c1', ifName: 'eth0', pod: 'default/a' });
    const again = await call('POST', '/v1/allocate', { containerId: 'c1', ifName: 'eth0', pod: 'default/a' });
    expect(again.body.lease.ip).toBe(a.body.lease.ip);
    server.close();
    await agent.stop();
    await startAgent();
    await eventually(() => agent.ready);
    expect((await call('GET', '/v1/allocations')).body.allocations.map((x: { ip: string }) => x.ip)).toEqual([
      a.body.lease.ip,
    ]);
    expect(
      (await call('POST', '/v1/allocate', { containerId: 'c1', ifName: 'eth0', pod: 'default/a' })).body.lease.ip,
    ).toBe(a.body.lease.ip);
    expect(await call('POST', '/v1/allocate', '{not json')).toMatchObject({
      status: 400,
      body: { error: 'bad-request' },
    });
    expect(await call('POST', '/v1/allocate', { ifName: 'eth0' })).toMatchObject({
      status: 400,
      body: { message: '"containerId" must be a non-empty string' },
    });
  });

  it('answers release requests: ready for a free IP, do-not-release for one in use, and drops acks no longer asked for', async () => {
    const used = (await call('POST', '/v1/allocate', { containerId: 'c1', ifName: 'eth0', pod: 'default/a' })).body
      .lease.ip;
    const free = IPS.find((ip) => ip !== used)!;
    await custom.patchClusterCustomObjectStatus(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipools',
        name: 'node-1',
        body: { status: { releaseRequests: { [used]: '2026-01-01T00:00:00Z', [free]: '2026-01-01T00:00:00Z' } } },
      },
      merge,
    );
    const acked = await eventually(async () => {
      const p = await poolOf();
      return Object.keys(p.status?.releaseAcks ?? {}).length === 2 ? p : undefined;
    });
    expect(acked.status!.releaseAcks).toEqual({
      [used]: { answer: 'do-not-release', requestedAt: '2026-01-01T00:00:00Z' },
      [free]: { answer: 'ready', requestedAt: '2026-01-01T00:00:00Z' },
    });
    // A requested IP is never handed out.
    for (let i = 0; i < 58; i++) {
      const r = await call('POST', '/v1/allocate', { containerId: `x${i}`, ifName: 'eth0', pod: `default/x${i}` });
      expect(r.body.lease.ip).not.toBe(free);
    }
    expect(await call('POST', '/v1/allocate', { containerId: 'y', ifName: 'eth0', pod: 'default/y' })).toMatchObject({
      status: 503,
      body: { error: 'pool-empty', reason: expect.stringMatching(/^all \d+ pod IPs of the pool are in use/) },
    });
    await custom.patchClusterCustomObjectStatus(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipools',
        name: 'node-1',
        body: { status: { releaseRequests: { [used]: null, [free]: null } } },
      },
      merge,
    );
    await eventually(async () => Object.keys((await poolOf()).status?.releaseAcks ?? {}).length === 0);
  });

  it('after a restart, keeps and flags an allocation whose IP left the pool (log, metric, Event)', async () => {
    const ip = (await call('POST', '/v1/allocate', { containerId: 'c1', ifName: 'eth0', pod: 'default/a' })).body.lease
      .ip;
    server.close();
    await agent.stop();
    await custom.patchClusterCustomObjectStatus(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipools',
        name: 'node-1',
        body: {
          status: {
            enis: [
              {
                id: 'eni-a',
                mac: '00:16:3e:00:00:01',
                state: 'InUse',
                vSwitchCIDR: '192.168.16.0/20',
                gatewayIP: '192.168.31.253',
                ips: IPS.filter((x) => x !== ip),
              },
            ],
          },
        },
      },
      merge,
    );
    await startAgent();
    await eventually(() => agent.ready);
    expect(agent.list().map((a) => a.ip)).toEqual([ip]);
    expect((await agent.metrics.stray.get()).values[0]!.value).toBe(1);
    const core = kc.makeApiClient(CoreV1Api);
    await eventually(async () =>
      (await core.listNamespacedEvent({ namespace: 'default' })).items.some(
        (e) => e.reason === 'StrayAllocation' && e.message!.includes(ip),
      ),
    );
  });

  it('cools a released IP down before handing it out again', async () => {
    for (let i = 0; i < 60; i++)
      await call('POST', '/v1/allocate', { containerId: `c${i}`, ifName: 'eth0', pod: `default/p${i}` });
    const ip = (await call('GET', '/v1/allocations')).body.allocations.find(
      (a: { containerId: string }) => a.containerId === 'c5',
    ).ip;
    expect((await call('POST', '/v1/release', { containerId: 'c5', ifName: 'eth0' })).body.released).toEqual([ip]);
    expect((await call('POST', '/v1/release', { containerId: 'c5', ifName: 'eth0' })).body.released).toEqual([]);
    expect(
      (await call('POST', '/v1/allocate', { containerId: 'new', ifName: 'eth0', pod: 'default/new' })).status,
    ).toBe(503);
    await new Promise((r) => setTimeout(r, 250));
    expect(
      (await call('POST', '/v1/allocate', { containerId: 'new', ifName: 'eth0', pod: 'default/new' })).body.lease.ip,
    ).toBe(ip);
  });
});
