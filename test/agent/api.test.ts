import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { Server as HttpServer } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import { Agent } from '../../src/agent/agent.js';
import { MAX_BODY_BYTES, serveAgentApi } from '../../src/agent/api.js';
import { agentClient, agentRequest } from '../../src/agent/client.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { eventually } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';

let emu: ControlPlane;
let kc: KubeConfig;
const agents: Agent[] = [];
const servers: HttpServer[] = [];

async function agentOn(node: string): Promise<{ agent: Agent; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'api-'));
  const agent = new Agent({
    kc,
    node,
    stateDir: dir,
    cooldownMs: 100,
    statusIntervalMs: 200,
    logger: silentLogger(),
    registry: new Registry(),
  });
  await agent.start();
  agents.push(agent);
  return { agent, dir };
}

async function serve(agent: Agent, socket: string, o: { socketGid?: number } = {}): Promise<HttpServer> {
  const s = await serveAgentApi(agent, socket, o);
  servers.push(s);
  return s;
}

beforeAll(async () => {
  const k = await kubeWithPool('n', { cidr: '10.3.0.0/24', gateway: '10.3.0.253', ips: ['10.3.0.1', '10.3.0.2'] });
  emu = k.emu;
  kc = k.kc;
});
afterAll(async () => {
  for (const s of servers) s.close();
  for (const a of agents) await a.stop();
  await emu.close();
});

describe('the agent’s socket', () => {
  it('is mode 0600 even under umask 000, or 0660 with the group given', async () => {
    const { agent, dir } = await agentOn('n');
    const old = process.umask(0);
    try {
      await serve(agent, join(dir, 'a.sock'));
      await serve(agent, join(dir, 'sub', 'g.sock'), { socketGid: 4321 });
    } finally {
      process.umask(old);
    }
    expect(statSync(join(dir, 'a.sock')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'sub', 'g.sock')).mode & 0o777).toBe(0o660);
    if (process.getuid?.() === 0) expect(statSync(join(dir, 'sub', 'g.sock')).gid).toBe(4321);
    expect(statSync(join(dir, 'sub')).mode & 0o777).toBe(0o755);
    // The process umask is back as it was.
    expect(process.umask(old)).toBe(old);
  });

  it('replaces a stale socket, but never a file that is not a socket', async () => {
    const { agent, dir } = await agentOn('n');
    const stale = join(dir, 'stale.sock');
    // A socket file that a killed agent left behind.
    spawnSync(
      process.execPath,
      [
        '-e',
        `require('node:net').createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, 'SIGKILL'))`,
      ],
      { stdio: 'ignore' },
    );
    expect(statSync(stale).isSocket()).toBe(true);
    await serve(agent, stale);
    expect((await agentRequest(stale, 'GET', '/v1/allocations', undefined)).status).toBe(200);
    const precious = join(dir, 'precious');
    writeFileSync(precious, 'keep me');
    await expect(serveAgentApi(agent, precious)).rejects.toThrow(
      `${precious} exists and is not a socket; refusing to replace it (choose another --socket)`,
    );
    expect(readFileSync(precious, 'utf8')).toBe('keep me');
  });
});

describe('the agent’s API, on bad requests', () => {
  let socket: string;
  beforeAll(async () => {
    const { agent, dir } = await agentOn('n');
    socket = join(dir, 'agent.sock');
    await serve(agent, socket);
    await eventually(() => agent.ready);
  });

  it('answers 413 to a body over 1 MiB, and keeps serving', async () => {
    const big = JSON.stringify({ env: { CNI_COMMAND: 'ADD' }, stdin: 'x'.repeat(MAX_BODY_BYTES) });
    const r = await agentRequest(socket, 'POST', '/v1/cni', big);
    expect(r.status).toBe(413);
    expect(JSON.parse(r.text)).toEqual({
      error: 'too-large',
      message: `the request body exceeds ${MAX_BODY_BYTES} bytes`,
    });
    expect((await agentRequest(socket, 'GET', '/v1/allocations', undefined)).status).toBe(200);
  });

  it('answers 400 with a message to malformed JSON and wrong types', async () => {
    const bad = async (path: string, body: string) => {
      const r = await agentRequest(socket, 'POST', path, body);
      return { status: r.status, ...JSON.parse(r.text) };
    };
    expect(await bad('/v1/cni', '{"env":')).toMatchObject({
      status: 400,
      error: 'bad-request',
      message: expect.stringContaining('the body is not valid JSON'),
    });
    expect(await bad('/v1/cni', '[]')).toMatchObject({ status: 400, message: 'the body must be a JSON object' });
    expect(await bad('/v1/cni', JSON.stringify({ env: 'ADD', stdin: '{}' }))).toMatchObject({
      status: 400,
      message: '"env" must be an object of the CNI_* variables',
    });
    expect(await bad('/v1/cni', JSON.stringify({ env: { CNI_COMMAND: 1 }, stdin: '{}' }))).toMatchObject({
      status: 400,
      message: '"env.CNI_COMMAND" must be a string',
    });
    expect(await bad('/v1/cni', JSON.stringify({ env: {} }))).toMatchObject({
      status: 400,
      message: expect.stringContaining('"stdin" must be a string'),
    });
    expect(await bad('/v1/allocate', JSON.stringify({ containerId: 5, ifName: 'eth0', pod: 'a/b' }))).toMatchObject({
      status: 400,
      message: '"containerId" must be a non-empty string',
    });
    expect(await bad('/v1/release', JSON.stringify({ containerId: 'c', ifName: [] }))).toMatchObject({
      status: 400,
      message: '"ifName" must be a non-empty string',
    });
    expect((await agentRequest(socket, 'GET', '/v1/nothing', undefined)).status).toBe(404);
  });
});

describe('STATUS', () => {
  it('answers 50 (not available) until the agent has seen its pool', async () => {
    const { agent, dir } = await agentOn('no-pool-yet');
    const socket = join(dir, 'agent.sock');
    await serve(agent, socket);
    const a = await agentClient.cni(socket, {
      env: { CNI_COMMAND: 'STATUS', CNI_PATH: '/opt/cni/bin' },
      stdin: JSON.stringify({ cniVersion: '1.1.0', name: 'pods', ipam: { type: 'eni-ipam-cni' } }),
    });
    expect(a.exitCode).toBe(1);
    expect(JSON.parse(a.stdout)).toEqual({
      cniVersion: '1.1.0',
      code: 50,
      msg: 'the eni-ipam agent has not seen this node’s ENIPool yet; is the operator running?',
    });
  });
});
