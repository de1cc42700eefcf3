import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  EGRESS_PRIORITY,
  INGRESS_PRIORITY,
  MAIN_TABLE,
  RT_PROTOCOL,
  isEmptyPlan,
  type DatapathConfig,
  type DatapathPlan,
  type Desired,
  type KernelLink,
  type KernelRoute,
  type KernelRule,
  type KernelView,
} from '../../src/agent/datapath/model.js';
import { batchLines } from '../../src/agent/datapath/node-routing.js';
import { eniRoutes, planDatapath, podRules, primaryDevices } from '../../src/agent/datapath/plan.js';

/*
 * The datapath planner over generated nodes: links with colliding MACs, slaves and stacked
 * devices, foreign rules and routes at our priorities and in our tables, a primary interface,
 * ENIs without or with shared device indexes, addresses of ENIs that are gone. A small kernel
 * model applies plans the way the kernel does, refusing what it would refuse.
 */

const CONFIG: DatapathConfig = { tableBase: 3000, mtu: 1500 };
const PRIMARY_MAC = '00:16:3e:00:00:00';
const MACS = ['00:16:3e:00:00:01', '00:16:3e:00:00:02', '00:16:3e:00:00:03', '00:16:3e:00:00:04'];
const IPS = ['10.0.0.10', '10.0.0.11', '10.0.0.12', '10.0.0.13', '10.0.0.14', '10.0.1.20'];
const GATEWAYS = ['10.0.0.253', '10.0.1.253'];
const TABLES = [MAIN_TABLE, 3000, 3001, 3002, 3003, 3004, 3300, 100, 2999];

// Ownership as docs/datapath.md states it, written out here rather than taken from the code under test.
const ours = {
  rule: (r: KernelRule) => (r.priority === 20 || r.priority === 111) && r.protocol === 236 && !r.extra,
  route: (r: KernelRoute) => r.table >= 3000 && r.table <= 3255 && r.protocol === 236,
};

/** A node's primary ENI as its pool publishes it (usePrimaryENI), and the node: eth0 with its DHCP'd address and default route. */
const primaryNode = () => ({
  primaryEni: {
    id: 'eni-p',
    mac: PRIMARY_MAC,
    deviceIndex: 0,
    gatewayIP: '192.168.0.253',
    vSwitchCIDR: '192.168.0.0/24',
  },
  node: {
    links: [{ index: 2, name: 'eth0', mac: PRIMARY_MAC, mtu: 9000, up: true, addresses: ['192.168.0.5'] }],
    routes: [
      { table: MAIN_TABLE, type: 1, dst: 'default', gateway: '192.168.0.253', dev: 'eth0', scope: 0, protocol: 3 },
    ],
    rules: [],
  } as KernelView,
});

const key = (x: object) => JSON.stringify(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1)));
const strip = <T extends object>(x: T): T => {
  const { eniId: _e, ip: _i, ...rest } = x as Record<string, unknown>;
  return rest as T;
};

/** The kernel's answer to a plan, in batchLines' order; throws where the kernel would refuse. */
function apply(view: KernelView, plan: DatapathPlan): KernelView {
  const links = view.links.map((l) => ({ ...l }));
  let routes = [...view.routes];
  let rules = [...view.rules];
  const removeOne = <T extends object>(list: T[], x: T, what: string): T[] => {
    const at = list.findIndex((y) => key(y) === key(x));
    if (at < 0) throw new Error(`${what} to delete is not there: ${key(x)}`);
    return [...list.slice(0, at), ...list.slice(at + 1)];
  };
  for (const r of plan.delRules) rules = removeOne(rules, r, 'rule');
  for (const r of plan.delRoutes) routes = removeOne(routes, r, 'route');
  for (const c of plan.links) {
    const l = links.find((x) => x.name === c.dev);
    if (!l) throw new Error(`no device ${c.dev}`);
    if (c.mtu !== undefined) l.mtu = c.mtu;
    if (c.up) l.up = true;
  }
  for (const a of plan.addRoutes) {
    const r = strip(a);
    const dev = links.find((x) => x.name === r.dev);
    if (!dev?.up) throw new Error(`route over ${r.dev}, which is down or missing (ENETDOWN)`);
    if (routes.some((y) => key(y) === key(r))) throw new Error(`route exists (EEXIST): ${key(r)}`);
    routes.push(r);
  }
  for (const a of plan.addRules) {
    const r = strip(a);
    if (rules.some((y) => key(y) === key(r))) throw new Error(`rule exists (EEXIST): ${key(r)}`);
    rules.push(r);
  }
  return { links, routes, rules };
}

