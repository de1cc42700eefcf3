/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { Server } from 'node:http';
import { Agent } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { KubeEmulator } from '../../src/sim/kube/index.js';
import { eventually } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';

const PLUGIN = fileURLToPath(new URL('../../bin/eni-ipam-cni', import.meta.url));
const IPS = Array.from({ length: 210 }, (_, i) => `10.2.${Math.floor(i / 250)}.${(i % 250) + 1}`);
let emu: KubeEmulator;
let agent: Agent;
let server: Server;
let socket: string;

/** Runs the plugin as a runtime does: environment variables and the network config on stdin. */
function cni(command: string, container: string, conf: Record<string, unknown> | string = {}, env: Record<string, string> = {}): Promise<{ code: number; out: any }> {
  const stdin = typeof conf === 'string' ? conf : JSON.stringify({ cniVersion: '1.0.0', name: 'pods', ipam: { type: 'eni-ipam-cni', socket }, ...conf });
  return new Promise((resolve) => {
    const child = execFile(
      PLUGIN,
      [],
      { env: { PATH: process.env.PATH, CNI_COMMAND: command, CNI_CONTAINERID: container, CNI_NETNS: `/var/run/netns/${container}`, CNI_IFNAME: 'eth0', CNI_ARGS: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${container}`, CNI_PATH: '/opt/cni/bin', ...env } },
      (err, stdout) => resolve({ code: err ? Number(err.code ?? 1) : 0, out: stdout.trim() ? JSON.parse(stdout) : undefined }),
    );
    child.stdin!.end(stdin);
  });
}

beforeAll(async () => {
  const k = await kubeWithPool('n', { cidr: '10.2.0.0/22', gateway: '10.2.3.253', ips: IPS, mac: '00:16:3e:00:00:0a' });
  emu = k.emu;
  const dir = mkdtempSync(join(tmpdir(), 'cni-'));
  socket = join(dir, 'agent.sock');
  agent = new Agent({ kc: k.kc, node: 'n', stateDir: dir, cooldownMs: 300, statusIntervalMs: 200, logger: silentLogger(), registry: new Registry() });
  await agent.start();
  server = await serveAgentApi(agent, socket);
  await eventually(() => agent.ready);
});
afterAll(async () => {
  server.close();
  await agent.stop();
  await emu.close();
});

describe('eni-ipam-cni', () => {
  it('answers ADD with the address, prefix, gateway, default route and the ENI, and the same again', async () => {
    const add = await cni('ADD', 'pod-a');
    expect(add.code).toBe(0);
    expect(add.out).toEqual({
      cniVersion: '1.0.0',
      ips: [{ address: `${IPS[0]}/22`, gateway: '10.2.3.253' }],
      routes: [{ dst: '0.0.0.0/0', gw: '10.2.3.253' }],
      dns: {},
      eniIpam: { eniId: 'eni-a', mac: '00:16:3e:00:00:0a', vSwitchCidr: '10.2.0.0/22' },
    });
    expect((await cni('ADD', 'pod-a')).out.ips).toEqual(add.out.ips);
    expect((await cni('CHECK', 'pod-a', { prevResult: add.out })).code).toBe(0);
    expect((await cni('DEL', 'pod-a')).code).toBe(0);
    expect((await cni('DEL', 'pod-a')).code).toBe(0);
    expect((await cni('DEL', 'never-seen')).code).toBe(0);
    expect(await cni('CHECK', 'pod-a')).toMatchObject({ code: 1, out: { code: 3 } });
  });

  it('says try again later (11) promptly when the pool is empty', async () => {
    // Every free address is taken (through the agent's own API), so the plugin finds none.
    const names: string[] = [];
    for (let i = 0; agent.allocate({ containerId: `fill-${i}`, ifName: 'eth0', pod: `default/fill-${i}` }) !== 'pool-empty'; i++) names.push(`fill-${i}`);
    const t0 = Date.now();
    const r = await cni('ADD', 'one-too-many');
    expect(r).toMatchObject({ code: 1, out: { code: 11 } });
    expect(r.out.msg).toMatch(/no free pod IP on this node yet/);
    expect(Date.now() - t0).toBeLessThan(3000);
    for (const n of names) agent.release(n, 'eth0');
  });

  it('names what is wrong with its input, with the spec’s codes', async () => {
    expect(await cni('ADD', 'x', '{not json')).toMatchObject({ code: 1, out: { code: 6 } });
    expect(await cni('ADD', 'x', { cniVersion: '9.9.9' })).toMatchObject({ code: 1, out: { code: 1 } });
    const noSocket = await cni('ADD', 'x', JSON.stringify({ cniVersion: '1.0.0', ipam: { type: 'eni-ipam-cni' } }));
    expect(noSocket).toMatchObject({ code: 1, out: { code: 7, msg: expect.stringContaining('ipam.socket is missing') } });
    const noId = await cni('ADD', '', {}, { CNI_CONTAINERID: '' });
    expect(noId).toMatchObject({ code: 1, out: { code: 4, msg: expect.stringContaining('CNI_CONTAINERID is not set') } });
    const gone = await cni('ADD', 'x', { ipam: { type: 'eni-ipam-cni', socket: '/nonexistent/agent.sock' } });
    expect(gone).toMatchObject({ code: 1, out: { code: 11, msg: expect.stringContaining('cannot reach the eni-ipam agent at /nonexistent/agent.sock') } });
  });

  it('answers VERSION and STATUS', async () => {
    expect((await cni('VERSION', 'x', '{}')).out).toEqual({ cniVersion: '1.0.0', supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });
    expect((await cni('STATUS', 'x')).code).toBe(0);
    expect(await cni('STATUS', 'x', { ipam: { type: 'eni-ipam-cni', socket: '/nonexistent/agent.sock' } })).toMatchObject({ code: 1, out: { code: 50 } });
  });
});
