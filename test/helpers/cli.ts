import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

/** The committed launcher; `npm test` builds dist/ before Jest runs. */
export const BIN = fileURLToPath(new URL('../../bin/eni-ipam', import.meta.url));

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

export async function runCli(args: string[], timeoutMs = 20_000): Promise<Finished> {
  const child = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code] = await once(child, 'exit');
  clearTimeout(timer);
  return { code: code as number | null, stdout, stderr };
}

/** Starts a long-running command and waits for its `listening URL` first line. */
export async function startCli(args: string[], timeoutMs = 20_000): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const child = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const lines = createInterface({ input: child.stdout! });
  let timer: NodeJS.Timeout | undefined;
  const first = await Promise.race([
    new Promise<string>((resolve) => lines.once('line', resolve)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no first line within ${timeoutMs} ms; stderr: ${stderr}`)), timeoutMs);
    }),
    once(child, 'exit').then(([code]) => {
      throw new Error(`exited ${code} before listening; stderr: ${stderr}`);
    }),
  ]).finally(() => clearTimeout(timer));
  const m = /^listening (http:\/\/\S+)$/.exec(first);
  if (!m) throw new Error(`unexpected first line: ${first}`);
  return { child, url: m[1]!, stderr: () => stderr };
}