const linkArb: fc.Arbitrary<KernelLink> = fc
  .record({
    index: fc.nat(100),
    name: fc.constantFrom('eth1', 'eth2', 'ens5', 'enp0s8', 'bond0', 'vlan7', 'cali1'),
    mac: fc.constantFrom(...MACS, PRIMARY_MAC, '02:42:ac:11:00:02'),
    mtu: fc.constantFrom(1500, 1400, 9000),
    up: fc.boolean(),
    addresses: fc.subarray(IPS, { maxLength: 2 }),
    master: fc.option(fc.constantFrom('bond0', 'br0'), { nil: undefined }),
    parent: fc.option(fc.constantFrom('eth1', 'eth2', 'bond0'), { nil: undefined }),
  })
  .map((l) => {
    const out: KernelLink = { ...l };
    if (out.master === undefined) delete out.master;
    if (out.parent === undefined) delete out.parent;
    return out;
  });

const routeArb: fc.Arbitrary<KernelRoute> = fc
  .record({
    table: fc.constantFrom(...TABLES),
    dst: fc.constantFrom('default', ...GATEWAYS, '10.0.0.0/24'),
    gateway: fc.option(fc.constantFrom(...GATEWAYS, '192.168.0.1'), { nil: undefined }),
    dev: fc.constantFrom('eth0', 'eth1', 'eth2', 'lan1', 'ens5'),
    scope: fc.constantFrom(0, 253),
    protocol: fc.constantFrom(RT_PROTOCOL, RT_PROTOCOL, RT_PROTOCOL, 2, 4, 16),
  })
  .map((r) => {
    const out: KernelRoute = { type: 1, ...r };
    if (out.gateway === undefined) delete out.gateway;
    // A second default route in main (a DHCP'd ENI's, say) comes after the primary interface's.
    if (out.table === MAIN_TABLE && out.dst === 'default') out.metric = 1024;
    return out;
  });

const selectorArb = fc.option(fc.constantFrom(...IPS.map((ip) => `${ip}/32`), '10.0.0.0/24'), { nil: undefined });
const ruleArb: fc.Arbitrary<KernelRule> = fc
  .record({
    priority: fc.constantFrom(INGRESS_PRIORITY, EGRESS_PRIORITY, 500, 5210),
    src: selectorArb,
    dst: selectorArb,
    table: fc.constantFrom(...TABLES),
    protocol: fc.constantFrom(RT_PROTOCOL, RT_PROTOCOL, 2, 4),
    extra: fc.option(fc.constant(true), { nil: undefined, freq: 6 }),
  })
  .map((r) => {
    const out: KernelRule = { ...r };
    for (const k of ['src', 'dst', 'extra'] as const) if (out[k] === undefined) delete out[k];
    return out;
  });

