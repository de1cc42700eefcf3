import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { emptyState, type AgentState } from './allocator.js';

export class StateFileError extends Error {}

/**
 * The agent's allocations on disk, crash-safe: written to a temporary file, fsynced, renamed
 * over the old one (atomic on POSIX), and the folder fsynced, so that a crash leaves either
 * the old state or the new one, never a torn file.
 */
export class StateFile {
  constructor(readonly path: string) {}

  static in(dir: string): StateFile {
    return new StateFile(join(dir, 'allocations.json'));
  }

  load(): AgentState {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return emptyState();
      throw new StateFileError(`cannot read the agent state ${this.path}: ${(e as Error).message}`);
    }
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      throw new StateFileError(`the agent state ${this.path} is not valid JSON; it was not written by this agent or was damaged outside it`);
    }
    const s = data as Partial<AgentState>;
    if (!s || typeof s !== 'object' || typeof s.allocations !== 'object' || typeof s.cooling !== 'object') {
      throw new StateFileError(`the agent state ${this.path} lacks allocations or cooling`);
    }
    return { allocations: s.allocations ?? {}, cooling: s.cooling ?? {} };
  }

  save(state: AgentState): void {
    mkdirSync(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, JSON.stringify(state));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
    const dir = openSync(dirname(this.path), 'r');
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  }
}
