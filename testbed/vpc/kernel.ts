import type { Changes, KernelState } from './diff.js';
import { exec, execOk } from './exec.js';

interface IpLink {
  ifname: string;
  ifalias?: string;
  mtu: number;
  address: string;
  flags: string[];
}
interface IpAddr {
  ifname: string;
  addr_info: Array<{ family: string; local: string; prefixlen: number }>;
}
interface IpRoute {
  dst: string;
  dev?: string;
  gateway?: string;
  type?: string;
  protocol?: string;
}
interface IpNeigh {
  dst: string;
  dev: string;
  lladdr?: string;
  state?: string[];
}

const json = async <T>(netns: string, args: string[]): Promise<T[]> => {
  const out = await execOk('ip', ['-n', netns, '-j', ...args]);
  return out.trim() ? (JSON.parse(out) as T[]) : [];
};

/** The raw table of `iptables-save` output: chain -> rules, and each rule's packet counter (with -c). */
export function parseIptablesSave(text: string): { chains: Map<string, string[]>; packets: Map<string, number[]> } {
  const chains = new Map<string, string[]>();
  const packets = new Map<string, number[]>();
  let inRaw = false;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('*')) inRaw = line === '*raw';
    if (!inRaw) continue;
    const chain = /^:(\S+) /.exec(line);
    if (chain) {
      chains.set(chain[1]!, []);
      packets.set(chain[1]!, []);
      continue;
    }
    const rule = /^(?:\[(\d+):\d+\] )?(-A (\S+) .*)$/.exec(line);
    if (rule) {
      chains.get(rule[3]!)?.push(rule[2]!);
      packets.get(rule[3]!)?.push(Number(rule[1] ?? 0));
    }
  }
  return { chains, packets };
}

export async function iptablesSave(netns: string, counters = false, six = false): Promise<string> {
  const tool = six ? 'ip6tables-save' : 'iptables-save';
  const r = await exec('ip', ['netns', 'exec', netns, tool, ...(counters ? ['-c'] : []), '-t', 'raw']);
  // A namespace whose raw table was never used has none to save.
  if (r.code !== 0 && /does not exist|Table does not exist/i.test(r.stderr)) return '';
  if (r.code !== 0) throw new Error(`iptables-save in ${netns} failed (${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** What the VPC's namespace holds now. */
export async function readKernel(netns: string): Promise<KernelState> {
  const [links, addrs, routes, neigh, saved, routes6, neigh6, saved6] = await Promise.all([
    json<IpLink>(netns, ['link', 'show']),
    json<IpAddr>(netns, ['-4', 'addr', 'show']),
    json<IpRoute>(netns, ['-4', 'route', 'show', 'table', 'main']),
    json<IpNeigh>(netns, ['-4', 'neigh', 'show', 'nud', 'permanent']),
    iptablesSave(netns),
    json<IpRoute>(netns, ['-6', 'route', 'show', 'table', 'main']),
    json<IpNeigh>(netns, ['-6', 'neigh', 'show', 'nud', 'permanent']),
    iptablesSave(netns, false, true),
  ]);
  const permanent = (n: IpNeigh) => Boolean(n.lladdr && n.state?.includes('PERMANENT'));
  return {
    // The kernel's own IPv6 routes (each port's fe80::/64) are not the VPC's to plan.
    routes6: routes6
      .filter((r) => r.protocol !== 'kernel')
      .map((r) => ({ dst: r.dst, dev: r.dev, via: r.gateway, type: r.type })),
    neighbours6: neigh6.filter(permanent).map((n) => ({ dst: n.dst, dev: n.dev, mac: n.lladdr! })),
    ip6tables: parseIptablesSave(saved6).chains,
    links: links.map((l) => ({
      name: l.ifname,
      alias: l.ifalias,
      mtu: l.mtu,
      mac: l.address,
      up: l.flags.includes('UP'),
    })),
    addresses: addrs
      .filter((a) => a.ifname !== 'lo')
      .flatMap((a) =>
        a.addr_info
          .filter((i) => i.family === 'inet')
          .map((i) => ({ dev: a.ifname, address: `${i.local}/${i.prefixlen}` })),
      ),
    routes: routes.map((r) => ({
      dst: r.dst === 'default' || r.dst.includes('/') ? r.dst : `${r.dst}/32`,
      dev: r.dev,
      via: r.gateway,
      type: r.type,
    })),
    neighbours: neigh
      .filter((n) => n.lladdr && n.state?.includes('PERMANENT'))
      .map((n) => ({ dst: n.dst, dev: n.dev, mac: n.lladdr! })),
    iptables: parseIptablesSave(saved).chains,
  };
}

/** One failed step of applying changes: what was asked and what the kernel said. */
export interface ApplyError {
  netns: string;
  command: string;
  error: string;
}

/**
 * `ip -force -batch`: every line is tried (one that fails does not hold back the others); the
 * lines that failed are answered with the kernel's message, as iproute2 reports them
 * (`Command failed -:N`).
 */
async function batch(netns: string, lines: string[]): Promise<ApplyError[]> {
  if (!lines.length) return [];
  const r = await exec('ip', ['-n', netns, '-force', '-batch', '-'], lines.join('\n') + '\n');
  if (r.code === 0) return [];
  const errors: ApplyError[] = [];
  let message: string[] = [];
  for (const line of r.stderr.split('\n')) {
    const failed = /^Command failed -:(\d+)$/.exec(line.trim());
    if (failed) {
      errors.push({ netns, command: lines[Number(failed[1]) - 1] ?? '?', error: message.join(' ').trim() });
      message = [];
    } else if (line.trim()) message.push(line.trim());
  }
  if (!errors.length) errors.push({ netns, command: 'ip -batch', error: r.stderr.trim() || `exit ${r.code}` });
  return errors;
}

/** Applies the changes to the VPC's namespace, then configures the devices made; answers what failed. */
export async function applyChanges(netns: string, changes: Changes): Promise<ApplyError[]> {
  const errors = await batch(netns, changes.vpc);
  const failedMade = new Set(
    errors.filter((e) => e.command.startsWith('link add ')).map((e) => e.command.split(' ')[2]),
  );
  for (const c of changes.configure) {
    if (failedMade.has(c.port.name)) continue;
    const failed = await batch(c.port.netns, c.lines);
    // A device left half-configured is unmade, so that the next round makes it again.
    if (failed.length) errors.push(...failed, ...(await batch(netns, [`link del ${c.port.name}`])));
  }
  for (const [tool, input] of [
    ['iptables-restore', changes.iptables],
    ['ip6tables-restore', changes.ip6tables],
  ] as const) {
    if (!input) continue;
    const r = await exec('ip', ['netns', 'exec', netns, tool, '--noflush'], input);
    if (r.code !== 0) errors.push({ netns, command: tool, error: r.stderr.trim() || `exit ${r.code}` });
  }
  return errors;
}