const eniArb = (i: number) =>
  fc.record({
    // Now and then the pool names the primary interface's MAC (a pool edited by hand, a bug elsewhere).
    mac: fc.oneof({ arbitrary: fc.constant(MACS[i]!), weight: 9 }, { arbitrary: fc.constant(PRIMARY_MAC), weight: 1 }),
    deviceIndex: fc.oneof(
      { arbitrary: fc.constant<number | undefined>(i + 1), weight: 8 },
      { arbitrary: fc.constantFrom<number | undefined>(undefined, 0, 1, 1.5), weight: 2 },
    ),
    gatewayIP: fc.oneof(
      { arbitrary: fc.constantFrom(...GATEWAYS), weight: 8 },
      { arbitrary: fc.constant(''), weight: 1 },
    ),
    // Dual-stack now and then: the IPv6 next hop (the primary ENI's goes in table base + 0).
    gatewayIPv6: fc.option(fc.constant('fe80::ecff:ffff:feff:ffff'), { nil: undefined, freq: 3 }),
    // Its device: present (any name, up or down, any MTU, maybe with a DHCP'd address) or not yet.
    device: fc.option(
      fc.record({
        name: fc.constantFrom(`eth${i + 1}`, `lan${i + 1}`),
        up: fc.boolean(),
        mtu: fc.constantFrom(1500, 1400, 9000),
        addresses: fc.subarray(IPS, { maxLength: 1 }),
      }),
      { nil: undefined, freq: 5 },
    ),
  });

const worldArb: fc.Arbitrary<{ desired: Desired; kernel: KernelView }> = fc
  .record({
    enis: fc.tuple(eniArb(0), eniArb(1), eniArb(2), eniArb(3)).chain((all) => fc.nat(4).map((n) => all.slice(0, n))),
    links: fc.uniqueArray(linkArb, { selector: (l) => l.name, maxLength: 3 }),
    routes: fc.array(routeArb, { maxLength: 8 }),
    rules: fc.array(ruleArb, { maxLength: 10 }),
    holders: fc.array(fc.tuple(fc.constantFrom(...IPS), fc.nat(4)), { maxLength: 6 }),
    // Rules a pod address needs, already there once or twice (a restart; another tool's copy).
    present: fc.array(fc.tuple(fc.nat(5), fc.constantFrom(1, 2)), { maxLength: 4 }),
  })
  .map((w) => {
    const enis = w.enis.map((e, i) => ({
      id: `eni-${i + 1}`,
      mac: e.mac,
      vSwitchCIDR: '10.0.0.0/24',
      gatewayIP: e.gatewayIP,
      ...(e.gatewayIPv6 ? { gatewayIPv6: e.gatewayIPv6 } : {}),
      ...(e.deviceIndex === undefined ? {} : { deviceIndex: e.deviceIndex }),
    }));
    const devices: KernelLink[] = w.enis.flatMap((e, i) =>
      e.device ? [{ index: 10 + i, mac: MACS[i]!, ...e.device }] : [],
    );
    const names = new Set(devices.map((d) => d.name));
    const seen = new Set<string>();
    const addresses = w.holders.flatMap(([ip, n]) => {
      if (seen.has(ip)) return [];
      seen.add(ip);
      return [{ ip, eniId: enis[n]?.id ?? 'eni-gone' }];
    });
    // The node's primary interface and its default route; the links and routes the generator made besides.
    const primary: KernelLink = {
      index: 2,
      name: 'eth0',
      mac: PRIMARY_MAC,
      mtu: 1500,
      up: true,
      addresses: ['192.168.0.5'],
    };
    const uniqueRoutes = new Map(w.routes.map((r) => [key(r), r]));
    const present = w.present.flatMap(([n, times]) => {
      const a = addresses[n % Math.max(1, addresses.length)];
      const e = enis.find((x) => x.id === a?.eniId);
      if (!a || e?.deviceIndex === undefined) return [];
      const rules = podRules(a.ip, CONFIG.tableBase + e.deviceIndex);
      return times === 2 ? [...rules, ...rules] : rules;
    });
    return {
      desired: { enis, addresses },
      kernel: {
        links: [primary, ...devices, ...w.links.filter((l) => !names.has(l.name))],
        routes: [
          { table: MAIN_TABLE, type: 1, dst: 'default', gateway: '192.168.0.253', dev: 'eth0', scope: 0, protocol: 16 },
          ...uniqueRoutes.values(),
        ],
        // A rule may be there twice (another tool added it without NLM_F_EXCL); a route may not.
        rules: [...w.rules, ...present],
      },
    };
  });

