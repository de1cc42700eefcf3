import {
  closeSync,
  fdatasync,
  fdatasyncSync,
  fstatSync,
  fsync,
  fsyncSync,
  ftruncate,
  ftruncateSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  write,
  writeSync,
} from 'node:fs';
import fsp from 'node:fs/promises';
import { promisify } from 'node:util';
import { dirname, join } from 'node:path';
import { emptyState, type AgentState } from './allocator.js';

export class StateFileError extends Error {}

/**
 * The journal's file operations, passable so that tests can make one fail (a disk that loses a
 * write or an fdatasync). Defaults: node:fs.
 */
export interface JournalOps {
  /** Appends (the journal is opened O_APPEND); answers the bytes taken. */
  write(fd: number, data: Buffer): Promise<number>;
  fdatasync(fd: number): Promise<void>;
  ftruncate(fd: number, length: number): Promise<void>;
  writeSync(fd: number, data: Buffer, offset: number, length: number): number;
  fdatasyncSync(fd: number): void;
  ftruncateSync(fd: number, length: number): void;
}

export const FS_JOURNAL_OPS: JournalOps = {
  write: async (fd, data) => (await promisify(write)(fd, data, 0, data.length, null)).bytesWritten,
  fdatasync: promisify(fdatasync),
  ftruncate: promisify(ftruncate),
  writeSync: (fd, data, offset, length) => writeSync(fd, data, offset, length),
  fdatasyncSync,
  ftruncateSync,
};

// The journal is folded into the snapshot once it grows past this, and holds at least this many
// lines: each line is the whole state, so a large state would otherwise compact (three fsyncs)
// every few saves.
const COMPACT_BYTES = 256 * 1024;
const COMPACT_LINES = 16;

/**
 * The agent's allocations on disk, crash-safe and quick: every change appends the whole new
 * state as one line to a journal and syncs it (one fdatasync, no rename, so an allocation is
 * answered in about a millisecond); now and then the journal is folded into a snapshot
 * written the slow, atomic way (temporary file, fsync, rename, folder fsync). A crash leaves
 * the last complete line or the snapshot; a torn last line is a change that was never answered.
 */
export class StateFile {
  private fd?: number;
  /**
   * Bytes of the journal that hold complete, synced lines: where the next line goes. Lines past
   * it (one whose write or fdatasync failed) are cut away before anything else is appended.
   */
  private size = 0;
  /** The journal's end is unknown (a failed write could not be cut away): the next save starts afresh. */
  private broken = false;
  private readonly ops: JournalOps;

  constructor(
    readonly path: string,
    ops: Partial<JournalOps> = {},
  ) {
    this.ops = { ...FS_JOURNAL_OPS, ...ops };
  }

  static in(dir: string, ops: Partial<JournalOps> = {}): StateFile {
    return new StateFile(join(dir, 'allocations.json'), ops);
  }

  get journalPath(): string {
    return this.path.replace(/\.json$/, '') + '.journal';
  }

  load(): AgentState {
    let state = this.parse(this.read(this.path)?.toString('utf8'), this.path) ?? emptyState();
    // Complete lines end with a newline; what follows the last one is a write a crash cut short.
    const lines = (this.read(this.journalPath)?.toString('utf8') ?? '').split('\n').slice(0, -1);
    for (const line of lines) state = this.parse(line, this.journalPath)!;
    return state;
  }

  private read(path: string): Buffer | undefined {
    try {
      return readFileSync(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new StateFileError(`cannot read the agent state ${path}: ${(e as Error).message}`);
    }
  }

  private parse(text: string | undefined, path: string): AgentState | undefined {
    if (text === undefined) return undefined;
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      throw new StateFileError(
        `the agent state ${path} is not valid JSON; it was not written by this agent or was damaged outside it`,
      );
    }
    const s = data as Partial<AgentState>;
    if (!s || typeof s !== 'object' || typeof s.allocations !== 'object' || typeof s.cooling !== 'object') {
      throw new StateFileError(`the agent state ${path} lacks allocations or cooling`);
    }
    return { allocations: s.allocations ?? {}, cooling: s.cooling ?? {} };
  }

