import type { KernelLink, KernelRoute, KernelRule, KernelView, LinkChange, RouteAdd, RuleAdd } from './model.js';

/**
 * iproute2's side of the datapath, as pure functions: the kernel's state from `ip -N -d -json`
 * (numbers for tables, protocols, scopes and types, so the node's rt_tables names change
 * nothing), and the changes as `ip -batch` lines.
 */

/**
 * What the agent reads: the links with their addresses (`ip -batch`), then the routes and rules
 * of each family (`ip -4 -batch`, `ip -6 -batch`: a batch line cannot name the family, and
 * `route show table all` of no family would print both, untold apart). One JSON array per line.
 */
export const READ_LINKS = 'addr show\n';
export const READ_TABLES = 'route show table all\nrule show\n';

export class IpOutputError extends Error {}

const num = (v: unknown, what: string): number => {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isFinite(n)) throw new IpOutputError(`ip printed ${what} ${JSON.stringify(v)}, not a number`);
  return n;
};

function array(line: string | undefined, what: string): Array<Record<string, unknown>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line ?? '');
  } catch {
    throw new IpOutputError(`ip printed no JSON for ${what}: ${JSON.stringify((line ?? '').slice(0, 200))}`);
  }
  if (!Array.isArray(parsed)) throw new IpOutputError(`ip printed ${what} that is not a JSON array`);
  return parsed as Array<Record<string, unknown>>;
}

export function parseLinks(items: Array<Record<string, unknown>>): KernelLink[] {
  return items.map((l) => {
    const flags = Array.isArray(l.flags) ? (l.flags as string[]) : [];
    const addrInfo = Array.isArray(l.addr_info) ? (l.addr_info as Array<Record<string, unknown>>) : [];
    return {
      index: num(l.ifindex, 'ifindex'),
      name: String(l.ifname),
      mac: String(l.address ?? '').toLowerCase(),
      mtu: num(l.mtu, 'mtu'),
      up: flags.includes('UP'),
      ...(typeof l.master === 'string' ? { master: l.master } : {}),
      ...(typeof l.link === 'string' ? { parent: l.link } : {}),
      // IPv4, and global IPv6 (scope 0, as -N prints it; every device has a link-local one, no pod's anyway).
      addresses: addrInfo
        .filter(
          (a) =>
            typeof a.local === 'string' &&
            (a.family === 'inet' || (a.family === 'inet6' && ['0', 'global'].includes(String(a.scope)))),
        )
        .map((a) => String(a.local)),
    };
  });
}

export function parseRoutes(items: Array<Record<string, unknown>>, family?: 6): KernelRoute[] {
  return items.map((r) => ({
    ...(family ? { family } : {}),
    // `ip route show table all` prints the table of every route; a route without one is main's.
    table: r.table === undefined ? 254 : num(r.table, 'table'),
    type: r.type === undefined ? 1 : num(r.type, 'type'),
    dst: String(r.dst),
    ...(typeof r.gateway === 'string' ? { gateway: r.gateway } : {}),
    ...(typeof r.dev === 'string' ? { dev: r.dev } : {}),
    scope: r.scope === undefined ? 0 : num(r.scope, 'scope'),
    protocol: r.protocol === undefined ? 0 : num(r.protocol, 'protocol'),
    ...(r.metric !== undefined ? { metric: num(r.metric, 'metric') } : {}),
    ...(Array.isArray(r.nexthops) ? { multipath: true } : {}),
  }));
}

/** A rule's selector as a CIDR: ip prints an address, `all`, and the length apart when it is not the full one. */
function selector(addr: unknown, len: unknown, family?: 6): string | undefined {
  if (addr === undefined || addr === 'all') return undefined;
  const bits = len === undefined ? (family === 6 ? 128 : 32) : num(len, 'prefix length');
  return `${String(addr)}/${bits}`;
}

const RULE_KEYS = new Set(['priority', 'src', 'srclen', 'dst', 'dstlen', 'table', 'protocol']);

export function parseRules(items: Array<Record<string, unknown>>, family?: 6): KernelRule[] {
  return items.map((r) => {
    const src = selector(r.src, r.srclen, family);
    const dst = selector(r.dst, r.dstlen, family);
    const extra = Object.keys(r).some((k) => !RULE_KEYS.has(k));
    return {
      ...(family ? { family } : {}),
      priority: r.priority === undefined ? 0 : num(r.priority, 'priority'),
      ...(src ? { src } : {}),
      ...(dst ? { dst } : {}),
      ...(r.table !== undefined ? { table: num(r.table, 'table') } : {}),
      protocol: r.protocol === undefined ? 0 : num(r.protocol, 'protocol'),
      ...(extra ? { extra: true } : {}),
    };
  });
}

const jsonLines = (stdout: string, commands: number, what: string): string[] => {
  const lines = stdout.split('\n').filter((l) => l.trim());
  if (lines.length !== commands)
    throw new IpOutputError(`${what} printed ${lines.length} JSON lines for ${commands} commands`);
  return lines;
};

/**
 * The kernel's state from the output of `ip -N -d -json -batch -` fed READ_LINKS, and of
 * `ip -4 ...` and `ip -6 ...` fed READ_TABLES (no IPv6 output on a node without IPv6).
 */
