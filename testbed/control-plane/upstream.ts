import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, openSync, readFileSync, closeSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { CHECKOUT } from '../checkout.js';

/**
 * The upstream programs the testbed runs (built by `npm run tools` into .tools/), started as
 * child processes whose output goes to a log file each, and stopped with them.
 */

/** The Kubernetes release scripts/build-upstream.sh builds (its K8S pin). */
export const KUBERNETES_VERSION = 'v1.33.13';

export type UpstreamProgram =
  'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler' | 'kube-proxy' | 'coredns';

/** Where a program is, or an error saying how to build it. */
export function upstreamBinary(name: UpstreamProgram): string {
  const path = join(CHECKOUT, '.tools', name);
  if (!existsSync(path))
    throw new Error(
      `${name} is not built: run \`npm run tools\` (it builds the upstream programs into .tools/ with Go)`,
    );
  return path;
}

/**
 * Builds the programs that are not built yet (scripts/build-upstream.sh, minutes the first
 * time, its progress on stderr); throws with the script's last words when it cannot.
 */
export function ensureUpstream(names: UpstreamProgram[]): void {
  const missing = names.filter((n) => !existsSync(join(CHECKOUT, '.tools', n)));
  if (!missing.length) return;
  process.stderr.write(`building the upstream control plane (${missing.join(', ')}), once: this takes minutes\n`);
  const r = spawnSync('bash', [join(CHECKOUT, 'scripts', 'build-upstream.sh'), ...missing], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0)
    throw new Error(`cannot build ${missing.join(', ')}: scripts/build-upstream.sh failed (see above)`);
}

/** A free TCP port on `host` (asked of the kernel, then let go: the program binds it next). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const s = createServer();
  s.listen(0, host);
  await once(s, 'listening');
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

export interface RunningProgram {
  name: string;
  child: ChildProcess;
  logPath: string;
  /** The last lines of its log, for an error message. */
  tail(lines?: number): string;
  /** Resolves when it exited (at once if it has). */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Starts `name` with `args`, its output appended to `<logDir>/<logName>.log`. */
export function runUpstream(
  name: UpstreamProgram,
  args: string[],
  o: { logDir: string; logName?: string; env?: NodeJS.ProcessEnv; cwd?: string; netns?: string },
): RunningProgram {
  const logPath = join(o.logDir, `${o.logName ?? name}.log`);
  const fd = openSync(logPath, 'a');
  // In a network namespace (a node's), through `ip netns exec`, which also gives it that namespace's /etc/netns files.
  const [cmd, argv] = o.netns
    ? ['ip', ['netns', 'exec', o.netns, upstreamBinary(name), ...args]]
    : [upstreamBinary(name), args];
  const child = spawn(cmd, argv, {
    stdio: ['ignore', fd, fd],
    env: { ...process.env, ...o.env },
    cwd: o.cwd,
  });
  closeSync(fd);
  let code: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (c, signal) => {
      code = c ?? (signal ? null : 0);
      resolve(code);
    });
    child.on('error', () => resolve((code = -1)));
  });
  const tail = (n = 15) => {
    try {
      return readFileSync(logPath, 'utf8').trimEnd().split('\n').slice(-n).join('\n');
    } catch {
      return '';
    }
  };
  const stop = async () => {
    if (code !== undefined) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  return { name: o.logName ?? name, child, logPath, tail, exited, stop };
}

/**
 * Waits until `ready()` answers true, polling every 100 ms; the program's exit, or `timeoutMs`
 * without it, is an error that quotes the end of its log.
 */
export async function untilReady(p: RunningProgram, ready: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exitCode: number | null | undefined;
  void p.exited.then((c) => (exitCode = c));
  for (;;) {
    if (exitCode !== undefined)
      throw new Error(
        `${p.name} exited with ${exitCode} before it was ready; its log (${p.logPath}) ends:\n${p.tail()}`,
      );
    if (await ready().catch(() => false)) return;
    if (Date.now() > deadline)
      throw new Error(
        `${p.name} was not ready within ${timeoutMs / 1000} s; its log (${p.logPath}) ends:\n${p.tail()}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}
