import { execSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { BIN, runCli } from '../helpers/cli.js';
import { eventually } from '../helpers/ecs.js';

describe('eni-ipam demo', () => {
  it('runs the whole system for a few seconds, prints its progress and summary, and leaves nothing running', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-'));
    const r = await runCli(
      ['demo', '--duration', '8', '--nodes', '6', '--work-dir', dir, '--metrics-addr', '127.0.0.1:0'],
      60_000,
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`try: kubectl --kubeconfig ${join(dir, 'kubeconfig')} get enipools`);
    expect(r.stdout).toMatch(/^nodes ready 6\/6 \| IPs available \d+ used \d+ \| CreateENI \d+/m);
    // The time to all pools Ready against the quota bound of the same world, and the plugin's view of its cluster.
    const timing =
      /^ {2}nodes: 6; all pools Ready after ([\d.]+) s; the quota bound for them: ([\d.]+) s \(([\d.]+)x the bound\)$/m.exec(
        r.stdout,
      );
    expect(timing).not.toBeNull();
    expect(Number(timing![1])).toBeGreaterThanOrEqual(Number(timing![2]));
    expect(r.stdout).toMatch(/^kubectl eni-ipam status, at the end of the run:\n {2}Nodes: +6 \(/m);
    expect(r.stdout).toMatch(/^ {2}ZONE +VSWITCH +FREE IN VSWITCH/m);
    expect(r.stdout.trimEnd().split('\n').slice(-4)).toEqual([
      'look further (while a demo runs, from another terminal):',
      `  kubectl --kubeconfig ${join(dir, 'kubeconfig')} get enipools`,
      expect.stringMatching(
        new RegExp(`^ {2}PATH=\\S+/bin:\\$PATH kubectl eni-ipam status --kubeconfig ${join(dir, 'kubeconfig')}$`),
      ),
      expect.stringMatching(/^ {2}curl -s http:\/\/127\.0\.0\.1:\d+\/metrics \| grep \^eni_ipam_$/),
    ]);
    expect(r.stdout).toMatch(/^ {2}pod IPs handed out: [1-9]\d*; waits on an empty pool: 0$/m);
    const summary = JSON.parse(readFileSync(join(dir, 'summary.json'), 'utf8'));
    expect(summary.calls.CreateNetworkInterface).toBeGreaterThanOrEqual(6);
    // The emulators it printed are gone with it.
    const ecsUrl = /ECS emulator (\S+)/.exec(r.stdout)![1]!;
    await expect(fetch(`${ecsUrl}/_emulator/stats`)).rejects.toThrow();
  }, 90_000);

  it('starts each run from a clean state: a second run in the same directory takes nothing from the first', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-again-'));
    // Long enough for pods to come once the pools are Ready, on a loaded machine too; at a churn
    // whose released addresses (cooling 5 s) stay within what the three pools hold ahead.
    const args = [
      ...['demo', '--duration', '15', '--nodes', '3', '--churn', '2'],
      ...['--work-dir', dir, '--metrics-addr', '127.0.0.1:0'],
    ];
    const first = await runCli(args, 90_000);
    expect(first.code).toBe(0);
    // The first run's agents left their state (allocations of a world that is gone) behind.
    expect(readdirSync(join(dir, 'nodes')).length).toBe(3);
    const second = await runCli(args, 90_000);
    expect(second.code).toBe(0);
    // Its first view line counts no address in use: none of the first run's pods came back.
    expect(second.stdout).toMatch(/^nodes ready \d\/3 \| IPs available \d+ used 0 /m);
    expect(second.stdout).toMatch(/^ {2}pod IPs handed out: [1-9]\d*; waits on an empty pool: 0$/m);
  }, 240_000);

  it('refuses a work directory another running demo holds, with exit 2 and what to do', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-busy-'));
    const child = spawn(BIN, ['demo', '--nodes', '2', '--work-dir', dir, '--metrics-addr', '127.0.0.1:0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    try {
      await eventually(() => /^nodes ready /m.test(out), 40_000);
      const r = await runCli(['demo', '--duration', '2', '--work-dir', dir, '--metrics-addr', '127.0.0.1:0']);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(
          `^eni-ipam demo: the work directory ${dir} is in use by a running demo \\(pid ${child.pid},.*pass another --work-dir\n$`,
        ),
      );
    } finally {
      child.kill('SIGINT');
      await once(child, 'exit');
    }
  }, 90_000);

  it('redraws a live view in place when stdout is a terminal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-tty-'));
    // `script` (util-linux) gives the demo a pseudo-terminal, as a user's shell would.
    const command = `stty cols 100; ${BIN} demo --duration 5 --nodes 3 --work-dir ${dir} --metrics-addr 127.0.0.1:0`;
    const child = spawn('script', ['-qec', command, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    const frames = out.split('\x1b[H\x1b[2J');
    expect(frames.length).toBeGreaterThanOrEqual(3);
    const last = frames.at(-1)!;
    expect(last).toMatch(/nodes ready {2}\[#{40}\] 3\/3/);
    expect(last).toMatch(/CreateNetworkInterface\s+\d+ {2}\[[#.]+\]\s+\d+\/500 per min/);
    expect(last).toContain('last events');
    expect(last).toContain('summary');
  }, 60_000);

  it('stops cleanly on Ctrl-C with its summary', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'demo-int-'));
    const child = spawn(BIN, ['demo', '--nodes', '3', '--work-dir', dir, '--metrics-addr', '127.0.0.1:0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await eventually(() => /^nodes ready 3\/3 /m.test(out), 40_000);
    // The commands it prints once the pools are Ready work, as pasted, while it runs: the plugin sees its cluster.
    const further = await eventually(() => /Look further: (.*)$/m.exec(out)?.[1], 10_000);
    const [, statusCommand] = further.split('  |  ');
    const home = mkdtempSync(join(tmpdir(), 'demo-home-'));
    const seen = execSync(statusCommand!, { shell: '/bin/sh', encoding: 'utf8', env: { ...process.env, HOME: home } });
    expect(seen).toMatch(/^Nodes: +3 \(3 Ready, 0 not Ready\)$/m);
    child.kill('SIGINT');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    expect(out).toMatch(/^ {2}nodes: 3; all pools Ready after [\d.]+ s; the quota bound for them: [\d.]+ s/m);
    const ecsUrl = /ECS emulator (\S+)/.exec(out)![1]!;
    await expect(fetch(`${ecsUrl}/_emulator/stats`)).rejects.toThrow();
  }, 60_000);

  it('refuses a wrong value with exit 2', async () => {
    const r = await runCli(['demo', '--nodes', '0']);
    expect(r).toMatchObject({ code: 2, stderr: 'eni-ipam demo: --nodes must be greater than 0\n' });
  });
});
