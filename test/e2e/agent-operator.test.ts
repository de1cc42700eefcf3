/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { execFile } from 'node:child_process';
import { mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { Server } from 'node:http';
import { Agent } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { silentLogger } from '../../src/observability/logger.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';
import { cniVars, ipamConf } from '../helpers/cni-call.js';

/** The static binary (bin/eni-ipam-cni links to what `npm run build` compiles). */
const PLUGIN = fileURLToPath(new URL('../../bin/eni-ipam-cni', import.meta.url));
let c: TestCluster;
let agent: Agent;
let server: Server;
let socket: string;
let node: string;

function cni(command: string, container: string): Promise<{ code: number; out: any }> {
  return new Promise((resolve) => {
    const child = execFile(
      PLUGIN,
      [],
      {
        env: {
          PATH: process.env.PATH,
          ...cniVars(command, container),
        },
      },
      (err, stdout) => resolve({ code: err ? 1 : 0, out: stdout.trim() ? JSON.parse(stdout) : undefined }),
    );
    child.stdin!.end(ipamConf(socket));
  });
}

beforeAll(async () => {
  c = await testCluster();
  // ecs.g7.4xlarge holds 7 secondary ENIs × 30 IPs.
  await c.addClass('big', {
    vSwitchTags: { role: 'pods' },
    securityGroupIDs: ['sg-demo-pods'],
    preAllocate: 205,
    releaseDelaySeconds: 0,
  });
  node = await c.addNode('i-demo-24');
  await c.startOperator();
  await allReady(c, [node], 30_000);
  const dir = mkdtempSync(join(tmpdir(), 'agent-e2e-'));
  socket = join(dir, 'agent.sock');
  agent = new Agent({
    kc: c.kc,
    node,
    stateDir: dir,
    cooldownMs: 100,
    statusIntervalMs: 200,
    logger: silentLogger(),
    registry: new Registry(),
  });
  await agent.start();
  server = await serveAgentApi(agent, socket);
  await eventually(() => agent.ready);
}, 60_000);
afterAll(async () => {
  server?.close();
  await agent?.stop();
  await c?.close();
});

describe('agent and plugin on a pool the operator keeps full', () => {
  it('gives 200 parallel ADDs 200 distinct IPs, all from InUse ENIs of the node', async () => {
    expect(realpathSync(PLUGIN)).toBe(fileURLToPath(new URL('../../dist/bin/eni-ipam-cni', import.meta.url)));
    const names = Array.from({ length: 200 }, (_, i) => `pod-${i}`);
    const results: Array<{ code: number; out: any }> = [];
    for (let i = 0; i < names.length; i += 50)
      results.push(...(await Promise.all(names.slice(i, i + 50).map((n) => cni('ADD', n)))));
    expect(results.filter((r) => r.code !== 0)).toEqual([]);
    const ips = results.map((r) => r.out.ips[0].address.split('/')[0]);
    expect(new Set(ips).size).toBe(200);
    const onNode = new Set(
      c.ecs
        .state()
        .enis.filter((e) => e.instanceId === 'i-demo-24' && e.type === 'Secondary' && e.status === 'InUse')
        .flatMap((e) => [e.primaryIp, ...e.secondaryIps]),
    );
    for (const ip of ips) expect(onNode.has(ip)).toBe(true);
    // The operator and the agent write the same status, each its own fields.
    const pool = await eventually(async () => {
      const p = await c.pool(node);
      // The agent writes `used`; the operator's summary follows on its next reconcile.
      return Object.keys(p.status?.used ?? {}).length === 200 && p.status?.summary?.used === 200 ? p : undefined;
    });
    expect(pool.status!.enis!.length).toBeGreaterThan(0);
  }, 120_000);

  it('releases the excess through the handshake when pods go away, never an IP in use', async () => {
    const gone = Array.from({ length: 150 }, (_, i) => `pod-${i}`);
    for (const n of gone) agent.release(n, 'eth0');
    const kept = new Set(agent.list().map((a) => a.ip));
    expect(kept.size).toBe(50);
    await c.custom.patchClusterCustomObject(
      { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: node, body: { spec: { preAllocate: 10 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually(async () => (c.mutatingCalls().UnassignPrivateIpAddresses ?? 0) > 0, 15_000);
    const settled = await eventually(async () => {
      const p = await c.pool(node);
      return Object.keys(p.status?.releaseRequests ?? {}).length === 0 &&
        (p.status?.summary?.available ?? Infinity) <= 70
        ? p
        : undefined;
    }, 20_000);
    const onNode = new Set(
      c.ecs
        .state()
        .enis.filter((e) => e.instanceId === 'i-demo-24' && e.type === 'Secondary')
        .flatMap((e) => [e.primaryIp, ...e.secondaryIps]),
    );
    for (const ip of kept) expect(onNode.has(ip)).toBe(true);
    expect(settled.status!.summary!.used).toBe(50);
  }, 60_000);
});
