import { GATEWAY_IPV6, GATEWAY_MAC, linkLocalOf, type Port } from './plan.js';

/** What the VPC's namespace holds, as `ip -json` and `iptables-save` report it. */
export interface KernelState {
  links: Array<{ name: string; alias?: string; mtu: number; mac: string; up: boolean }>;
  /** IPv4 addresses of the ports, `a.b.c.d/len`. */
  addresses: Array<{ dev: string; address: string }>;
  /** The main table; `dst` a CIDR (a /32 written out) or `default`. */
  routes: Array<{ dst: string; dev?: string; via?: string; type?: string }>;
  /** Permanent neighbour entries. */
  neighbours: Array<{ dst: string; dev: string; mac: string }>;
  /** The raw table: chain -> its rules as iptables-save prints them (`-A CHAIN ...`). */
  iptables: Map<string, string[]>;
  /** IPv6: the main table's routes not the kernel's own (`dst` an address/128, a CIDR or `default`). */
  routes6: Array<{ dst: string; dev?: string; via?: string; type?: string }>;
  neighbours6: Array<{ dst: string; dev: string; mac: string }>;
  ip6tables: Map<string, string[]>;
}

/** How to bring the kernel to the plan. */
export interface Changes {
  /** `ip -batch` lines for the VPC's namespace, in order. */
  vpc: string[];
  /** For each port made now whose device is configured at creation: `ip -batch` lines for its namespace. */
  configure: Array<{ port: Port; lines: string[] }>;
  /** An `iptables-restore --noflush` input for the raw table, when its rules differ. */
  iptables?: string;
  /** The same for `ip6tables-restore`. */
  ip6tables?: string;
  made: Port[];
  removed: string[];
}

/** The chain that checks what a port sends; its `-src` chain lists the sources the port may use. */
export const srcChain = (port: string) => `${port}-src`;

/**
 * The raw table's rules for the ports, chain by chain. Each port's packets go through its chain:
 * one larger than the ENI's MTU is dropped (the VPC carries no more), so is one whose source MAC
 * is not the ENI's, and one whose source address is not one of the ENI's (anti-spoofing: the
 * `-src` chain accepts the ENI's addresses, the chain's last rule drops the rest). The counters
 * of a port's own chain survive address changes, which only rewrite its `-src` chain.
 */
export function rulesFor(ports: Port[]): Map<string, string[]> {
  return portChains(ports, (p) => p.sources);
}

/** Each port's chain (MTU, MAC, then its `-src` chain of the sources it may use, else drop), and PREROUTING to them. */
function portChains(ports: Port[], sourcesOf: (p: Port) => string[]): Map<string, string[]> {
  const chains = new Map<string, string[]>([
    ['PREROUTING', ports.map((p) => `-A PREROUTING -i ${p.name} -j ${p.name}`)],
  ]);
  for (const p of ports) {
    chains.set(p.name, [
      `-A ${p.name} -m length --length ${p.mtu + 1}:65535 -j DROP`,
      `-A ${p.name} -m mac ! --mac-source ${p.peerMac} -j DROP`,
      `-A ${p.name} -j ${srcChain(p.name)}`,
      `-A ${p.name} -j DROP`,
    ]);
    chains.set(
      srcChain(p.name),
      sourcesOf(p).map((s) => `-A ${srcChain(p.name)} -s ${s} -j ACCEPT`),
    );
  }
  return chains;
}

const cidr32 = (a: string) => (a.includes('/') ? a : `${a}/32`);
const same = (a: string[] | undefined, b: string[]) =>
  a !== undefined && a.length === b.length && a.every((x, i) => x.toLowerCase() === b[i]!.toLowerCase());

/**
 * IPv6's raw table: the same checks per port (MTU, MAC, source), the sources being the ENI's
 * IPv6 addresses, every address of its /80 prefixes, and link-local ones (neighbour discovery;
 * the router never forwards those), and `::` (duplicate address detection).
 */
export function rules6For(ports: Port[]): Map<string, string[]> {
  return portChains(ports, (p) => [...p.addresses6.map((a) => `${a}/128`), ...p.prefixes6, 'fe80::/10', '::/128']);
}

/** An IPv6 route's key as `ip -6 -json` prints it: an address is a /128. */
const cidr128 = (a: string) => (a === 'default' || a.includes('/') ? a : `${a}/128`);

/**
 * The IPv6 part of the plan: a /128 route and a permanent neighbour entry per address, a route
 * per /80 prefix via the ENI's link-local address (with a permanent neighbour entry for it: the
 * whole prefix goes to the ENI's MAC), `blackhole default`.
 */
