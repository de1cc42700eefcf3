/**
 * The VPC in network namespaces: a strict emulation of the VPC's data plane, driven by the ECS
 * emulator's world, for anything that runs nodes in namespaces (the datapath test, `emulate
 * cluster`). Needs root, iproute2 and iptables.
 *
 * ```ts
 * const vpc = await startVpc({ world: ecs.world, nodes: [{ instanceId: 'i-demo-01', netns: 'node1' }] });
 * vpc.vpcHost!.ip     // a host outside the cluster: ping, TCP echo :7, HTTP :80, iperf3 -s :5201
 * vpc.portOf(eniId)   // the ENI's port in `vpc.netns`: `ip netns exec <vpc.netns> tcpdump -i <port>`
 * await vpc.drops(eniId) // what the VPC dropped from that ENI: { spoofed, foreignMac, tooBig }
 * await vpc.sync()    // reconcile now (it does by itself every `pollMs`)
 * await vpc.stop()    // removes every namespace, port and device it made
 * ```
 * `vpcUnavailable()` says why this machine cannot run it (for a test's skip). Each node's namespace
 * must exist before `startVpc`; with the default `primaryDevice` it must not hold an `eth0` yet.
 *
 * What it does, as a real VPC does:
 * - An ENI `InUse` on a node's instance appears in the node's namespace as a device with the
 *   ENI's MAC, as a hot-plugged NIC: DOWN, no address, MTU 1500, named as the kernel names it
 *   (`eth%d`: the lowest free ethN; `deviceName` gives another name, e.g. `enp0s5`), after
 *   `deviceDelayMs`. It goes when the ENI leaves `InUse` (detach, release of the instance). The
 *   device is one end of a veth; the other end, the ENI's port, is in the VPC's namespace.
 * - Each private address of the ENI (primary and secondary, and its /28 prefixes) is delivered to
 *   that port only, to the ENI's MAC (a permanent neighbour entry: the VPC never ARPs for pod
 *   addresses); what no ENI holds is dropped. Assigns and unassigns move addresses.
 * - Every port answers ARP and ping for its vSwitch's gateway (the CIDR's third-from-last address,
 *   `.253` on a /24) with MAC `ee:ff:ff:ff:ff:ff`, and ARP for other VPC addresses (proxy ARP, for
 *   a guest that puts its vSwitch's CIDR on-link); it routes between all vSwitches of the VPC.
 * - Anti-spoofing: what a port sends from an address that is not one of its ENI's, or from a MAC
 *   not the ENI's, is dropped (iptables in the VPC's namespace, per port; see diff.ts). So is a
 *   packet larger than the ENI's MTU (the instance type's: 1500, or 8500 with jumbo frames).
 *   Reverse-path filtering was not chosen: it would also drop the node's ARP for the gateway when
 *   its sender address is not one of the ENI's (a device without an address of its own asks from
 *   another one), which a real VPC answers.
 * - Level-triggered: the world is read every `pollMs`, and before the ECS API answers a call that
 *   changes it (an assigned address is delivered from the answer on, as in a real VPC); the kernel
 *   is read and corrected whenever the plan changes and every `resyncMs` (a port, route or rule
 *   removed behind its back returns).
 * The primary ENI is made as `primaryDevice` (default `eth0`), configured as the image's DHCP
 * would; `primaryDevice: null` leaves the node's own primary interface alone (the emulated cluster
 * keeps its nodes' eth0 on its bridge).
 * IPv6, in vSwitches with an IPv6 CIDR: each IPv6 address of an ENI is delivered to its port only
 * (a /128 route and a permanent neighbour entry), and so is every address of its /80 prefixes (a
 * route via the ENI's EUI-64 link-local address, itself a permanent neighbour entry); the router is every port's link-local address
 * `fe80::ecff:ffff:feff:ffff` (EUI-64 of the gateway MAC; no router advertisements: a guest is
 * told its next hop); what a port sends from an IPv6 address not its ENI's (nor in its prefixes) is dropped
 * (ip6tables; link-local sources pass for neighbour discovery, and are never forwarded). The
 * vpc-host gets an IPv6 address of its vSwitch when that has an IPv6 CIDR.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../src/observability/logger.js';
import { silentLogger } from '../../src/observability/logger.js';
import { namespacesUnavailable } from '../cluster/runtime/network.js';
import type { World } from '../ecs/world.js';
import { diffVpc } from './diff.js';
import { exec, execOk } from './exec.js';
import { choosePlace, startHostServices, type VpcHost } from './host.js';
import { applyChanges, iptablesSave, parseIptablesSave, readKernel, type ApplyError } from './kernel.js';
import {
  DEFAULT_MTU,
  gatewayOf,
  planPorts,
  portName,
  type DeviceNamer,
  type HostSpec,
  type Port,
  type VpcNode,
  type WorldView,
} from './plan.js';

export type { VpcHost } from './host.js';
export type { DeviceNamer, VpcNode } from './plan.js';
export { GATEWAY_MAC, gatewayOf } from './plan.js';

export interface VpcOptions {
  world: World;
  nodes: VpcNode[];
  /** The VPC emulated (default: the first node's instance's). */
  vpcId?: string;
  /** Namespace names: `<prefix>vpc` (the VPC's router) and `<prefix>host` (the vpc-host). */
  prefix?: string;
  /** What a hot-plugged ENI's device is called (default `eth%d`: what the kernel names it). */
  deviceName?: DeviceNamer;
  /** A secondary ENI's device appears this long (real milliseconds) after the ENI is InUse. */
  deviceDelayMs?: number;
  /** How often the world is read (default 150 ms). */
  pollMs?: number;
  /** How often the kernel is read and corrected even when the world did not change (default 2 s). */
  resyncMs?: number;
  /** The vpc-host: where (default: see choosePlace) and its MTU (default 1500); `false`: none. */
  vpcHost?: { vSwitchId?: string; ip?: string; mtu?: 1500 | 8500 } | false;
  logger?: Logger;
}

