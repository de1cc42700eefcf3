import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { KubeEmulator } from '../../src/sim/kube/index.js';
import { BIN, isLogEntry, runCli } from '../helpers/cli.js';
import { eventually } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';
import { agentArgs, servingOf } from '../../bench/process.js';

let emu: KubeEmulator;
let dir: string;
beforeAll(async () => {
  const k = await kubeWithPool('node-9', {
    cidr: '10.1.0.0/24',
    gateway: '10.1.0.253',
    ips: ['10.1.0.7', ...Array.from({ length: 80 }, (_, i) => `10.1.0.${i + 100}`)],
  });
  emu = k.emu;
  dir = mkdtempSync(join(tmpdir(), 'agent-cli-'));
  writeFileSync(join(dir, 'kubeconfig'), emu.kubeconfig);
});
afterAll(() => emu.close());

describe('eni-ipam agent', () => {
  it('serves its socket, is ready once it sees its pool, and stops on SIGTERM', async () => {
    const socket = join(dir, 'run', 'agent.sock');
    const child = spawn(
      BIN,
      [
        ...agentArgs({
          node: 'node-9',
          kubeconfig: join(dir, 'kubeconfig'),
          stateDir: join(dir, 'state'),
          socket: socket,
        }),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const lines: string[] = [];
    createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const { health } = (await eventually(() => lines.map(servingOf).find(Boolean), 15_000))!;
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
    // Every line is one JSON object with its level by name; the serving line once, socket and URLs in it.
    expect({ stderr, plain: lines.filter((l) => !isLogEntry(l)) }).toEqual({ stderr: '', plain: [] });
    expect(lines.map((l) => JSON.parse(l) as { msg: string }).filter((e) => e.msg === 'serving')).toEqual([
      expect.objectContaining({ level: 'info', node: 'node-9', socket, health, metrics: expect.any(String) }),
    ]);
  });

  it('killed with SIGKILL in the middle of a burst, restarts with every completed allocation and gives no IP twice', async () => {
    const socket = join(dir, 'run2', 'agent.sock');
    const args = [
      ...agentArgs({
        node: 'node-9',
        kubeconfig: join(dir, 'kubeconfig'),
        stateDir: join(dir, 'state2'),
        socket: socket,
      }),
    ];
    const start = async () => {
      const child = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      const lines: string[] = [];
      createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
      child.stderr!.resume();
      const { health } = (await eventually(() => lines.map(servingOf).find(Boolean), 15_000))!;
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
      const kept = new Map(
        ((await call('GET', '/v1/allocations')).body.allocations as Array<{ containerId: string; ip: string }>).map(
          (a) => [a.containerId, a.ip],
        ),
      );
      for (const [container, ip] of answered) expect(kept.get(container)).toBe(ip);
      const more = await Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          call('POST', '/v1/allocate', { containerId: `n${i}`, ifName: 'eth0', pod: `default/n${i}` }),
        ),
      );
      const all = [...kept.values(), ...more.filter((r) => r.status === 200).map((r) => r.body.lease.ip as string)];
      expect(new Set(all).size).toBe(all.length);
    } finally {
      second.kill('SIGTERM');
      await once(second, 'exit');
    }
  }, 60_000);

  it('creates its socket 0600 under umask 000, 0660 for --socket-group, and refuses bad socket settings', async () => {
    const base = [
      'agent',
      '--node',
      'node-9',
      '--kubeconfig',
      join(dir, 'kubeconfig'),
      '--metrics-addr',
      '127.0.0.1:0',
      '--health-addr',
      '127.0.0.1:0',
    ];
    const serveUnderUmask000 = async (extra: string[], socket: string) => {
      const child = spawn(
        'sh',
        [
          '-c',
          'umask 000 && exec "$@"',
          'sh',
          BIN,
          ...base,
          '--state-dir',
          join(dir, `state-${extra.length}`),
          '--socket',
          socket,
          ...extra,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const lines: string[] = [];
      createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
      child.stderr!.resume();
      await eventually(() => lines.map(servingOf).find(Boolean)?.socket, 15_000);
      const st = statSync(socket);
      child.kill('SIGTERM');
      await once(child, 'exit');
      return st;
    };
    expect((await serveUnderUmask000([], join(dir, 'm1', 'agent.sock'))).mode & 0o777).toBe(0o600);
    const grouped = await serveUnderUmask000(['--socket-group', '4321'], join(dir, 'm2', 'agent.sock'));
    expect(grouped.mode & 0o777).toBe(0o660);
    if (process.getuid?.() === 0) expect(grouped.gid).toBe(4321);
    const noGroup = await runCli([
      ...base,
      '--state-dir',
      join(dir, 'state-x'),
      '--socket',
      join(dir, 'm3', 'agent.sock'),
      '--socket-group',
      'no-such-group',
    ]);
    expect(noGroup).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--socket-group no-such-group: no such group in /etc/group'),
    });
    writeFileSync(join(dir, 'not-a-socket'), 'data');
    const taken = await runCli([...base, '--state-dir', join(dir, 'state-y'), '--socket', join(dir, 'not-a-socket')]);
    expect(taken).toMatchObject({
      code: 2,
      stderr: expect.stringContaining(
        `${join(dir, 'not-a-socket')} exists and is not a socket; refusing to replace it`,
      ),
    });
    expect(readFileSync(join(dir, 'not-a-socket'), 'utf8')).toBe('data');
  }, 60_000);
});
