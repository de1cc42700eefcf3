import { spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { ROOT } from '../helpers/helm.js';
import { agentClient, agentRequest } from '../../src/agent/client.js';
import type { Lease } from '../../src/agent/allocator.js';
import { BIN, isLogEntry, runCli, startCli } from '../helpers/cli.js';
import { eventually } from '../helpers/ecs.js';
import { kubeWithPool } from '../helpers/kube.js';
import { agentArgs, servingOf } from '../../testbed/harness/process.js';

let emu: ControlPlane;
let custom: CustomObjectsApi;
let dir: string;
beforeAll(async () => {
  const k = await kubeWithPool('node-9', {
    cidr: '10.1.0.0/24',
    gateway: '10.1.0.253',
    ips: ['10.1.0.7', ...Array.from({ length: 80 }, (_, i) => `10.1.0.${i + 100}`)],
  });
  emu = k.emu;
  custom = k.custom;
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

  it('runs alone on its node: a second agent exits 1 with one line and leaves the first one’s socket and journal alone', async () => {
    const stateDir = join(dir, 'state-one');
    const socket = join(dir, 'run-one', 'agent.sock');
    const args = (state: string) =>
      agentArgs({ node: 'node-9', kubeconfig: join(dir, 'kubeconfig'), stateDir: state, socket });
    // The first in a PID namespace of its own, as in a pod: the lock must hold across namespaces.
    const first = await startCli(['--pid', '--fork', '--kill-child', BIN, ...args(stateDir)], {
      until: (l) => servingOf(l)?.socket,
      command: 'unshare',
    });
    const lease = await eventually(async () => {
      const l = await agentClient.allocate(socket, { containerId: 'one', ifName: 'eth0', pod: 'default/one' });
      return l === 'pool-empty' ? undefined : l;
    }, 15_000);
    const socketInode = statSync(socket).ino;
    const journal = join(stateDir, 'allocations.journal');
    const journalBefore = readFileSync(journal, 'utf8');
    // A DaemonSet surge: the same hostPath state directory and socket.
    const surge = await runCli(args(stateDir));
    expect(surge.code).toBe(1);
    expect(surge.stderr).toMatch(
      new RegExp(
        `^eni-ipam agent: the state directory ${stateDir} is in use by another eni-ipam agent \\(pid 1 on \\S+, ` +
          `serving ${socket} since \\S+\\); one agent runs per node: stop that one first .*--state-dir and --socket\n$`,
      ),
    );
    // A stray run with another state directory: the live socket is not taken from the first.
    const stray = await runCli(args(join(dir, 'state-stray')));
    expect(stray).toMatchObject({
      code: 1,
      stderr: `eni-ipam agent: another process (an eni-ipam agent?) serves ${socket}; one agent runs per node: stop that one first, or give this one its own --socket and --state-dir\n`,
    });
    expect(statSync(socket).ino).toBe(socketInode);
    expect(readFileSync(journal, 'utf8')).toBe(journalBefore);
    expect(
      (await agentClient.allocate(socket, { containerId: 'one', ifName: 'eth0', pod: 'default/one' })) as Lease,
    ).toMatchObject({ ip: lease.ip });
    // Killed (the pod's whole namespace goes), its lock goes with it: the next agent starts at once.
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    const t0 = Date.now();
    const next = await startCli(args(stateDir), { until: (l) => servingOf(l)?.socket });
    expect(Date.now() - t0).toBeLessThan(5000);
    try {
      const held = await agentRequest(socket, 'GET', '/v1/allocations', undefined);
      // Its own record (the pool is shared with the tests above: their addresses come back as recovered).
      const own = JSON.parse(held.text).allocations.filter((a: { recovered?: boolean }) => !a.recovered);
      expect(own).toMatchObject([{ containerId: 'one', ip: lease.ip }]);
    } finally {
      next.child.kill('SIGTERM');
      await once(next.child, 'exit');
    }
  }, 60_000);

  it('creates its socket 0600 under umask 000, 0660 for --socket-group, and refuses bad socket settings', async () => {
    const base = [
      'agent',
      '--node-routing=false',
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

  it('keeps the host’s conflist to its pool’s eniMode, and refuses conflist flags that do not fit', async () => {
    const confDir = join(dir, 'net.d');
    const shared = `${ROOT}examples/10-eni-ipam.conflist`;
    const exclusive = `${ROOT}examples/10-eni-ipam-exclusive.conflist`;
    const base = agentArgs({
      node: 'node-9',
      kubeconfig: join(dir, 'kubeconfig'),
      stateDir: join(dir, 'state-conf'),
      socket: join(dir, 'run-conf', 'agent.sock'),
    });
    const flags = ['--cni-conf-dir', confDir, '--shared-conflist', shared, '--exclusive-conflist', exclusive];
    const usage = async (args: string[], message: string) =>
      expect(await runCli([...base, ...args])).toMatchObject({ code: 2, stderr: expect.stringContaining(message) });
    await usage(['--cni-conf-dir', confDir], '--cni-conf-dir needs --shared-conflist and --exclusive-conflist');
    await usage(['--shared-conflist', shared], '--shared-conflist and --exclusive-conflist go with --cni-conf-dir');
    await usage(
      ['--cni-conf-dir', confDir, '--shared-conflist', exclusive, '--exclusive-conflist', exclusive],
      `the Shared conflist ${exclusive} is for Exclusive pools`,
    );
    const installed = join(confDir, '10-eni-ipam.conflist');
    const content = (path: string) => JSON.parse(readFileSync(path, 'utf8'));
    const setMode = (eniMode: 'Shared' | 'Exclusive') =>
      custom.patchClusterCustomObject(
        { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: 'node-9', body: { spec: { eniMode } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const child = spawn(BIN, [...base, ...flags], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.resume();
    child.stderr!.resume();
    try {
      await eventually(() => {
        try {
          return content(installed).plugins[0].type === 'ptp';
        } catch {
          return false;
        }
      }, 15_000);
      expect(content(installed)).toEqual(content(shared));
      await setMode('Exclusive');
      await eventually(() => content(installed).plugins[0].type === 'eni-ipam-cni', 15_000);
      expect(content(installed)).toEqual(content(exclusive));
      await setMode('Shared');
      await eventually(() => content(installed).plugins[0].type === 'ptp', 15_000);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await setMode('Shared');
    }
  }, 60_000);
});