  /**
   * Appends the state as one line and syncs it; answers only once it is durable. A line whose
   * write or fdatasync failed is cut away again (after a failed fdatasync nobody knows what of it
   * reached the disk: it must not be taken for saved, nor have later lines glued behind it), and
   * the caller gets the error: the change is not saved, though the next save carries it.
   */
  save(state: AgentState): void {
    const fd = this.open();
    if (this.broken) {
      // The journal's end is unknown: the whole state as a new snapshot (a new file, none of the
      // doubtful bytes), then an empty journal; until both are done, nothing is answered as saved.
      this.compact(state);
      this.broken = false;
      return;
    }
    const line = Buffer.from(`${JSON.stringify(state)}\n`);
    const start = this.size;
    try {
      writeFully(fd, line, this.journalPath, this.ops.writeSync);
      this.ops.fdatasyncSync(fd);
    } catch (e) {
      try {
        this.ops.ftruncateSync(fd, start);
      } catch {
        this.broken = true;
      }
      throw this.failed(e);
    }
    this.size = start + line.length;
    if (this.size > Math.max(COMPACT_BYTES, COMPACT_LINES * line.length)) this.compact(state);
  }

  /**
   * As save, with the write and its fdatasync on libuv's thread pool: the event loop keeps
   * serving meanwhile. One at a time: the caller waits for one before starting the next.
   */
  async saveAsync(state: AgentState): Promise<void> {
    const fd = this.open();
    if (this.broken) {
      // As in save: start afresh from a snapshot.
      await this.compactAsync(state);
      this.broken = false;
      return;
    }
    const line = Buffer.from(`${JSON.stringify(state)}\n`);
    const start = this.size;
    try {
      const taken = await this.ops.write(fd, line);
      if (taken !== line.length)
        throw new StateFileError(
          `the agent state journal ${this.journalPath} took ${taken} of ${line.length} bytes (is the disk full?)`,
        );
      await this.ops.fdatasync(fd);
    } catch (e) {
      await this.ops.ftruncate(fd, start).catch(() => (this.broken = true));
      throw this.failed(e);
    }
    this.size = start + line.length;
    if (this.size > Math.max(COMPACT_BYTES, COMPACT_LINES * line.length)) await this.compactAsync(state);
  }

  private failed(e: unknown): StateFileError {
    if (e instanceof StateFileError) return e;
    return new StateFileError(
      `could not save the agent state to ${this.journalPath}: ${(e as Error).message}; the change is not saved`,
    );
  }

  private open(): number {
    if (this.fd === undefined) {
      mkdirSync(dirname(this.path), { recursive: true });
      const complete = (this.read(this.journalPath)?.lastIndexOf(0x0a) ?? -1) + 1;
      this.fd = openSync(this.journalPath, 'a', 0o600);
      // Cut a torn last write away, or the next line would be glued to it.
      if (fstatSync(this.fd).size > complete) ftruncateSync(this.fd, complete);
      this.size = complete;
      syncFolder(dirname(this.path)); // the journal's own entry, once
    }
    return this.fd;
  }

  private compact(state: AgentState): void {
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeFully(fd, Buffer.from(JSON.stringify(state)), tmp);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    syncFolder(dirname(this.path));
    // A crash before this line leaves a journal whose last line is the snapshot: the same state.
    ftruncateSync(this.fd!, 0);
    this.size = 0;
    fsyncSync(this.fd!);
  }

  /** As compact, each step off the event loop (a slow disk's fsyncs would otherwise stall it). */
  private async compactAsync(state: AgentState): Promise<void> {
    const tmp = `${this.path}.tmp`;
    const file = await fsp.open(tmp, 'w', 0o600);
    try {
      await file.writeFile(JSON.stringify(state));
      await file.sync();
    } finally {
      await file.close();
    }
    await fsp.rename(tmp, this.path);
    const folder = await fsp.open(dirname(this.path), 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
    // A crash before this line leaves a journal whose last line is the snapshot: the same state.
    await promisify(ftruncate)(this.fd!, 0);
    this.size = 0;
    await promisify(fsync)(this.fd!);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

function syncFolder(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes all of `data`: a write may take fewer bytes than asked (a full disk, a signal), and a
 * change half on disk must not be answered as saved.
 */
export function writeFully(
  fd: number,
  data: Buffer,
  path: string,
  write: (fd: number, data: Buffer, offset: number, length: number) => number = writeSync,
): void {
  let done = 0;
  while (done < data.length) {
    const n = write(fd, data, done, data.length - done);
    if (n <= 0)
      throw new StateFileError(
        `the agent state ${path} took ${done} of ${data.length} bytes and no more; is the disk full?`,
      );
    done += n;
  }
}