const RUNS = { numRuns: 400 };

describe('the datapath planner', () => {
  it('touches only what it owns: our rules and our routes, the devices of pool ENIs, never main, never the primary interface', () => {
    fc.assert(
      fc.property(worldArb, ({ desired, kernel }) => {
        const plan = planDatapath(desired, kernel, CONFIG);
        for (const r of plan.delRules) expect(ours.rule(r)).toBe(true);
        for (const r of plan.delRoutes) expect(ours.route(r)).toBe(true);
        for (const r of plan.addRoutes) {
          expect(ours.route(r)).toBe(true);
          expect(r.table).not.toBe(MAIN_TABLE);
        }
        for (const r of plan.addRules) {
          expect(r.protocol).toBe(RT_PROTOCOL);
          if (r.priority === INGRESS_PRIORITY) expect(r.table).toBe(MAIN_TABLE);
          else if (r.table === MAIN_TABLE) {
            // Only a pod of the primary ENI leaves by main: the node's own interface.
            expect(desired.enis.find((e) => e.id === r.eniId)).toMatchObject({ deviceIndex: 0, mac: PRIMARY_MAC });
          } else {
            expect(r.priority).toBe(EGRESS_PRIORITY);
            expect(r.table).toBeGreaterThan(CONFIG.tableBase);
            expect(r.table).toBeLessThanOrEqual(CONFIG.tableBase + 255);
          }
        }
        const primary = primaryDevices(kernel);
        expect(primary).toEqual(new Set(['eth0']));
        const eniMacs = new Set(desired.enis.map((e) => e.mac));
        for (const c of plan.links) {
          const dev = kernel.links.find((l) => l.name === c.dev)!;
          expect(primary.has(c.dev)).toBe(false);
          expect(dev.master).toBeUndefined();
          expect(eniMacs.has(dev.mac)).toBe(true);
        }
        // Through the primary interface only the primary ENI's IPv6 default, in its own table (base + 0).
        for (const r of plan.addRoutes)
          if (primary.has(r.dev!)) expect(r).toMatchObject({ family: 6, table: CONFIG.tableBase, dst: 'default' });
        // Whatever is not ours is still there after the plan.
        const after = apply(kernel, plan);
        for (const r of kernel.rules.filter((x) => !ours.rule(x))) expect(after.rules).toContainEqual(r);
        for (const r of kernel.routes.filter((x) => !ours.route(x))) expect(after.routes).toContainEqual(r);
      }),
      RUNS,
    );
  });

  it('converges in one step and is idempotent: planning again after applying finds nothing to change', () => {
    fc.assert(
      fc.property(worldArb, ({ desired, kernel }) => {
        const after = apply(kernel, planDatapath(desired, kernel, CONFIG));
        const again = planDatapath(desired, after, CONFIG);
        expect(isEmptyPlan(again)).toBe(true);
        expect(batchLines(again)).toEqual([]);
      }),
      RUNS,
    );
  });

  it('gives every address of a ready ENI its two rules once, gives each ready ENI exactly its two routes, and keeps no rule of an address no pod holds', () => {
    fc.assert(
      fc.property(worldArb, ({ desired, kernel }) => {
        const plan = planDatapath(desired, kernel, CONFIG);
        const after = apply(kernel, plan);
        for (const [id, { dev, table }] of Object.entries(plan.ready)) {
          const eni = desired.enis.find((e) => e.id === id)!;
          if (eni.deviceIndex === 0) {
            // The primary ENI: the node's interface and main table, as the node has them.
            expect([dev, table]).toEqual(['eth0', MAIN_TABLE]);
            expect(after.routes.filter((r) => r.table === MAIN_TABLE)).toEqual(
              kernel.routes.filter((r) => r.table === MAIN_TABLE),
            );
            continue;
          }
          const routes = eniRoutes(eni.gatewayIP, dev, table, eni.gatewayIPv6);
          expect(after.routes.filter((r) => r.table === table)).toEqual(expect.arrayContaining(routes));
          expect(after.routes.filter((r) => r.table === table)).toHaveLength(routes.length);
          const link = after.links.find((l) => l.name === dev)!;
          expect([link.up, link.mtu]).toEqual([true, CONFIG.mtu]);
        }
        for (const a of desired.addresses) {
          const ready = plan.ready[a.eniId];
          if (!ready) continue;
          for (const r of podRules(a.ip, ready.table))
            expect(after.rules.filter((x) => key(x) === key(r))).toHaveLength(1);
        }
        const held = new Set(desired.addresses.map((a) => a.ip));
        for (const r of after.rules.filter(ours.rule)) {
          const ip = (r.priority === EGRESS_PRIORITY ? r.src : r.dst)?.replace(/\/32$/, '');
          expect(held.has(ip ?? '')).toBe(true);
        }
        // Tables of our range that no pool ENI numbers hold nothing of ours.
        const claimed = new Set(desired.enis.map((e) => CONFIG.tableBase + (e.deviceIndex ?? -9999)));
        for (const r of after.routes.filter(ours.route)) expect(claimed.has(r.table)).toBe(true);
      }),
      RUNS,
    );
  });

  it('never adds to or removes from a table holding routes it did not add, and says so', () => {
    fc.assert(
      fc.property(worldArb, ({ desired, kernel }) => {
        const plan = planDatapath(desired, kernel, CONFIG);
        const foreign = new Set(kernel.routes.filter((r) => r.protocol !== RT_PROTOCOL).map((r) => r.table));
        for (const r of [...plan.addRoutes, ...plan.delRoutes.filter((x) => !foreign.has(x.table))])
          expect(foreign.has(r.table)).toBe(false);
        for (const e of desired.enis) {
          const table = CONFIG.tableBase + (e.deviceIndex ?? -9999);
          if (foreign.has(table) && Number.isInteger(e.deviceIndex) && e.deviceIndex! >= 1)
            expect(plan.ready[e.id]).toBeUndefined();
        }
      }),
      RUNS,
    );
  });

  it('an ADD plan (one ENI, one fresh address) changes a subset of what a full reconcile would, or reports why not', () => {
    fc.assert(
      fc.property(worldArb, fc.nat(5), ({ desired, kernel }, pick) => {
        fc.pre(desired.addresses.length > 0);
        const a = desired.addresses[pick % desired.addresses.length]!;
        const scoped = planDatapath({ ...desired, fresh: [a.ip] }, kernel, CONFIG, { enis: [a.eniId], ips: [a.ip] });
        const full = planDatapath(desired, kernel, CONFIG);
        const lines = new Set(batchLines(full).map((l) => l.text));
        const problem = scoped.problems.find((p) => p.ip === a.ip);
        if (problem) expect(scoped.addRules.filter((r) => r.ip === a.ip)).toEqual([]);
        else for (const l of batchLines(scoped)) expect(lines.has(l.text)).toBe(true);
        // Nothing outside the ENI and the address.
        for (const r of scoped.addRules) expect(r.ip).toBe(a.ip);
        for (const r of scoped.addRoutes) expect(r.eniId).toBe(a.eniId);
        for (const c of scoped.links) expect(c.eniId).toBe(a.eniId);
      }),
      RUNS,
    );
  });

  it('finds a renamed device by MAC and skips slaves and stacked devices; two candidates are an error naming both', () => {
    const eni = {
      id: 'eni-2',
      mac: '00:16:3e:00:00:02',
      deviceIndex: 1,
      gatewayIP: '10.0.0.253',
      vSwitchCIDR: '10.0.0.0/24',
    };
    const base: KernelView = {
      links: [{ index: 2, name: 'eth0', mac: PRIMARY_MAC, mtu: 1500, up: true, addresses: [] }],
      routes: [
        { table: MAIN_TABLE, type: 1, dst: 'default', gateway: '192.168.0.253', dev: 'eth0', scope: 0, protocol: 3 },
      ],
      rules: [],
    };
    const withLinks = (...links: KernelLink[]) => ({ ...base, links: [...base.links, ...links] });
    const dev = (name: string, more: Partial<KernelLink> = {}): KernelLink => ({
      index: 9,
      name,
      mac: eni.mac,
      mtu: 1500,
      up: false,
      addresses: [],
      ...more,
    });
    const plan = (k: KernelView) => planDatapath({ enis: [eni], addresses: [] }, k, CONFIG);
    expect(plan(withLinks(dev('lan-42'))).ready).toEqual({ 'eni-2': { dev: 'lan-42', table: 3001 } });
    // net_failover: a master and its two lower devices share the MAC; the master is the ENI.
    expect(
      plan(withLinks(dev('eth1'), dev('eth1nsby', { master: 'eth1' }), dev('eth1vf', { master: 'eth1' }))).ready,
    ).toEqual({ 'eni-2': { dev: 'eth1', table: 3001 } });
    expect(plan(withLinks(dev('eth1'), dev('eth1.7', { parent: 'eth1' }))).ready['eni-2']!.dev).toBe('eth1');
    expect(plan(withLinks(dev('eth1'), dev('eth9'))).problems).toEqual([
      expect.objectContaining({
        kind: 'device-ambiguous',
        eniId: 'eni-2',
        message: expect.stringMatching(/eth1, eth9/),
      }),
    ]);
    expect(plan(base).problems).toEqual([
      expect.objectContaining({ kind: 'device-missing', message: expect.stringContaining('00:16:3e:00:00:02') }),
    ]);
    // The device of the node's default route is the primary interface, whatever the pool says.
    expect(plan({ ...base, links: [{ ...base.links[0]!, mac: eni.mac }] }).problems).toEqual([
      expect.objectContaining({ kind: 'primary-device' }),
    ]);
    // A DHCP'd address on the device is the node's: a fresh pod address equal to it is refused, nothing is removed.
    const dhcp = withLinks(dev('eth1', { addresses: ['10.0.0.10'], up: true }));
    const fresh = planDatapath(
      { enis: [eni], addresses: [{ ip: '10.0.0.10', eniId: 'eni-2' }], fresh: ['10.0.0.10'] },
      dhcp,
      CONFIG,
      { enis: ['eni-2'], ips: ['10.0.0.10'] },
    );
    expect(fresh.problems).toEqual([expect.objectContaining({ kind: 'address-on-device', ip: '10.0.0.10' })]);
    expect(fresh.deviceAddresses).toEqual(['10.0.0.10']);
    expect(fresh.addRules).toEqual([]);
  });

  it('routes pods of the primary ENI (usePrimaryENI) by the main table through the node’s own interface, which it never changes', () => {
    const { primaryEni, node } = primaryNode();
    const plan = planDatapath(
      { enis: [primaryEni], addresses: [{ ip: '192.168.0.77', eniId: 'eni-p' }], fresh: ['192.168.0.77'] },
      node,
      CONFIG,
    );
    expect(plan.problems).toEqual([]);
    expect(plan.ready).toEqual({ 'eni-p': { dev: 'eth0', table: MAIN_TABLE } });
    // Its MTU (9000 here) and its routes are the node's.
    expect([plan.links, plan.addRoutes, plan.delRoutes]).toEqual([[], [], []]);
    expect(plan.addRules.map((r) => [r.priority, r.src ?? r.dst, r.table])).toEqual([
      [INGRESS_PRIORITY, '192.168.0.77/32', MAIN_TABLE],
      [EGRESS_PRIORITY, '192.168.0.77/32', MAIN_TABLE],
    ]);
    // The node's own address is never a pod's.
    const own = planDatapath(
      { enis: [primaryEni], addresses: [{ ip: '192.168.0.5', eniId: 'eni-p' }], fresh: ['192.168.0.5'] },
      node,
      CONFIG,
    );
    expect(own.problems).toEqual([expect.objectContaining({ kind: 'address-on-device', ip: '192.168.0.5' })]);
    // A primary ENI whose device does not carry the node's default route: its pods would leave another way.
    const elsewhere: KernelView = {
      ...node,
      links: [...node.links, { index: 3, name: 'eth1', mac: '00:16:3e:00:00:09', mtu: 1500, up: true, addresses: [] }],
      routes: [{ ...node.routes[0]!, dev: 'eth1' }],
    };
    expect(planDatapath({ enis: [primaryEni], addresses: [] }, elsewhere, CONFIG).problems).toEqual([
      expect.objectContaining({ kind: 'primary-device', eniId: 'eni-p' }),
    ]);
  });

  it('routes IPv6 pods of the primary ENI through a table of its own (base + 0), the node’s interface and main table untouched', () => {
    const gatewayIPv6 = 'fe80::ecff:ffff:feff:ffff';
    // A node without an IPv6 address of its own: main has no IPv6 default route.
    const { primaryEni: v4only, node } = primaryNode();
    const primaryEni = { ...v4only, gatewayIPv6 };
    const pod4 = '192.168.0.77';
    const pod6 = '2408:4005:3c0:a200::77';
    const desired = {
      enis: [primaryEni],
      addresses: [
        { ip: pod4, eniId: 'eni-p' },
        { ip: pod6, eniId: 'eni-p' },
      ],
      fresh: [pod4, pod6],
    };
    const plan = planDatapath(desired, node, CONFIG);
    expect(plan.problems).toEqual([]);
    expect(plan.links).toEqual([]);
    expect(plan.addRoutes.map(strip)).toEqual([
      expect.objectContaining({ family: 6, table: 3000, dst: 'default', gateway: gatewayIPv6, dev: 'eth0' }),
    ]);
    expect(plan.addRules.map((r) => [r.priority, r.src ?? r.dst, r.table])).toEqual([
      [INGRESS_PRIORITY, `${pod4}/32`, MAIN_TABLE],
      [EGRESS_PRIORITY, `${pod4}/32`, MAIN_TABLE],
      [INGRESS_PRIORITY, `${pod6}/128`, MAIN_TABLE],
      [EGRESS_PRIORITY, `${pod6}/128`, 3000],
    ]);
    // One step converges: applied, nothing more to do.
    const after = apply(node, plan);
    const again = planDatapath({ ...desired, fresh: [] }, after, CONFIG);
    expect([again.links, again.addRoutes, again.delRoutes, again.addRules, again.delRules]).toEqual([
      [],
      [],
      [],
      [],
      [],
    ]);
    // The pool stops using IPv6 (no gatewayIPv6): the table goes, IPv4 stays as it was.
    const dropped = planDatapath({ enis: [v4only], addresses: [{ ip: pod4, eniId: 'eni-p' }] }, after, CONFIG);
    expect(dropped.delRoutes).toEqual([expect.objectContaining({ family: 6, table: 3000 })]);
    // A route of someone else's in table base: the primary ENI is refused, naming the table.
    const foreign: KernelView = {
      ...node,
      routes: [...node.routes, { table: 3000, type: 1, dst: '10.9.0.0/16', dev: 'eth0', scope: 253, protocol: 3 }],
    };
    const refused = planDatapath(desired, foreign, CONFIG);
    // Only its IPv6 pods are refused: the IPv4 ones leave by main.
    expect(refused.problems.map((p) => [p.kind, p.ip])).toEqual([
      ['foreign-routes', undefined],
      ['foreign-routes', pod6],
    ]);
    expect(refused.problems[0]!.message).toMatch(/route table 3000 .* choose another --route-table-base/);
    expect(refused.addRoutes).toEqual([]);
    expect(refused.addRules.map((r) => r.src ?? r.dst)).toEqual([`${pod4}/32`, `${pod4}/32`]);
  });
});