function diff6(
  ports: Port[],
  kernel: KernelState,
  observed: <T extends { dev?: string }>(items: T[]) => T[],
): string[] {
  const lines: string[] = [];
  const want = new Map<string, { dev?: string; via?: string; type?: string }>([['default', { type: 'blackhole' }]]);
  for (const p of ports) {
    for (const a of p.addresses6) want.set(cidr128(a), { dev: p.name });
    for (const pf of p.prefixes6) want.set(pf, { dev: p.name, via: linkLocalOf(p.peerMac) });
  }
  const have = new Map(observed(kernel.routes6).map((r) => [cidr128(r.dst), r]));
  const spec = (dst: string) => (dst === 'default' ? '::/0' : dst);
  for (const [dst, r] of have)
    if (!want.has(dst)) lines.push(`route del ${spec(dst)}${r.type === 'blackhole' ? ' type blackhole' : ''}`);
  for (const [dst, w] of want) {
    const h = have.get(dst);
    if (h && (h.type ?? 'unicast') === (w.type ?? 'unicast') && h.dev === w.dev && h.via === w.via) continue;
    if (w.type === 'blackhole') lines.push(`route replace blackhole ${spec(dst)}`);
    else if (w.via) lines.push(`route replace ${dst} via ${w.via} dev ${w.dev}`);
    else lines.push(`route replace ${dst} dev ${w.dev}`);
  }
  const wantNeigh = new Map<string, string>();
  for (const p of ports) {
    for (const a of p.addresses6) wantNeigh.set(`${a} ${p.name}`, p.peerMac);
    if (p.prefixes6.length) wantNeigh.set(`${linkLocalOf(p.peerMac)} ${p.name}`, p.peerMac);
  }
  const haveNeigh = new Map(observed(kernel.neighbours6).map((n) => [`${n.dst} ${n.dev}`, n.mac.toLowerCase()]));
  for (const k of haveNeigh.keys()) if (!wantNeigh.has(k)) lines.push(`neigh del ${k.replace(' ', ' dev ')}`);
  for (const [k, mac] of wantNeigh) {
    if (haveNeigh.get(k) === mac.toLowerCase()) continue;
    const [dst, dev] = k.split(' ');
    lines.push(`neigh replace ${dst} lladdr ${mac} dev ${dev} nud permanent`);
  }
  return lines;
}

/**
 * The changes that make the VPC's namespace hold exactly `ports`: ports made or remade (a port
 * whose ifalias, MTU or MAC is not the plan's), the gateway on each port, a /32 route and a
 * permanent neighbour entry per address, prefix routes, `blackhole default` (what no ENI holds
 * is dropped, silently), and the raw table's rules. Everything else in the namespace is removed:
 * it is the VPC's alone.
 */
