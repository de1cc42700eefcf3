import { execFile } from 'node:child_process';
import type { KernelView } from './model.js';
import { READ_LINKS, READ_TABLES, parseBatchErrors, parseKernelView } from './iproute.js';

/** The kernel as the datapath sees it: read its state, apply `ip -batch` lines. */
export interface KernelPort {
  read(): Promise<KernelView>;
  /**
   * Runs every line (one failing does not stop the others; one starting `-6 ` in IPv6); answers
   * the failed ones by 1-based number, or 0 when ip stopped without saying which line (then any
   * of them may have run).
   */
  apply(lines: string[]): Promise<Map<number, string>>;
}

export interface IpRouteOptions {
  /** A named network namespace (`ip -n`); the agent's own when absent (it runs with host networking). */
  netns?: string;
  /** The ip binary (default: `ip` on PATH). */
  binary?: string;
  timeoutMs?: number;
}

/** ip lives in /usr/sbin or /sbin, which a container's PATH may lack. */
const IP_PATH = [process.env.PATH, '/usr/sbin', '/usr/bin', '/sbin', '/bin'].filter(Boolean).join(':');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** iproute2 in batch mode: three processes per read (links; each family's routes and rules) and one per set of changes. */
export class IpRouteKernel implements KernelPort {
  constructor(private readonly options: IpRouteOptions = {}) {}

  private run(args: string[], stdin: string): Promise<Run> {
    const argv = [...(this.options.netns ? ['-n', this.options.netns] : []), ...args];
    return new Promise((resolve, reject) => {
      const child = execFile(
        this.options.binary ?? 'ip',
        argv,
        { timeout: this.options.timeoutMs ?? 10_000, maxBuffer: 64 * 1024 * 1024, env: { PATH: IP_PATH } },
        (err, stdout, stderr) => {
          const e = err as { code?: unknown; killed?: boolean; message: string } | null;
          if (e && typeof e.code !== 'number')
            return reject(
              new Error(
                e.code === 'ENOENT'
                  ? `${this.options.binary ?? 'ip'} (iproute2) is not installed; the agent needs it for the node's datapath`
                  : `ip ${argv.join(' ')}: ${e.killed ? 'timed out' : e.message}`,
              ),
            );
          resolve({ code: e ? (e.code as number) : 0, stdout, stderr });
        },
      );
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(stdin);
    });
  }

  async read(): Promise<KernelView> {
    const [links, r4, r6] = await Promise.all([
      this.run(['-N', '-d', '-json', '-batch', '-'], READ_LINKS),
      this.run(['-4', '-N', '-d', '-json', '-batch', '-'], READ_TABLES),
      this.run(['-6', '-N', '-d', '-json', '-batch', '-'], READ_TABLES),
    ]);
    for (const r of [links, r4])
      if (r.code !== 0) throw new Error(`cannot read the node's links, routes and rules: ${r.stderr.trim()}`);
    // A kernel without IPv6 has no IPv6 routes or rules to read.
    const noIpv6 = r6.code !== 0 && /not supported|protocol not available/i.test(r6.stderr);
    if (r6.code !== 0 && !noIpv6) throw new Error(`cannot read the node's IPv6 routes and rules: ${r6.stderr.trim()}`);
    return parseKernelView(links.stdout, r4.stdout, noIpv6 ? '' : r6.stdout);
  }

  async apply(lines: string[]): Promise<Map<number, string>> {
    if (!lines.length) return new Map();
    // One batch per family, each answering by its own line numbers: mapped back to the caller's.
    const numbered = lines.map((text, i) => ({ text, n: i + 1 }));
    const failed = new Map<number, string>();
    for (const six of [false, true]) {
      const part = numbered.filter((l) => l.text.startsWith('-6 ') === six);
      if (!part.length) continue;
      const text = part.map((l) => (six ? l.text.slice(3) : l.text)).join('\n');
      const r = await this.run([...(six ? ['-6'] : []), '-force', '-batch', '-'], `${text}\n`);
      const errors = parseBatchErrors(r.stderr);
      for (const [k, err] of errors) failed.set(k === 0 ? 0 : part[k - 1]!.n, err);
      // ip gives up on a line it cannot parse (exit 255), whatever -force says: which ran is not known.
      if (r.code !== 0 && errors.size === 0) failed.set(0, r.stderr.trim() || `ip exited ${r.code}`);
    }
    return failed;
  }
}