export function parseKernelView(links: string, tables4: string, tables6 = ''): KernelView {
  const [addr] = jsonLines(links, 1, 'ip');
  const [routes4, rules4] = jsonLines(tables4, 2, 'ip -4');
  const six = tables6.trim() ? jsonLines(tables6, 2, 'ip -6') : undefined;
  return {
    links: parseLinks(array(addr, 'addr show')),
    routes: [
      ...parseRoutes(array(routes4, 'ip -4 route show table all')),
      ...(six ? parseRoutes(array(six[0], 'ip -6 route show table all'), 6) : []),
    ],
    rules: [
      ...parseRules(array(rules4, 'ip -4 rule show')),
      ...(six ? parseRules(array(six[1], 'ip -6 rule show'), 6) : []),
    ],
  };
}

/** One `ip -batch` line and what it serves. */
export interface BatchLine {
  /** What follows `ip`; an IPv6 line starts with `-6 ` (a rule's family comes only from the command line). */
  text: string;
  change: 'link' | 'route-add' | 'route-del' | 'rule-add' | 'rule-del';
  eniId?: string;
  ip?: string;
  /** The line that takes this one back (for an add). */
  undo?: string;
}

export function linkLine(c: LinkChange): BatchLine {
  const parts = [
    'link set dev',
    c.dev,
    ...(c.mtu !== undefined ? ['mtu', String(c.mtu)] : []),
    ...(c.up ? ['up'] : []),
  ];
  return { text: parts.join(' '), change: 'link', eniId: c.eniId };
}

/** Route types by number (rtnetlink's RTN_*), as `ip route` names them. */
const ROUTE_TYPES: Record<number, string> = {
  2: 'local',
  3: 'broadcast',
  4: 'anycast',
  5: 'multicast',
  6: 'blackhole',
  7: 'unreachable',
  8: 'prohibit',
  9: 'throw',
};

/**
 * A route as `ip route add|del` takes it: everything that tells it apart, since a delete treats
 * what it is not given as a wildcard and removes the first route that matches.
 */
function routeSpec(r: KernelRoute): string {
  return [
    ...(ROUTE_TYPES[r.type] ? [ROUTE_TYPES[r.type]!] : []),
    // A batch line names no family: `default` would be IPv4's; the address form says which.
    r.family === 6 && r.dst === 'default' ? '::/0' : r.dst,
    ...(r.gateway ? ['via', r.gateway] : []),
    ...(r.dev ? ['dev', r.dev] : []),
    ...(r.scope === 253 ? ['scope', 'link'] : []),
    'table',
    String(r.table),
    'proto',
    String(r.protocol),
    ...(r.metric ? ['metric', String(r.metric)] : []),
  ].join(' ');
}

/** `ip` options of the family, before the command: none for IPv4. */
const familyOption = (r: { family?: 6 }) => (r.family === 6 ? '-6 ' : '');

export function routeAddLine(r: RouteAdd): BatchLine {
  return {
    text: `${familyOption(r)}route add ${routeSpec(r)}`,
    change: 'route-add',
    eniId: r.eniId,
    undo: `${familyOption(r)}route del ${routeSpec(r)}`,
  };
}

export function routeDelLine(r: KernelRoute): BatchLine {
  // Only what identifies it: a multipath route is named by its destination, table and protocol.
  const spec = r.multipath ? `${r.dst} table ${r.table} proto ${r.protocol}` : routeSpec(r);
  return { text: `${familyOption(r)}route del ${spec}`, change: 'route-del' };
}

function ruleSpec(r: KernelRule): string {
  const selectors = [r.src ? `from ${r.src}` : '', r.dst ? `to ${r.dst}` : ''].filter(Boolean);
  const lookup = r.table !== undefined ? [`lookup ${r.table}`] : [];
  return [`priority ${r.priority} protocol ${r.protocol}`, ...selectors, ...lookup].join(' ');
}

export function ruleAddLine(r: RuleAdd): BatchLine {
  return {
    text: `${familyOption(r)}rule add ${ruleSpec(r)}`,
    change: 'rule-add',
    eniId: r.eniId,
    ip: r.ip,
    undo: `${familyOption(r)}rule del ${ruleSpec(r)}`,
  };
}

export function ruleDelLine(r: KernelRule, ip?: string): BatchLine {
  return { text: `${familyOption(r)}rule del ${ruleSpec(r)}`, change: 'rule-del', ...(ip ? { ip } : {}) };
}

/**
 * The errors of an `ip -force -batch -` run by line number (1-based): ip prints the kernel's
 * answer, then `Command failed -:N`.
 */
export function parseBatchErrors(stderr: string): Map<number, string> {
  const out = new Map<number, string>();
  let pending: string[] = [];
  for (const line of stderr.split('\n')) {
    const m = /^Command failed (?:-|\S+):(\d+)\s*$/.exec(line);
    if (m) {
      out.set(Number(m[1]), pending.join('; ') || 'failed');
      pending = [];
    } else if (line.trim()) pending.push(line.trim());
  }
  return out;
}
