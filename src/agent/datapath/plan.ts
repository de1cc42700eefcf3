import ipaddr from 'ipaddr.js';
import { isIpv6 } from '../../ipam/families.js';
import {
  EGRESS_PRIORITY,
  INGRESS_PRIORITY,
  IPV6_DEFAULT_METRIC,
  MAIN_TABLE,
  MAX_DEVICE_INDEX,
  RTN_UNICAST,
  RT_PROTOCOL,
  SCOPE_LINK,
  SCOPE_UNIVERSE,
  type DatapathConfig,
  type DatapathPlan,
  type Desired,
  type KernelLink,
  type KernelRoute,
  type KernelRule,
  type KernelView,
  type LinkChange,
  type PoolEni,
  type Problem,
  type RouteAdd,
  type RuleAdd,
} from './model.js';

/** Restricts a plan to some ENIs and addresses (an ADD or a DEL); undefined plans everything (a reconcile). */
export interface PlanScope {
  enis: readonly string[];
  ips: readonly string[];
}

/**
 * Whether a table number is in our range: base+1 .. base+MAX_DEVICE_INDEX, one per secondary
 * ENI, and base itself: the primary ENI's IPv6 table (its pods' IPv4 leave by the main table).
 */
export function isOurTable(table: number | undefined, config: DatapathConfig): boolean {
  return table !== undefined && table >= config.tableBase && table <= config.tableBase + MAX_DEVICE_INDEX;
}

/** Ours: in a table of our range and written with our protocol. */
export function isOurRoute(r: KernelRoute, config: DatapathConfig): boolean {
  return isOurTable(r.table, config) && r.protocol === RT_PROTOCOL;
}

/**
 * Ours: at one of our priorities, written with our protocol, and selecting on nothing we never
 * set. A rule with another selector (iif, fwmark, not...) is someone else's: a delete line names
 * only what the model knows, and the kernel would take it for a pod's rule (it deletes the first
 * rule that matches what is given).
 */
export function isOurRule(r: KernelRule): boolean {
  return (r.priority === INGRESS_PRIORITY || r.priority === EGRESS_PRIORITY) && r.protocol === RT_PROTOCOL && !r.extra;
}

const routeKey = (r: KernelRoute) =>
  [
    r.family ?? 4,
    r.table,
    r.type,
    r.dst,
    r.gateway ?? '',
    r.dev ?? '',
    r.scope,
    r.metric ?? 0,
    r.multipath ? 'm' : '',
  ].join('|');
const ruleKey = (r: KernelRule) =>
  [r.family ?? 4, r.priority, r.src ?? '', r.dst ?? '', r.table ?? '', r.protocol, r.extra ? 'x' : ''].join('|');

/** The pod address a rule of ours is about: the egress rule's source, the ingress rule's destination (a /32 or /128). */
export function ruleAddress(r: KernelRule): string | undefined {
  const cidr = r.priority === EGRESS_PRIORITY ? r.src : r.priority === INGRESS_PRIORITY ? r.dst : undefined;
  const whole = r.family === 6 ? '/128' : '/32';
  return cidr?.endsWith(whole) ? cidr.slice(0, -whole.length) : undefined;
}

/** The two rules of a pod address (either family): ingress to `main`, egress to its ENI's table. */
export function podRules(ip: string, table: number): KernelRule[] {
  const six = isIpv6(ip);
  const family = six ? { family: 6 as const } : {};
  const host = `${ip}/${six ? 128 : 32}`;
  return [
    { ...family, priority: INGRESS_PRIORITY, dst: host, table: MAIN_TABLE, protocol: RT_PROTOCOL },
    { ...family, priority: EGRESS_PRIORITY, src: host, table, protocol: RT_PROTOCOL },
  ];
}

/**
 * The routes of an ENI's table: its gateway on the link, and the default route through it; in
 * dual-stack also the IPv6 default route through the router's link-local address (on-link by
 * nature: no route to it is needed).
 */
export function eniRoutes(gateway: string, dev: string, table: number, gatewayIPv6?: string): KernelRoute[] {
  return [
    { table, type: RTN_UNICAST, dst: gateway, dev, scope: SCOPE_LINK, protocol: RT_PROTOCOL },
    { table, type: RTN_UNICAST, dst: 'default', gateway, dev, scope: SCOPE_UNIVERSE, protocol: RT_PROTOCOL },
    ...(gatewayIPv6
      ? [
          {
            family: 6 as const,
            table,
            type: RTN_UNICAST,
            dst: 'default',
            gateway: gatewayIPv6,
            dev,
            scope: SCOPE_UNIVERSE,
            protocol: RT_PROTOCOL,
            metric: IPV6_DEFAULT_METRIC,
          },
        ]
      : []),
  ];
}