export interface Vpc {
  vpcId: string;
  /** The VPC's namespace: every ENI's port is there. */
  netns: string;
  /** The nodes it plugs ENIs into. */
  nodes: readonly VpcNode[];
  vpcHost?: VpcHost;
  /** The port of an ENI (or of `vpc-host`) in `netns`, while its device exists. */
  portOf(eniId: string): string | undefined;
  /** Packets the VPC dropped from an ENI since its port was made, by reason. */
  drops(eniId: string): Promise<{ spoofed: number; foreignMac: number; tooBig: number; spoofed6: number }>;
  /** Reconciles now, and resolves when the kernel holds what the world says. */
  sync(): Promise<void>;
  stop(): Promise<void>;
}

/** Why this machine cannot run the VPC emulation, or undefined when it can. */
export function vpcUnavailable(): string | undefined {
  return namespacesUnavailable(
    ['ip', 'ss', 'iptables-restore', 'iptables-save', 'ip6tables-restore', 'ip6tables-save'],
    'iproute2, iptables',
  );
}

const HOST_MAC = '00:16:3e:ff:ff:fe';

function viewOf(world: World): WorldView {
  world.advance();
  return {
    enis: [...world.enis.values()].map((e) => ({
      id: e.id,
      mac: e.mac,
      type: e.type,
      status: e.status,
      vpcId: e.vpcId,
      vSwitchId: e.vSwitchId,
      primaryIp: e.primaryIp,
      secondaryIps: [...e.secondaryIps],
      ipv4Prefixes: [...e.ipv4Prefixes],
      ipv6: [...e.ipv6],
      ipv6Prefixes: [...e.ipv6Prefixes],
      instanceId: e.instanceId,
      deviceIndex: e.deviceIndex,
    })),
    vSwitches: [...world.vSwitches.values()].map((v) => ({
      id: v.id,
      vpcId: v.vpcId,
      cidr: v.cidr,
      ...(v.ipv6Cidr ? { ipv6Cidr: v.ipv6Cidr } : {}),
    })),
    instances: [...world.instances.values()].map((i) => ({ id: i.id, instanceType: i.instanceType, vpcId: i.vpcId })),
    instanceTypes: [...world.instanceTypes.values()].map((t) => ({ id: t.id, mtu: t.mtu })),
  };
}

const netnsExists = (name: string) => existsSync(`/run/netns/${name}`);

async function checkNodes(world: World, nodes: VpcNode[]): Promise<void> {
  for (const n of nodes) {
    if (!world.instances.has(n.instanceId))
      throw new Error(`VPC node ${n.instanceId}: the ECS world has no such instance`);
    if (!netnsExists(n.netns))
      throw new Error(`VPC node ${n.instanceId}: network namespace ${n.netns} does not exist (create it first)`);
    const primary = n.primaryDevice === undefined ? 'eth0' : n.primaryDevice;
    if (primary === null) continue;
    const r = await exec('ip', ['-n', n.netns, 'link', 'show', 'dev', primary]);
    if (r.code === 0)
      throw new Error(
        `VPC node ${n.instanceId}: namespace ${n.netns} already has a device ${primary}; the VPC makes the ` +
          'primary ENI’s device itself (pass primaryDevice: null when that device is not on this VPC)',
      );
  }
}

