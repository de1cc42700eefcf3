import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { existsSync, readdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { parseHostPort } from '../../src/cli/addresses.js';
import { kubeconfigFor } from '../../testbed/kube/auth/kubeconfig.js';
import { runCli } from '../helpers/cli.js';

/** A server that takes every request and never answers: an API server or a cloud that hangs. */
let hanging: Server;
/** A listener that holds a port, as Prometheus holds 9090. */
let holder: Server;
let held: string;
const requests: string[] = [];
let dir: string;
let kubeconfig: string;
let endpoint: string;

const listen = async (server: Server) => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
};

beforeAll(async () => {
  hanging = createServer((req) => requests.push(`${req.method} ${req.url}`));
  endpoint = `http://${await listen(hanging)}`;
  holder = createServer((_, res) => res.end('someone else'));
  held = await listen(holder);
  dir = mkdtempSync(join(tmpdir(), 'addresses-'));
  kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kubeconfigFor(endpoint));
});
afterAll(() => {
  hanging.closeAllConnections();
  hanging.close();
  holder.close();
});

const CREDENTIALS = {
  ...process.env,
  ALIBABA_CLOUD_ACCESS_KEY_ID: 'demo',
  ALIBABA_CLOUD_ACCESS_KEY_SECRET: 'demo-secret',
};
/** Every command that listens, with everything else it needs to get as far as listening. */
const operator = () => [
  ...['operator', '--kubeconfig', kubeconfig, '--region', 'cn-hangzhou', '--vpc-id', 'vpc-demo', '--cluster-id', 'c'],
  ...['--ecs-endpoint', endpoint, '--vpc-endpoint', endpoint, '--metrics-addr', '127.0.0.1:0'],
  ...['--health-addr', '127.0.0.1:0'],
];
const agent = () => [
  ...[
    'agent',
    '--node-routing=false',
    '--node',
    'node-1',
    '--kubeconfig',
    kubeconfig,
    '--state-dir',
    join(dir, 'state'),
  ],
  ...['--socket', join(dir, 'agent.sock'), '--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0'],
];
const COMMANDS: Array<[string, string, () => string[]]> = [
  ['operator', 'metrics-addr', operator],
  ['operator', 'health-addr', operator],
  ['agent', 'metrics-addr', agent],
  ['agent', 'health-addr', agent],
  ['demo', 'metrics-addr', () => ['demo', '--work-dir', join(dir, 'demo')]],
  ['emulate ecs', 'listen', () => ['emulate', 'ecs']],
  ['emulate kube', 'listen', () => ['emulate', 'kube']],
];

describe('HOST:PORT', () => {
  it('is an IPv4 address, a host name or a bracketed IPv6 address, then a port from 0 to 65535', () => {
    expect(parseHostPort('127.0.0.1:9090')).toEqual({ host: '127.0.0.1', port: 9090 });
    expect(parseHostPort('[::]:9090')).toEqual({ host: '::', port: 9090 });
    expect(parseHostPort('[fd00::1]:0')).toEqual({ host: 'fd00::1', port: 0 });
    expect(parseHostPort('metrics.local:65535')).toEqual({ host: 'metrics.local', port: 65535 });
    expect(parseHostPort(':9090')).toEqual({ host: '0.0.0.0', port: 9090 });
    expect(parseHostPort('127.0.0.1')).toEqual({ error: '"127.0.0.1" has no port' });
    expect(parseHostPort('9090')).toEqual({ error: '"9090" has no port' });
    expect(parseHostPort('::1:9090')).toEqual({ error: '"::1:9090" has an IPv6 address without brackets' });
    expect(parseHostPort('[::g]:1')).toEqual({ error: '"[::g]" is not an IPv6 address' });
    expect(parseHostPort('127.0.0.1:65536')).toEqual({ error: 'the port "65536" is not a number from 0 to 65535' });
    expect(parseHostPort('127.0.0.1:-1')).toEqual({ error: 'the port "-1" is not a number from 0 to 65535' });
    expect(parseHostPort('127.0.0.1:')).toEqual({ error: 'the port "" is not a number from 0 to 65535' });
    expect(parseHostPort('300.1.2.3:80')).toEqual({
      error: '"300.1.2.3" is not an IPv4 address, a host name or a bracketed IPv6 address',
    });
    expect(parseHostPort('under_score:80')).toMatchObject({ error: expect.stringContaining('"under_score" is not') });
  });

  it.each(COMMANDS)(
    '%s --%s: a malformed address is one line naming the flag and an example, exit 2',
    async (name, flag, args) => {
      const r = await runCli([...args(), `--${flag}`, '127.0.0.1'], 10_000, CREDENTIALS);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(
          `^eni-ipam ${name}: --${flag} takes HOST:PORT \\(for example [0-9.]+:\\d+ or \\[::1?\\]:\\d+\\): "127.0.0.1" has no port\\n$`,
        ),
      );
      expect(r.stdout).toBe('');
    },
  );
});