export function diffVpc(ports: Port[], kernel: KernelState): Changes {
  const vpc: string[] = [];
  const byName = new Map(ports.map((p) => [p.name, p]));
  const links = new Map(kernel.links.filter((l) => l.name !== 'lo').map((l) => [l.name, l]));
  const removed: string[] = [];
  const made: Port[] = [];
  // Ports whose kernel state is gone or about to go: nothing observed on them counts.
  const fresh = new Set<string>();
  for (const [name, link] of links) {
    const want = byName.get(name);
    if (!want || link.alias !== want.alias || link.mtu !== want.mtu || link.mac.toLowerCase() !== GATEWAY_MAC) {
      vpc.push(`link del ${name}`);
      fresh.add(name);
      if (!want) removed.push(name);
    } else if (!link.up) vpc.push(`link set ${name} up`);
  }
  // Primary ENIs first: a hot-plugged device named by the kernel (eth%d) must not take eth0 from them.
  for (const p of [...ports].sort((a, b) => Number(!a.configure) - Number(!b.configure))) {
    if (links.has(p.name) && !fresh.has(p.name)) continue;
    fresh.add(p.name);
    made.push(p);
    vpc.push(
      `link add ${p.name} mtu ${p.mtu} address ${GATEWAY_MAC} type veth peer name ${p.peerName} netns ${p.netns} ` +
        // One segment per packet leaves the device, as on the wire: the VPC's checks see what a real
        // VPC sees, never a TCP super-packet of 64 KiB.
        `address ${p.peerMac} mtu ${p.peerMtu} gso_max_segs 1`,
      `link set ${p.name} alias ${p.alias} up`,
      // Proxy ARP answers at once, not after up to 0.8 s: a VPC answers ARP without delay.
      `ntable change name arp_cache dev ${p.name} proxy_delay 0`,
    );
  }
  const observed = <T extends { dev?: string }>(items: T[]) => items.filter((x) => !x.dev || !fresh.has(x.dev));

  const haveAddr = new Set(observed(kernel.addresses).map((a) => `${a.dev} ${a.address}`));
  const wantAddr = new Set(ports.map((p) => `${p.name} ${p.gateway}/32`));
  for (const a of observed(kernel.addresses))
    if (!wantAddr.has(`${a.dev} ${a.address}`)) vpc.push(`addr del ${a.address} dev ${a.dev}`);
  for (const p of ports)
    if (!haveAddr.has(`${p.name} ${p.gateway}/32`)) vpc.push(`addr add ${p.gateway}/32 dev ${p.name}`);

  const wantRoutes = new Map<string, { dev?: string; via?: string; type?: string }>([
    ['default', { type: 'blackhole' }],
  ]);
  for (const p of ports) {
    for (const a of p.addresses) wantRoutes.set(cidr32(a), { dev: p.name });
    for (const pf of p.prefixes) wantRoutes.set(pf, { dev: p.name, via: p.primaryIp });
  }
  const haveRoutes = new Map(observed(kernel.routes).map((r) => [r.dst, r]));
  for (const r of observed(kernel.routes))
    if (!wantRoutes.has(r.dst)) vpc.push(`route del ${r.dst}${r.type === 'blackhole' ? ' type blackhole' : ''}`);
  for (const [dst, want] of wantRoutes) {
    const have = haveRoutes.get(dst);
    if (have && (have.type ?? 'unicast') === (want.type ?? 'unicast') && have.dev === want.dev && have.via === want.via)
      continue;
    if (want.type === 'blackhole') vpc.push(`route replace blackhole ${dst}`);
    else if (want.via) vpc.push(`route replace ${dst} via ${want.via} dev ${want.dev} onlink`);
    else vpc.push(`route replace ${dst} dev ${want.dev}`);
  }

  const wantNeigh = new Map<string, string>();
  for (const p of ports) for (const a of p.addresses) wantNeigh.set(`${a} ${p.name}`, p.peerMac);
  const haveNeigh = new Map(observed(kernel.neighbours).map((n) => [`${n.dst} ${n.dev}`, n.mac.toLowerCase()]));
  for (const n of observed(kernel.neighbours))
    if (!wantNeigh.has(`${n.dst} ${n.dev}`)) vpc.push(`neigh del ${n.dst} dev ${n.dev}`);
  for (const [k, mac] of wantNeigh) {
    if (haveNeigh.get(k) === mac.toLowerCase()) continue;
    const [dst, dev] = k.split(' ');
    vpc.push(`neigh replace ${dst} lladdr ${mac} dev ${dev} nud permanent`);
  }

  vpc.push(...diff6(ports, kernel, observed));

  const configure = made
    .filter((p) => p.configure)
    .map((p) => ({
      port: p,
      lines: [
        `link set ${p.peerName} up`,
        `addr replace ${p.configure!.address} dev ${p.peerName}`,
        `route replace default via ${p.configure!.gateway} dev ${p.peerName}`,
        // IPv6 as a static guest has it: its address alone (no on-link /64), the router's link-local next hop.
        ...(p.configure!.address6
          ? [
              `addr replace ${p.configure!.address6}/128 dev ${p.peerName} nodad`,
              `route replace ::/0 via ${GATEWAY_IPV6} dev ${p.peerName}`,
            ]
          : []),
      ],
    }));
  return {
    vpc,
    configure,
    iptables: iptablesChanges(rulesFor(ports), kernel.iptables),
    ip6tables: iptablesChanges(rules6For(ports), kernel.ip6tables),
    made,
    removed,
  };
}

/** An iptables-restore --noflush input that rewrites the chains that differ and removes the ones not wanted. */
export function iptablesChanges(want: Map<string, string[]>, have: Map<string, string[]>): string | undefined {
  const changed = [...want].filter(([chain, rules]) => !same(have.get(chain), rules));
  const gone = [...have.keys()].filter((c) => !want.has(c) && c !== 'PREROUTING' && c !== 'OUTPUT');
  if (!changed.length && !gone.length) return undefined;
  const out = ['*raw'];
  for (const [chain] of changed) out.push(chain === 'PREROUTING' ? '-F PREROUTING' : `:${chain} - [0:0]`);
  for (const c of gone) out.push(`-F ${c}`);
  for (const c of gone) out.push(`-X ${c}`);
  for (const [, rules] of changed) out.push(...rules);
  out.push('COMMIT', '');
  return out.join('\n');
}
