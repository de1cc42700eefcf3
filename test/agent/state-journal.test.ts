import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { allocate, emptyState, type AgentState } from '../../src/agent/allocator.js';
import { FS_JOURNAL_OPS, StateFile, StateFileError, type JournalOps } from '../../src/agent/state-file.js';
import type { ENIPool } from '../../src/api/types.js';

const IPS = Array.from({ length: 8 }, (_, i) => `10.4.0.${i + 1}`);
const POOL: ENIPool = {
  apiVersion: 'eniipam.io/v1alpha1',
  kind: 'ENIPool',
  metadata: { name: 'n1' },
  spec: { nodeName: 'n1' },
  status: { enis: [{ id: 'eni-a', state: 'InUse', vSwitchCIDR: '10.4.0.0/24', gatewayIP: '10.4.0.253', ips: IPS }] },
};

/** The state after one more pod, cN/eth0. */
function plus(state: AgentState, n: number): AgentState {
  const r = allocate(state, POOL, { containerId: `c${n}`, ifName: 'eth0', pod: `d/p${n}` }, n);
  if ('error' in r) throw new Error('no lease');
  return r.state;
}

const containers = (s: AgentState) =>
  Object.values(s.allocations)
    .map((a) => a.containerId)
    .sort();

const eio = () => Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });

/** File operations whose next fdatasyncs fail, and whose next writes are cut short. */
function faultyDisk() {
  const disk = { failSync: 0, shortWrite: 0 };
  const ops: Partial<JournalOps> = {
    write: async (fd, data) => {
      if (disk.shortWrite && disk.shortWrite--) return FS_JOURNAL_OPS.write(fd, data.subarray(0, data.length >> 1));
      return FS_JOURNAL_OPS.write(fd, data);
    },
    fdatasync: async (fd) => {
      if (disk.failSync && disk.failSync--) throw eio();
      return FS_JOURNAL_OPS.fdatasync(fd);
    },
    // Synchronous writes are retried until whole: half a line, then a full disk.
    writeSync: (fd, data, offset, length) => {
      if (disk.shortWrite && offset > 0) {
        disk.shortWrite--;
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      }
      return FS_JOURNAL_OPS.writeSync(fd, data, offset, disk.shortWrite ? length >> 1 : length);
    },
    fdatasyncSync: (fd) => {
      if (disk.failSync && disk.failSync--) throw eio();
      FS_JOURNAL_OPS.fdatasyncSync(fd);
    },
  };
  return { disk, ops };
}

describe('the agent state journal after a failed fdatasync', () => {
  it('keeps every acknowledged change and claims none that failed, through later saves and a short write', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'journal-'));
    const { disk, ops } = faultyDisk();
    const f = StateFile.in(dir, ops);
    let state = plus(emptyState(), 1);
    await f.saveAsync(state); // acknowledged: c1
    state = plus(state, 2);
    disk.failSync = 1;
    await expect(f.saveAsync(state)).rejects.toThrow(
      `could not save the agent state to ${f.journalPath}: EIO: i/o error, fdatasync; the change is not saved`,
    );
    // A crash now: the line whose fdatasync failed is not taken for saved.
    expect(containers(StateFile.in(dir).load())).toEqual(['c1']);
    // The agent keeps working: the next save (c1, c2, c3) is acknowledged.
    state = plus(state, 3);
    await f.saveAsync(state);
    expect(containers(StateFile.in(dir).load())).toEqual(['c1', 'c2', 'c3']);
    // A later write cut short must not take the acknowledged line with it.
    disk.shortWrite = 1;
    await expect(f.saveAsync(plus(state, 4))).rejects.toThrow(StateFileError);
    f.close();
    const lines = readFileSync(f.journalPath, 'utf8').split('\n');
    expect(lines.at(-1)).toBe(''); // no torn line left behind
    expect(containers(StateFile.in(dir).load())).toEqual(['c1', 'c2', 'c3']);
  });

  it('does the same for the synchronous save', () => {
    const dir = mkdtempSync(join(tmpdir(), 'journal-sync-'));
    const { disk, ops } = faultyDisk();
    const f = StateFile.in(dir, ops);
    let state = plus(emptyState(), 1);
    f.save(state);
    state = plus(state, 2);
    disk.failSync = 1;
    expect(() => f.save(state)).toThrow(/EIO: i\/o error, fdatasync; the change is not saved/);
    expect(containers(StateFile.in(dir).load())).toEqual(['c1']);
    state = plus(state, 3);
    f.save(state);
    disk.shortWrite = 1;
    expect(() => f.save(plus(state, 4))).toThrow(StateFileError);
    f.close();
    expect(containers(StateFile.in(dir).load())).toEqual(['c1', 'c2', 'c3']);
  });

  it('starts afresh from a snapshot when the failed line cannot even be cut away', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'journal-broken-'));
    const { disk, ops } = faultyDisk();
    let refuseTruncate = false;
    const f = StateFile.in(dir, {
      ...ops,
      ftruncate: async (fd, length) => {
        if (refuseTruncate) throw eio();
        return FS_JOURNAL_OPS.ftruncate(fd, length);
      },
    });
    let state = plus(emptyState(), 1);
    await f.saveAsync(state);
    disk.failSync = 1;
    refuseTruncate = true;
    state = plus(state, 2);
    await expect(f.saveAsync(state)).rejects.toThrow(StateFileError);
    refuseTruncate = false;
    state = plus(state, 3);
    await f.saveAsync(state);
    // The whole state went into a new snapshot; the doubtful journal was emptied.
    expect(readFileSync(f.journalPath, 'utf8')).toBe('');
    expect(containers(JSON.parse(readFileSync(f.path, 'utf8')) as AgentState)).toEqual(['c1', 'c2', 'c3']);
    await f.saveAsync(plus(state, 4));
    f.close();
    expect(containers(StateFile.in(dir).load())).toEqual(['c1', 'c2', 'c3', 'c4']);
  });
});
