import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { StateDirLockedError, StateLock, type LockHolder } from '../../src/agent/state-lock.js';

const holder = (pid: number, pod?: string): LockHolder => ({
  node: 'node-1',
  socket: '/run/eni-ipam/agent.sock',
  host: 'node-1',
  pid,
  since: '2026-01-01T00:00:00.000Z',
  ...(pod ? { pod } : {}),
});

describe('the state directory lock', () => {
  it('is held by one agent at a time; the next one is told who holds it, and gets it once released', async () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'lock-')), 'state');
    const first = await StateLock.take(dir, holder(101, 'kube-system/eni-ipam-agent-x7k2p'));
    const t0 = Date.now();
    const second = await StateLock.take(dir, holder(202), { waitMs: 300 }).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250); // it waited for a holder on its way out
    expect(second).toBeInstanceOf(StateDirLockedError);
    expect((second as Error).message).toBe(
      `the state directory ${dir} is in use by another eni-ipam agent (pod kube-system/eni-ipam-agent-x7k2p, ` +
        'pid 101 on node-1, serving /run/eni-ipam/agent.sock since 2026-01-01T00:00:00.000Z); one agent runs per node: ' +
        'stop that one first (a DaemonSet update must not surge: maxSurge 0), or give this one its own --state-dir and --socket',
    );
    // Another program asking the kernel sees the same lock (flock(2) on the file).
    expect(spawnSync('flock', ['--nonblock', join(dir, 'agent.lock'), 'true']).status).toBe(1);
    await first.release();
    const third = await StateLock.take(dir, holder(303));
    expect(spawnSync('flock', ['--nonblock', join(dir, 'agent.lock'), 'true']).status).toBe(1);
    await third.release();
    expect(spawnSync('flock', ['--nonblock', join(dir, 'agent.lock'), 'true']).status).toBe(0);
  });

  it('waits for a holder that lets go within the wait', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lock-wait-'));
    const first = await StateLock.take(dir, holder(1));
    setTimeout(() => void first.release(), 200);
    const second = await StateLock.take(dir, holder(2), { waitMs: 3000 });
    await second.release();
  });

  it('calls back when its holder process is killed behind its back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lock-lost-'));
    const lock = await StateLock.take(dir, holder(1));
    const lost = new Promise<void>((resolve) => lock.onLost(resolve));
    // Whoever kills the process holding the descriptor frees the lock.
    process.kill(lock.holderPid!, 'SIGKILL');
    await lost;
    const next = await StateLock.take(dir, holder(2));
    await next.release();
  });
});
