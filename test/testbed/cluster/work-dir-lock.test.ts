import { describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkDirInUse, lockWorkDir } from '../../../testbed/cluster/work-dir-lock.js';

describe('the local cluster’s work directory lock', () => {
  it('refuses a directory a live cluster holds, takes over one whose process is gone, and is released', () => {
    const dir = mkdtempSync(join(tmpdir(), 'lock-'));
    const lock = join(dir, 'cluster.lock');
    // A live holder (this test's parent process stands in for another cluster).
    writeFileSync(lock, `${process.ppid} 2026-12-01T10:00:00.000Z\n`);
    expect(() => lockWorkDir(dir)).toThrow(WorkDirInUse);
    expect(() => lockWorkDir(dir)).toThrow(`(pid ${process.ppid}, since 2026-12-01T10:00:00.000Z)`);
    // A holder that was killed: a process that has exited.
    const gone = spawnSync('true').pid!;
    writeFileSync(lock, `${gone} 2026-12-01T10:00:00.000Z\n`);
    const release = lockWorkDir(dir);
    expect(readFileSync(lock, 'utf8').split(' ')[0]).toBe(String(process.pid));
    release();
    expect(existsSync(lock)).toBe(false);
  });
});
