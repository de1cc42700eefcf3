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

/** A line the operator or the agent prints: one JSON object, its level by name, its message. */
export function isLogEntry(line: string): boolean {
  try {
    const entry = JSON.parse(line) as { level?: unknown; msg?: unknown };
    return ['debug', 'info', 'warn', 'error', 'fatal'].includes(entry.level as string) && typeof entry.msg === 'string';
  } catch {
    return false;
  }
}

export async function runCli(args: string[], timeoutMs = 20_000, env?: NodeJS.ProcessEnv): Promise<Finished> {
  const child = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
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
 * the emulators' `listening URL` first line; `until` picks another, as a pattern whose first
 * group is the URL or as a function answering the URL of a line (for the operator and the agent:
 * `(l) => servingOf(l)?.metrics`).
 */
export async function startCli(
  args: string[],
  o: {
    until?: RegExp | ((line: string) => string | undefined);
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    command?: string;
  } = {},
): Promise<{ child: ChildProcess; url: string; stderr: () => string }> {
  const until = o.until ?? /^listening (http:\/\/\S+)$/;
  const urlOf = typeof until === 'function' ? until : (line: string) => until.exec(line)?.[1];
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
        const url = urlOf(line);
        if (url) resolve(url);
      }),
    ),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `no line matching ${typeof until === 'function' ? 'until' : until} within ${timeoutMs} ms; stdout: ${seen.join(' | ')}; stderr: ${stderr}`,
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
