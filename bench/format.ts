import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository: the nearest folder up with a package.json (from bench/ or from its build in dist-*). */
function root(from = fileURLToPath(new URL('.', import.meta.url))): string {
  return existsSync(join(from, 'package.json')) || dirname(from) === from ? from : root(dirname(from));
}
const ROOT = root();

/**
 * Runs the project's formatter over files a benchmark or the fault suite just wrote, so that the
 * results in the repository stay as `npm run format` leaves them.
 */
export function formatFiles(paths: string[]): void {
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'prettier', 'bin', 'prettier.cjs'), '--write', ...paths], {
    cwd: ROOT,
    stdio: 'ignore',
  });
}
