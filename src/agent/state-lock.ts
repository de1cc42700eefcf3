import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** Who holds a state directory, as the holder wrote it beside its lock. */
export interface LockHolder {
  node: string;
  socket: string;
  /** The holder's pod (`namespace/name`), when it runs in one (POD_NAME). */
  pod?: string;
  host: string;
  /** In the holder's own PID namespace: meaningful only on the same host and namespace. */
  pid: number;
  since: string;
}

/** Another agent holds the state directory. */
export class StateDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly holder: LockHolder | undefined,
  ) {
    const who = holder
      ? `${holder.pod ? `pod ${holder.pod}, ` : ''}pid ${holder.pid} on ${holder.host}, serving ${holder.socket} since ${holder.since}`
      : 'it has not said who it is yet';
    super(
      `the state directory ${dir} is in use by another eni-ipam agent (${who}); one agent runs per node: ` +
        'stop that one first (a DaemonSet update must not surge: maxSurge 0), or give this one its own --state-dir and --socket',
    );
  }
}

export const LOCK_FILE = 'agent.lock';
/** flock(1) exits with this when the lock is held and the wait is over. */
const CONFLICT = 75;

/**
 * The lock of a state directory, held while the agent runs: flock(2) on `agent.lock`, taken by
 * util-linux's flock(1) in a child process that holds it while its stdin (a pipe from this
 * process) is open. The kernel ties the lock to the file, not to a PID, so it holds across PID
 * namespaces (two pods on one node share the hostPath, not their PIDs), and it frees the lock
 * the moment the holder is gone: a SIGKILLed agent's pipe closes, its child exits, and the next
 * agent starts at once; no lease, no mtime to wait out.
 */
export class StateLock {
  private released = false;

  private constructor(
    readonly path: string,
    private readonly child: ChildProcess,
  ) {}

  /**
   * Takes the lock of `dir`, waiting up to `waitMs` for a holder that is on its way out; throws
   * StateDirLockedError, naming the holder, when another agent keeps it.
   */
  static async take(dir: string, me: LockHolder, o: { waitMs?: number } = {}): Promise<StateLock> {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, LOCK_FILE);
    const wait = Math.max(0, (o.waitMs ?? 2000) / 1000);
    // --no-fork: the shell (then cat) holds the lock's descriptor itself; it says "locked" once held.
    const args = ['--exclusive', '--wait', String(wait), '--conflict-exit-code', String(CONFLICT), '--no-fork', path];
    const child = spawn('flock', [...args, 'sh', '-c', 'echo locked && exec cat >/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = once(child, 'exit').then(([code]) => code as number | null);
    const spawned = once(child, 'spawn').then(
      () => undefined,
      (e: NodeJS.ErrnoException) => e,
    );
    child.on('error', () => undefined); // after the spawn: a kill that failed; the exit says the rest
    const failure = await spawned;
    if (failure)
      throw new Error(
        `cannot lock the state directory ${dir}: ` +
          (failure.code === 'ENOENT' ? 'flock(1) of util-linux is not installed' : failure.message),
      );
    const locked = new Promise<'locked'>((resolve) =>
      createInterface({ input: child.stdout! }).once('line', (l) => l === 'locked' && resolve('locked')),
    );
    const outcome = await Promise.race([locked, exited]);
    if (outcome !== 'locked') {
      if (outcome === CONFLICT) throw new StateDirLockedError(dir, readHolder(path));
      throw new Error(`cannot lock the state directory ${dir}: flock exited with ${outcome}: ${stderr.trim()}`);
    }
    // It must not keep this process alive, nor be what keeps it from exiting.
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?(): void }).unref?.();
    writeFileSync(path, `${JSON.stringify(me)}\n`, { mode: 0o600 });
    return new StateLock(path, child);
  }

  /** The process that holds the lock's descriptor (flock's child). */
  get holderPid(): number | undefined {
    return this.child.pid;
  }

  /** Calls back when the lock is lost without release() (someone killed its holder process). */
  onLost(callback: () => void): void {
    this.child.once('exit', () => {
      if (!this.released) callback();
    });
  }

  /** Frees the lock; resolves once it is free. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const gone = once(this.child, 'exit');
    this.child.ref(); // unreferenced while held: waiting for its exit must keep this process up
    this.child.stdin!.end();
    await gone;
  }
}

/** What the holder wrote beside its lock; undefined while it has not yet (or wrote something else). */
function readHolder(path: string): LockHolder | undefined {
  try {
    const h = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockHolder>;
    return typeof h.pid === 'number' && typeof h.host === 'string' ? (h as LockHolder) : undefined;
  } catch {
    return undefined;
  }
}