describe('an address this host refuses', () => {
  it.each(COMMANDS)(
    '%s --%s: a port another listener holds is one line naming the flag, the address and what to do, exit 2',
    async (name, flag, args) => {
      const before = requests.length;
      const r = await runCli([...args(), `--${flag}`, held], 10_000, CREDENTIALS);
      expect(r).toEqual({
        code: 2,
        stdout: '',
        stderr: `eni-ipam ${name}: --${flag} ${held}: the address is already in use by another listener; pick another port or stop what listens there\n`,
      });
      // Found before anything else started: no call to the API server or the cloud, no state written (an
      // agent takes its state directory's lock first, so that a second agent is told it is the second one).
      expect(requests.slice(before)).toEqual([]);
      const written = existsSync(join(dir, 'state')) ? readdirSync(join(dir, 'state')) : [];
      expect(written.filter((f) => f !== 'agent.lock')).toEqual([]);
    },
  );

  it('a health address that overlaps the metrics address is one line naming both, exit 2', async () => {
    const probe = createServer();
    const port = Number((await listen(probe)).split(':')[1]);
    probe.close();
    await once(probe, 'close');
    const r = await runCli(
      [...operator(), '--metrics-addr', `0.0.0.0:${port}`, '--health-addr', `127.0.0.1:${port}`],
      10_000,
      CREDENTIALS,
    );
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr: `eni-ipam operator: --health-addr 127.0.0.1:${port}: overlaps --metrics-addr 0.0.0.0:${port}; give both the same address to serve them together, or different ports\n`,
    });
  });

  it('an address of no interface of this host is one line, exit 2', async () => {
    // 192.0.2.0/24 is TEST-NET-1: documentation only, never a host's address.
    const r = await runCli([...operator(), '--health-addr', '192.0.2.1:8080'], 10_000, CREDENTIALS);
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'eni-ipam operator: --health-addr 192.0.2.1:8080: no interface of this host has that address; use one of its addresses, or 0.0.0.0 for all of them\n',
    });
  });
});

describe('lease timings', () => {
  it.each([
    [
      ['--leader-elect-lease-duration', '10', '--leader-elect-renew-deadline', '10'],
      '--leader-elect-lease-duration (10) must be longer than --leader-elect-renew-deadline (10)',
    ],
    [
      ['--leader-elect-renew-deadline', '5', '--leader-elect-retry-period', '5'],
      '--leader-elect-renew-deadline (5) must be longer than 1.2 x --leader-elect-retry-period (5), that is more than 6',
    ],
  ])(
    'that do not fit (%j) are one line naming the flags and values, exit 2, while the API server hangs',
    async (timings, message) => {
      const r = await runCli([...operator(), ...timings], 10_000, CREDENTIALS);
      expect(r).toEqual({ code: 2, stdout: '', stderr: `eni-ipam operator: ${message}\n` });
    },
  );

  it('are not checked without leader election', async () => {
    const r = await runCli(
      [...operator(), '--no-leader-elect', '--leader-elect-retry-period', '30', '--metrics-addr', held],
      10_000,
      CREDENTIALS,
    );
    // It got as far as listening: the timings were not in the way.
    expect(r.stderr).toMatch(/--metrics-addr .*already in use/);
  });
});