/** The VPC's router namespace: forwarding of both families, the gateway's ARP answers, no ICMP redirects. */
const ROUTER_SYSCTLS = [
  'net.ipv4.ip_forward=1',
  // The gateway is answered only on ports of its vSwitch (each holds its own gateway's address).
  'net.ipv4.conf.all.arp_ignore=1',
  'net.ipv4.conf.default.arp_ignore=1',
  'net.ipv4.conf.default.proxy_arp=1',
  // Anti-spoofing is iptables' (exact); reverse-path filtering would also eat the node's ARP.
  'net.ipv4.conf.all.rp_filter=0',
  'net.ipv4.conf.default.rp_filter=0',
  'net.ipv4.conf.all.send_redirects=0',
  'net.ipv4.conf.default.send_redirects=0',
  'net.ipv6.conf.all.disable_ipv6=0',
  'net.ipv6.conf.default.disable_ipv6=0',
  'net.ipv6.conf.all.forwarding=1',
  // Every port holds the same link-local address (the router's): no duplicate detection, at once.
  'net.ipv6.conf.default.accept_dad=0',
  'net.ipv6.conf.all.accept_dad=0',
  'net.ipv6.conf.default.accept_ra=0',
  'net.ipv6.conf.default.router_solicitations=0',
];

/** Root and the tools, checked without the namespace probe of vpcUnavailable (several VPCs may start at once). */
function cannotStart(): string | undefined {
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  for (const tool of ['ip', 'ss', 'iptables-restore', 'iptables-save', 'ip6tables-restore', 'ip6tables-save'])
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      return `${tool} is not installed (Debian packages iproute2, iptables)`;
    }
  return undefined;
}