/** The devices the node's preferred default route (main table, lowest metric) leaves through: its primary interface. */
export function primaryDevices(kernel: KernelView): Set<string> {
  const defaults = kernel.routes.filter((r) => !r.family && r.table === MAIN_TABLE && r.dst === 'default' && r.dev);
  if (!defaults.length) return new Set();
  const best = Math.min(...defaults.map((r) => r.metric ?? 0));
  return new Set(defaults.filter((r) => (r.metric ?? 0) === best).map((r) => r.dev!));
}

/**
 * The device of a MAC: any name; devices enslaved to another (a bond, a bridge, net_failover's
 * lower devices) and devices stacked on one with the same MAC (VLAN, ipvlan) are skipped.
 */
export function devicesOf(mac: string, links: readonly KernelLink[]): KernelLink[] {
  const same = links.filter((l) => l.mac === mac.toLowerCase() && !l.master);
  const names = new Set(same.map((l) => l.name));
  return same.filter((l) => !(l.parent && names.has(l.parent)));
}

const describeRoute = (r: KernelRoute) =>
  `${r.dst}${r.gateway ? ` via ${r.gateway}` : ''}${r.dev ? ` dev ${r.dev}` : ''} proto ${r.protocol}`;

interface EniCheck {
  eni: PoolEni;
  /** Its table, when its device index numbers one of its own. */
  table?: number;
  device?: KernelLink;
  problem?: Problem;
  /**
   * The instance's primary ENI (deviceIndex 0, usePrimaryENI): its device is the node's own
   * interface, which eni-ipam never changes; its pods' IPv4 packets leave by the main table.
   */
  primary?: boolean;
  /**
   * The table its pods' IPv6 packets leave by, where it differs from `table`: the primary ENI's
   * own (table base), holding only the IPv6 default route through its device. The main table is
   * the node's, and a node without an IPv6 address of its own has no IPv6 default route there.
   */
  table6?: number;
  /** Why the primary ENI's IPv6 table cannot be used: its pods' IPv6 addresses are refused, their IPv4 ones not. */
  problem6?: Problem;
}

/** What keeps a pod address of the ENI from being routed, if anything. */
const problemFor = (c: EniCheck, ip: string): Problem | undefined => c.problem ?? (isIpv6(ip) ? c.problem6 : undefined);

/** The table a pod address's packets leave by: its ENI's, or for IPv6 the one kept for that family. */
const egressTable = (c: EniCheck, ip: string): number => (isIpv6(ip) && c.table6 !== undefined ? c.table6 : c.table!);

