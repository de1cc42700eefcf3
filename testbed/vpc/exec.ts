import { execFile } from 'node:child_process';

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one of the kernel's tools (ip, iptables-restore...) with `input` on its stdin; never rejects. */
export function exec(cmd: string, args: string[], input = '', timeoutMs = 15_000): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err
        ? typeof (err as { code?: unknown }).code === 'number'
          ? (err as { code: number }).code
          : 1
        : 0;
      resolve({ code, stdout, stderr: stderr || (err ? err.message : '') });
    });
    child.stdin?.on('error', () => undefined); // a tool that reads no input may close it first
    child.stdin?.end(input);
  });
}

/** Runs a tool and answers its stdout; throws naming the command and its stderr when it fails. */
export async function execOk(cmd: string, args: string[], input = ''): Promise<string> {
  const r = await exec(cmd, args, input);
  if (r.code !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}