export async function startVpc(o: VpcOptions): Promise<Vpc> {
  const why = cannotStart();
  if (why) throw new Error(`cannot run the VPC emulation: ${why}`);
  const { world } = o;
  const logger = (o.logger ?? silentLogger()).child({ component: 'vpc' });
  await checkNodes(world, o.nodes);
  const first = o.nodes[0] && world.instances.get(o.nodes[0].instanceId);
  const vpcId = o.vpcId ?? first?.vpcId ?? [...world.vpcs.keys()][0];
  if (!vpcId || !world.vpcs.has(vpcId)) throw new Error(`VPC ${vpcId ?? '(none)'} is not in the ECS world`);
  const prefix = o.prefix ?? `eniv${process.pid % 100000}${randomBytes(2).toString('hex')}-`;
  const netns = `${prefix}vpc`;
  const hostNs = `${prefix}host`;
  const pollMs = o.pollMs ?? 150;
  const resyncMs = o.resyncMs ?? 2000;
  const deviceName = o.deviceName ?? (() => 'eth%d');

  // Left by a run of the same prefix that did not stop: ours by name.
  for (const ns of [netns, hostNs]) if (netnsExists(ns)) await exec('ip', ['netns', 'del', ns]);
  await execOk('ip', ['netns', 'add', netns]);
  let host: HostSpec | undefined;
  let reserved: { vSwitchId: string; ip: string; ipv6?: string } | undefined;
  let services: Awaited<ReturnType<typeof startHostServices>> | undefined;
  const cleanUp = async () => {
    await services?.stop();
    // Ports first, so that every device they made in a node's namespace is gone when stop resolves
    // (a namespace's own clean-up runs later, in the kernel's time).
    const links = await exec('ip', ['-n', netns, '-j', 'link', 'show']);
    const names = links.code === 0 ? (JSON.parse(links.stdout || '[]') as Array<{ ifname: string }>) : [];
    const del = names.filter((l) => l.ifname !== 'lo').map((l) => `link del ${l.ifname}`);
    if (del.length) await exec('ip', ['-n', netns, '-force', '-batch', '-'], del.join('\n') + '\n');
    await exec('ip', ['netns', 'del', netns]);
    if (netnsExists(hostNs)) await exec('ip', ['netns', 'del', hostNs]);
    if (reserved) world.vSwitches.get(reserved.vSwitchId)?.pool.release(reserved.ip);
    if (reserved?.ipv6) world.vSwitches.get(reserved.vSwitchId)?.pool6?.release(reserved.ipv6);
  };
  try {
    await execOk('ip', ['netns', 'exec', netns, 'sysctl', '-qw', ...ROUTER_SYSCTLS]);
    await execOk('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    if (o.vpcHost !== false) {
      const place = choosePlace(
        viewOf(world),
        vpcId,
        (vsw, ip) => world.vSwitches.get(vsw)!.pool.isUsed(ip),
        o.vpcHost ?? {},
      );
      const pool = world.vSwitches.get(place.vSwitchId)!.pool;
      // The host holds its address as any VPC resource does: the ECS emulator never hands it out.
      if (!pool.takeSpecific(place.ip))
        throw new Error(`vpc-host: ${place.ip} is not a free address of ${place.vSwitchId}; pick another vpcHost.ip`);
      // An IPv6 address too where the vSwitch has IPv6, held the same way.
      const ipv6 = world.vSwitches.get(place.vSwitchId)!.pool6?.take(1)[0];
      reserved = { ...place, ...(ipv6 ? { ipv6 } : {}) };
      await execOk('ip', ['netns', 'add', hostNs]);
      await execOk('ip', ['-n', hostNs, 'link', 'set', 'lo', 'up']);
      host = { netns: hostNs, ...reserved, mac: HOST_MAC, mtu: o.vpcHost?.mtu ?? DEFAULT_MTU };
      services = await startHostServices(hostNs, place.ip);
    }
  } catch (e) {
    await cleanUp();
    throw e;
  }

  let inUseSince = new Map<string, number>();
  let current = new Map<string, Port>();
  let appliedKey = '';
  let lastResync = 0;
  let failures = 0;
  let retryAt = 0;
  let lastProblem = '';

  const report = (errors: ApplyError[]) => {
    const problem = errors.map((e) => `${e.netns}: ${e.command}: ${e.error}`).join('; ');
    if (problem === lastProblem) return;
    lastProblem = problem;
    for (const e of errors)
      logger.warn({ netns: e.netns, command: e.command, err: e.error }, 'VPC change failed; retrying');
  };

  const round = async (force: boolean) => {
    const now = Date.now();
    const plan = planPorts({
      world: viewOf(world),
      vpcId,
      nodes: o.nodes,
      host,
      now,
      deviceDelayMs: o.deviceDelayMs ?? 0,
      inUseSince,
      deviceName,
    });
    inUseSince = plan.inUseSince;
    const key = JSON.stringify(plan.ports);
    if (!force && (now < retryAt || (key === appliedKey && now - lastResync < resyncMs))) return;
    current = new Map(plan.ports.map((p) => [p.key, p]));
    const changes = diffVpc(plan.ports, await readKernel(netns));
    const errors = await applyChanges(netns, changes);
    lastResync = now;
    for (const p of changes.made)
      logger.info({ eni: p.key, netns: p.netns, port: p.name, mac: p.peerMac }, 'device plugged');
    for (const name of changes.removed) logger.info({ port: name }, 'device unplugged');
    if (errors.length) {
      appliedKey = '';
      failures++;
      retryAt = now + Math.min(5000, pollMs * 2 ** failures);
      report(errors);
      return;
    }
    appliedKey = key;
    failures = 0;
    retryAt = 0;
    if (lastProblem) logger.info('VPC changes apply again');
    lastProblem = '';
  };

  // One round at a time: the loop's and sync()'s.
  let chain: Promise<void> = Promise.resolve();
  const serial = (force: boolean) => {
    const next = chain.then(() => round(force));
    chain = next.catch((e) => {
      logger.warn({ err: (e as Error).message }, 'VPC round failed; retrying');
    });
    return next;
  };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const loop = () => {
    timer = setTimeout(() => {
      void serial(false)
        .catch(() => undefined)
        .finally(() => {
          if (!stopped) loop();
        });
    }, pollMs);
  };

  try {
    await serial(true);
  } catch (e) {
    await cleanUp();
    throw e;
  }
  loop();
  // An assign or unassign is in effect when the ECS API answers it (see World.dataPlanes).
  const inEffect = () => serial(false).catch(() => undefined);
  world.dataPlanes.add(inEffect);

  return {
    vpcId,
    netns,
    nodes: o.nodes,
    vpcHost: host && {
      netns: host.netns,
      ip: host.ip,
      ...(host.ipv6 ? { ipv6: host.ipv6 } : {}),
      vSwitchId: host.vSwitchId,
      gateway: gatewayOf(world.vSwitches.get(host.vSwitchId)!.cidr),
      mac: host.mac,
      mtu: host.mtu,
      ports: services!.ports,
    },
    portOf: (key) => current.get(key)?.name,
    drops: async (eniId) => {
      const chain = portName(eniId);
      const packets = parseIptablesSave(await iptablesSave(netns, true)).packets.get(chain);
      if (!packets) throw new Error(`the VPC has no port for ENI ${eniId} (is it InUse on a node?)`);
      const packets6 = parseIptablesSave(await iptablesSave(netns, true, true)).packets.get(chain) ?? [];
      return {
        tooBig: (packets[0] ?? 0) + (packets6[0] ?? 0),
        foreignMac: (packets[1] ?? 0) + (packets6[1] ?? 0),
        spoofed: packets[3] ?? 0,
        spoofed6: packets6[3] ?? 0,
      };
    },
    sync: async () => {
      await serial(true);
      if (appliedKey === '') throw new Error(`the VPC could not apply every change: ${lastProblem}`);
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      world.dataPlanes.delete(inEffect);
      clearTimeout(timer);
      await chain;
      await cleanUp();
    },
  };
}