function checkEnis(desired: Desired, kernel: KernelView, config: DatapathConfig): Map<string, EniCheck> {
  const primary = primaryDevices(kernel);
  const byIndex = new Map<number, string[]>();
  for (const e of desired.enis)
    if (e.deviceIndex !== undefined) byIndex.set(e.deviceIndex, [...(byIndex.get(e.deviceIndex) ?? []), e.id]);
  const out = new Map<string, EniCheck>();
  for (const eni of desired.enis) {
    const check: EniCheck = { eni };
    out.set(eni.id, check);
    const fail = (kind: Problem['kind'], message: string) => (check.problem ??= { kind, eniId: eni.id, message });
    const index = eni.deviceIndex;
    if (index === 0) {
      check.primary = true;
      check.table = MAIN_TABLE;
      if (eni.gatewayIPv6) check.table6 = config.tableBase;
    } else if (index === undefined || !Number.isInteger(index) || index < 1 || index > MAX_DEVICE_INDEX) {
      fail(
        'no-device-index',
        `ENI ${eni.id} has no usable deviceIndex in its pool (${index ?? 'none'}; 0 to ${MAX_DEVICE_INDEX}): ` +
          'its route table is numbered from it',
      );
    } else if (byIndex.get(index)!.length > 1) {
      // Both keep their table untouched: which one it serves is not known.
      check.table = config.tableBase + index;
      fail(
        'duplicate-device-index',
        `ENIs ${byIndex.get(index)!.join(', ')} share deviceIndex ${index} in the pool: ` +
          `they cannot both use route table ${config.tableBase + index}`,
      );
    } else check.table = config.tableBase + index;
    if (!eni.mac) {
      fail('device-missing', `the pool publishes no MAC address for ENI ${eni.id}: its device cannot be found`);
    } else {
      const found = devicesOf(eni.mac, kernel.links);
      if (found.length === 1 && check.primary) {
        if (primary.has(found[0]!.name)) check.device = found[0];
        else
          fail(
            'primary-device',
            `device ${found[0]!.name} (MAC ${eni.mac}) of the primary ENI ${eni.id} does not carry the node's ` +
              'default route: its pods would leave by another interface, and the VPC drops what an ENI sends ' +
              'from an address not its own',
          );
      } else if (found.length === 1 && primary.has(found[0]!.name)) {
        fail(
          'primary-device',
          `device ${found[0]!.name} (MAC ${eni.mac}) of ENI ${eni.id} carries the node's default route: ` +
            'it is the primary interface, which eni-ipam never changes',
        );
      } else if (found.length === 1) check.device = found[0];
      else if (found.length === 0)
        fail(
          'device-missing',
          `no device with MAC ${eni.mac} (ENI ${eni.id}) in the node's network namespace; ` +
            'is the ENI attached to this instance?',
        );
      else
        fail(
          'device-ambiguous',
          `devices ${found.map((l) => l.name).join(', ')} all have MAC ${eni.mac} (ENI ${eni.id}) ` +
            'and none is enslaved to another: which one is the ENI is not known',
        );
    }
    if (!eni.gatewayIP || !ipaddr.IPv4.isValidFourPartDecimal(eni.gatewayIP))
      fail('no-gateway', `the pool publishes no IPv4 gateway for ENI ${eni.id} (${eni.gatewayIP || 'none'})`);
    const ownTable = check.primary ? check.table6 : check.table;
    if (ownTable !== undefined) {
      const foreign = kernel.routes.filter((r) => r.table === ownTable && r.protocol !== RT_PROTOCOL);
      // The primary ENI's IPv4 pods leave by main: only its IPv6 ones need the table.
      const refuse = check.primary
        ? (kind: Problem['kind'], message: string) => (check.problem6 = { kind, eniId: eni.id, message })
        : fail;
      if (foreign.length)
        refuse(
          'foreign-routes',
          `route table ${ownTable} (ENI ${eni.id}, deviceIndex ${index}) holds routes eni-ipam did not add ` +
            `(${foreign.slice(0, 2).map(describeRoute).join('; ')}); eni-ipam leaves it alone: ` +
            'choose another --route-table-base',
        );
    }
  }
  return out;
}

/**
 * What to change so that the kernel holds what the pool and the pods' addresses say, touching
 * only what is ours (see model.ts): for each ready ENI (its device found by MAC, a table of its
 * own, nothing foreign in it) the device up with the MTU and its table with exactly the gateway
 * and default routes; for each address a pod holds, its ingress and egress rules; the rules of
 * addresses no pod holds and the tables of ENIs no longer InUse go. An address whose ENI is not
 * (or no longer) in the pool keeps whatever rules it has: it is a pod's. With a scope, only the
 * scope's ENIs and addresses are looked at (nothing else is added or removed).
 */
