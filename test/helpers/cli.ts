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

/**
 * Starts a long-running command and waits for the line that says where it serves: by default
 * the emulators' `listening URL` first line; `until` picks another (the operator's and the
 * agent's `metrics URL`), with its URL as the first group.
 */
export async function startCli(
  args: string[],
  o: { until?: RegExp; env?: NodeJS.ProcessEnv; timeoutMs?: number; command?: string } = {},
): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const until = o.until ?? /^listening (http:\/\/\S+)$/;
  const timeoutMs = o.timeoutMs ?? 20_000;
  // `command`: a wrapper (unshare, say) whose own arguments then include BIN.
  const child = spawn(o.command ?? BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env: o.env ?? process.env });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const lines = createInterface({ input: child.stdout! });
  const seen: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  const url = await Promise.race([
    new Promise<string>((resolve) =>
      lines.on('line', (line) => {
        seen.push(line);
        const m = until.exec(line);
        if (m) resolve(m[1]!);
      }),
    ),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `no line matching ${until} within ${timeoutMs} ms; stdout: ${seen.join(' | ')}; stderr: ${stderr}`,
            ),
          ),
        timeoutMs,
      );
    }),
    once(child, 'exit').then(([code]) => {
      throw new Error(`exited ${code} before serving; stdout: ${seen.join(' | ')}; stderr: ${stderr}`);
    }),
  ]).finally(() => clearTimeout(timer));
  return { child, url, stderr: () => stderr };
}
