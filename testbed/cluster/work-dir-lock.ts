import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** The work directory is another running cluster's: its kubeconfig and CA must not be touched. */
export class WorkDirInUse extends Error {}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * Takes the work directory for this process: `cluster.lock` holds the PID of the cluster that
 * uses it. A live holder is refused (WorkDirInUse, before anything is written there); a lock
 * whose process is gone (a cluster killed with SIGKILL) is taken over. Answers the release.
 */
export function lockWorkDir(dir: string, holder = 'cluster'): () => void {
  const path = join(dir, 'cluster.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx', 0o644);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const [pid, since] = readFileSync(path, 'utf8').trim().split(' ');
      if (pid && alive(Number(pid)) && Number(pid) !== process.pid)
        throw new WorkDirInUse(
          `the work directory ${dir} is in use by a running ${holder} (pid ${pid}, since ${since ?? '?'}); ` +
            'stop it, or pass another --work-dir',
        );
      rmSync(path, { force: true }); // its process is gone
      continue;
    }
    writeSync(fd, `${process.pid} ${new Date().toISOString()}\n`);
    closeSync(fd);
    return () => {
      const holder = readFileSync(path, 'utf8').split(' ')[0];
      if (holder === String(process.pid)) rmSync(path, { force: true });
    };
  }
  throw new WorkDirInUse(`cannot take ${path}: another cluster took it at the same moment`);
}
