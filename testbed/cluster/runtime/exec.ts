import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { basename } from 'node:path';
import type { ExecRequest, ExecSession, ExecStreams, TerminalSize } from '../../kube/pods/pod-exec.js';
import { setprivArgv, type ContainerSpec } from './container.js';

/** A running container to run commands in: its process, and how it was started (user, env...). */
export interface ExecTarget {
  pid: number;
  spec: ContainerSpec;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

const argvOf = (pid: number): string[] | undefined => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
  } catch {
    return undefined;
  }
};

/** Whether the container's process is still one of the steps that build its root (see containerScript). */
function settingUp(pid: number): boolean {
  const argv = argvOf(pid);
  if (!argv) return false;
  const [first = '', second, third] = argv;
  const name = basename(first);
  if (['nsenter', 'unshare', 'chroot', 'setpriv'].includes(name)) return true;
  if (name === 'env' && second === '-C') return true;
  return first === '/bin/sh' && second === '-c' && (third ?? '').startsWith('set -e\nmount -t tmpfs');
}

/** Waits until the container's own process runs (in its root), so a command enters the container and not its builder. */
export async function whenStarted(pid: number, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (settingUp(pid) && Date.now() < until) await sleep(20);
}

/** nsenter's arguments that enter the container's mount, UTS and network namespaces, root and cwd. */
const enter = (pid: number) => ['-t', String(pid), '-m', '-u', '-n', '-r', '-w', '--'];

/** nsenter's arguments for `argv` in the container, as its user. */
export function inContainer(t: ExecTarget, argv: string[]): string[] {
  return [...enter(t.pid), ...setprivArgv(t.spec), ...argv];
}

/** A command running in a container (what `kubectl exec` starts). */
export interface ContainerExec {
  child: ChildProcess;
  /** Sets the terminal's size (with a TTY; later calls win). */
  resize(size: TerminalSize): void;
}

/** The process holding the terminal that `script` made: its child. */
function childOf(pid: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The fields after the command's name (which may hold spaces): state, then the parent's pid.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/**
 * Starts `argv` in a running container with its environment, user and capabilities, as the
 * container runtime's exec does. With `tty`, the command gets a terminal of its own (made by
 * util-linux `script`, whose exit code is the command's) with TERM=xterm, and `resize` sets its
 * size as the runtime does on a resize event.
 */
export function startExec(
  t: ExecTarget,
  argv: string[],
  o: { tty: boolean; stdin: boolean; size?: TerminalSize },
): ContainerExec {
  // The terminal has its first size before the command starts (a program reads it once, at start).
  const sized = o.size ? `stty rows ${o.size.height} cols ${o.size.width} 2>/dev/null; ` : '';
  const inside = `${sized}exec ${[...setprivArgv(t.spec), ...argv].map(q).join(' ')}`;
  const command = o.tty
    ? [...enter(t.pid), 'script', '--quiet', '--return', '--echo', 'always', '--command', inside, '/dev/null']
    : inContainer(t, argv);
  const child = spawn('nsenter', command, {
    env: { ...t.spec.env, ...(o.tty ? { TERM: 'xterm', SHELL: '/bin/sh' } : {}) },
    stdio: [o.stdin || o.tty ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  let wanted: TerminalSize | undefined;
  let applying = false;
  // The terminal exists once `script` has started its child: the size is set on that child's stdin.
  const apply = async () => {
    if (applying) return;
    applying = true;
    for (let tries = 0; wanted && tries < 100 && child.exitCode === null; tries++) {
      const holder = child.pid ? childOf(child.pid) : undefined;
      if (holder) {
        const size = wanted;
        const ok = await new Promise<boolean>((resolve) =>
          execFile(
            'stty',
            ['-F', `/proc/${holder}/fd/0`, 'rows', String(size.height), 'cols', String(size.width)],
            (err) => resolve(!err),
          ),
        );
        if (ok && wanted === size) wanted = undefined;
        if (ok) continue;
      }
      await sleep(20);
    }
    applying = false;
  };
  return {
    child,
    resize(size) {
      if (!o.tty) return;
      wanted = size;
      void apply();
    },
  };
}

/** Runs a command in a container to completion (an exec probe): its exit code and output, or a timeout. */
export async function runInContainer(
  t: ExecTarget,
  argv: string[],
  timeoutMs: number,
): Promise<{ code: number; output: string; timedOut: boolean }> {
  await whenStarted(t.pid, timeoutMs);
  return new Promise((resolve) => {
    execFile('nsenter', inContainer(t, argv), { env: t.spec.env, timeout: timeoutMs }, (err, stdout, stderr) => {
      const e = err as (Error & { code?: unknown; killed?: boolean }) | null;
      resolve({
        code: e ? (typeof e.code === 'number' ? e.code : 1) : 0,
        output: `${stdout}${stderr}`,
        timedOut: Boolean(e?.killed),
      });
    });
  });
}

/** The first terminal size the client sends, if it sends one within `timeoutMs`. */
function firstSize(streams: ExecStreams, timeoutMs: number): Promise<TerminalSize | undefined> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (size?: TerminalSize) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(size);
    };
    const timer = setTimeout(finish, timeoutMs);
    streams.onResize(finish);
    streams.signal.addEventListener('abort', () => finish(), { once: true });
  });
}

/**
 * `kubectl exec` in a running container: the command started with the request's streams
 * (stdin piped in until the client closes it, stdout and stderr out, terminal sizes applied),
 * killed if the client goes away; resolves with its exit code once its output has all been read.
 * `running` holds it while it runs (the kubelet ends it with the container).
 */
export function execSession(t: ExecTarget, request: ExecRequest, running: Set<ChildProcess>): ExecSession {
  return async (streams: ExecStreams) => {
    await whenStarted(t.pid);
    // A client with a terminal sends its size first thing; the command starts with it.
    const size = request.tty ? await firstSize(streams, 1000) : undefined;
    const x = startExec(t, request.command, { tty: request.tty, stdin: Boolean(streams.stdin), size });
    running.add(x.child);
    const exited = new Promise<number>((resolve, reject) => {
      x.child.on('error', reject);
      x.child.on('close', (code, signal) => {
        running.delete(x.child);
        resolve(code ?? 128 + (signal ? (osConstants.signals[signal] ?? 9) : 9));
      });
    });
    x.child.stdin?.on('error', () => undefined); // a command that reads nothing may exit first
    if (streams.stdin && x.child.stdin) streams.stdin.pipe(x.child.stdin);
    x.child.stdout!.on('data', (d: Buffer) => streams.stdout?.(d));
    // Without a terminal, stderr goes only where asked; with one, what `script` itself says goes out too.
    x.child.stderr!.on('data', (d: Buffer) => (streams.stderr ?? (request.tty ? streams.stdout : undefined))?.(d));
    streams.onResize((size) => x.resize(size));
    // The client gone (before or after the start): the command goes too.
    if (streams.signal.aborted) x.child.kill('SIGKILL');
    else streams.signal.addEventListener('abort', () => x.child.kill('SIGKILL'), { once: true });
    return exited;
  };
}