export function planDatapath(
  desired: Desired,
  kernel: KernelView,
  config: DatapathConfig,
  scope?: PlanScope,
): DatapathPlan {
  const checks = checkEnis(desired, kernel, config);
  const inScopeEni = (id: string) => !scope || scope.enis.includes(id);
  const inScopeIp = (ip: string) => !scope || scope.ips.includes(ip);
  const problems: Problem[] = [];
  const ready: DatapathPlan['ready'] = {};
  const links: LinkChange[] = [];
  const addRoutes: RouteAdd[] = [];
  const delRoutes: KernelRoute[] = [];
  const deviceAddresses = new Set<string>();
  // A table of ours holds exactly `routes`: what is missing is added, what else is ours there goes.
  const syncTable = (routes: KernelRoute[], table: number, eniId: string) => {
    const want = new Map(routes.map((r) => [routeKey(r), r]));
    for (const r of kernel.routes.filter((x) => x.table === table && isOurRoute(x, config))) {
      if (want.has(routeKey(r))) want.delete(routeKey(r));
      else delRoutes.push(r);
    }
    for (const r of want.values()) addRoutes.push({ ...r, eniId });
  };

  for (const c of checks.values()) {
    if (c.device) for (const a of c.device.addresses) deviceAddresses.add(a);
    if (c.problem) {
      problems.push(c.problem);
      continue;
    }
    const dev = c.device!;
    const table = c.table!;
    ready[c.eni.id] = { dev: dev.name, table };
    if (!inScopeEni(c.eni.id)) continue;
    // The node's own interface and main table are the node's: only the primary ENI's IPv6 table is ours.
    if (c.primary) {
      if (c.problem6) problems.push(c.problem6);
      if (c.table6 === undefined || c.problem6) continue;
      const routes6 = eniRoutes(c.eni.gatewayIP, dev.name, c.table6, c.eni.gatewayIPv6).filter((r) => r.family === 6);
      syncTable(routes6, c.table6, c.eni.id);
      continue;
    }
    if (dev.mtu !== config.mtu || !dev.up)
      links.push({
        eniId: c.eni.id,
        dev: dev.name,
        ...(dev.mtu !== config.mtu ? { mtu: config.mtu } : {}),
        ...(!dev.up ? { up: true } : {}),
      });
    syncTable(eniRoutes(c.eni.gatewayIP, dev.name, table, c.eni.gatewayIPv6), table, c.eni.id);
  }

  // Tables of our range that no InUse ENI of the pool numbers: a detached ENI's.
  if (!scope) {
    const claimed = new Set([...checks.values()].flatMap((c) => [c.table, c.table6].filter((t) => t !== undefined)));
    for (const r of kernel.routes) if (isOurRoute(r, config) && !claimed.has(r.table)) delRoutes.push(r);
  }

  // Rules: what each held address needs, and which addresses keep theirs untouched.
  const fresh = new Set(desired.fresh ?? []);
  const wanted = new Map<string, { rules: KernelRule[]; eniId: string }>();
  const keep = new Set<string>();
  for (const a of desired.addresses) {
    const c = checks.get(a.eniId);
    if (fresh.has(a.ip)) {
      if (!c) {
        problems.push({
          kind: 'not-in-pool',
          eniId: a.eniId,
          ip: a.ip,
          message: `ENI ${a.eniId} of ${a.ip} is not an InUse ENI of the pool`,
        });
      } else if (problemFor(c, a.ip)) {
        problems.push({ ...problemFor(c, a.ip)!, ip: a.ip });
      } else if (c.device!.addresses.includes(a.ip)) {
        problems.push({
          kind: 'address-on-device',
          eniId: a.eniId,
          ip: a.ip,
          message:
            `${a.ip} is configured on device ${c.device!.name} of ENI ${a.eniId} (the image's network scripts ` +
            'did it): the node uses it, so no pod can; the agent leaves it to the node',
        });
      } else {
        wanted.set(a.ip, { rules: podRules(a.ip, egressTable(c, a.ip)), eniId: a.eniId });
        continue;
      }
      keep.add(a.ip);
      continue;
    }
    // A pod's address whose ENI is not ready (its device gone for now, a foreign table) keeps what it has.
    if (c && !problemFor(c, a.ip)) wanted.set(a.ip, { rules: podRules(a.ip, egressTable(c, a.ip)), eniId: a.eniId });
    else keep.add(a.ip);
  }
  const addRules: RuleAdd[] = [];
  const delRules: KernelRule[] = [];
  const seen = new Set<string>();
  for (const r of kernel.rules) {
    if (!isOurRule(r)) continue;
    const ip = ruleAddress(r);
    if (ip !== undefined && !inScopeIp(ip)) continue;
    if (ip === undefined && scope) continue;
    if (ip !== undefined && keep.has(ip)) continue;
    const w = ip === undefined ? undefined : wanted.get(ip);
    const key = ruleKey(r);
    if (w && w.rules.some((x) => ruleKey(x) === key) && !seen.has(key)) seen.add(key);
    else delRules.push(r);
  }
  for (const [ip, w] of wanted) {
    if (!inScopeIp(ip)) continue;
    for (const r of w.rules) if (!seen.has(ruleKey(r))) addRules.push({ ...r, ip, eniId: w.eniId });
  }

  return { links, addRoutes, delRoutes, addRules, delRules, problems, ready, deviceAddresses: [...deviceAddresses] };
}
