import { createHash } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import { parseCidr4 } from '../ecs/addresses.js';

/**
 * The MAC every port of the VPC answers with: the one ECS guests see for their gateway (the
 * VPC's virtual switch answers ARP for the gateway with it).
 */
export const GATEWAY_MAC = 'ee:ff:ff:ff:ff:ff';
/** What an ENI carries unless its instance type has jumbo frames. */
export const DEFAULT_MTU = 1500;
/** What a freshly hot-plugged Ethernet device starts with, whatever the VPC carries. */
export const FRESH_DEVICE_MTU = 1500;
/**
 * The VPC router's IPv6 address on every port: the link-local address of GATEWAY_MAC (EUI-64),
 * which the port's kernel gives itself. No router advertisement is sent: a guest is told the
 * next hop (eni-ipam publishes it as each ENI's gatewayIPv6).
 */
export const GATEWAY_IPV6 = 'fe80::ecff:ffff:feff:ffff';
/** The EUI-64 link-local address of a MAC (`00:16:3e:00:00:05` -> `fe80::216:3eff:fe00:5`). */
export function linkLocalOf(mac: string): string {
  const b = mac.split(':').map((x) => parseInt(x, 16));
  const eui = [b[0]! ^ 2, b[1]!, b[2]!, 0xff, 0xfe, b[3]!, b[4]!, b[5]!];
  return ipaddr.fromByteArray([0xfe, 0x80, 0, 0, 0, 0, 0, 0, ...eui]).toString();
}

/** The port key (and name) of the host outside the cluster. */
export const HOST_KEY = 'vpc-host';

/** The ECS world as the VPC reads it: plain data. */
export interface WorldView {
  enis: Array<{
    id: string;
    mac: string;
    type: 'Primary' | 'Secondary';
    status: string;
    vpcId: string;
    vSwitchId: string;
    primaryIp: string;
    secondaryIps: string[];
    ipv4Prefixes: string[];
    ipv6: string[];
    ipv6Prefixes: string[];
    instanceId?: string;
    deviceIndex?: number;
  }>;
  vSwitches: Array<{ id: string; vpcId: string; cidr: string; ipv6Cidr?: string }>;
  instances: Array<{ id: string; instanceType: string; vpcId: string }>;
  instanceTypes: Array<{ id: string; mtu?: number }>;
}

/** An emulated instance that runs in a network namespace of its own (a node). */
export interface VpcNode {
  instanceId: string;
  netns: string;
  /**
   * The device of the instance's primary ENI, made by the VPC and configured as the image's DHCP
   * client would (its address with the vSwitch's mask, up, a default route via the gateway);
   * `null`: the node's primary interface is not on this VPC (the primary ENI's addresses are
   * then delivered nowhere). Default `eth0`.
   */
  primaryDevice?: string | null;
}

/** What a hot-plugged ENI's device is called: a name, or a template with `%d` the kernel fills (`eth%d`). */
export type DeviceNamer = (eni: { id: string; mac: string; instanceId: string; deviceIndex?: number }) => string;

/** The host outside the cluster, where it sits (resolved at start). */
export interface HostSpec {
  netns: string;
  ip: string;
  /** Its IPv6 address, where its vSwitch has an IPv6 CIDR. */
  ipv6?: string;
  vSwitchId: string;
  mac: string;
  mtu: number;
}

/** One port of the VPC: a veth whose VPC end is `name` and whose other end is the ENI's device. */
export interface Port {
  /** What the port stands for: an ENI id, or `vpc-host`. */
  key: string;
  name: string;
  /** The port's ifalias, `<key>@<netns>`: a port whose alias differs (an ENI moved to another node) is remade. */
  alias: string;
  netns: string;
  /** The device's name at creation (a template with `%d` lets the kernel pick, as on hot-plug). */
  peerName: string;
  peerMac: string;
  peerMtu: number;
  /** What the VPC carries for this ENI: the port's MTU and the largest packet it takes from it. */
  mtu: number;
  /** The vSwitch's gateway, an address of the port (answered by ARP and ping). */
  gateway: string;
  /** Addresses delivered here, each with a permanent neighbour entry for the ENI's MAC. */
  addresses: string[];
  /** IPv4 prefixes (/28) delivered here, through the ENI's primary address. */
  prefixes: string[];
  primaryIp: string;
  /** What the port accepts as source (anything else is dropped: the VPC's anti-spoofing). */
  sources: string[];
  /** IPv6 addresses delivered here (neighbour entries for the ENI's MAC); the only IPv6 sources it accepts beside link-local ones. */
  addresses6: string[];
  /**
   * IPv6 /80 prefixes delivered here: routed via the ENI's EUI-64 link-local address (`linkLocalOf`
   * its MAC), itself a permanent neighbour entry for the MAC; every address of them is a source it accepts.
   */
  prefixes6: string[];
  /** The device configured at creation as the image's DHCP would (primary ENIs, the vpc-host). */
  configure?: { address: string; gateway: string; address6?: string };
}

export interface PlanInput {
  world: WorldView;
  vpcId: string;
  nodes: VpcNode[];
  host?: HostSpec;
  now: number;
  deviceDelayMs: number;
  /** When each ENI was first seen InUse on its instance (`eni@instance`), from the last plan. */
  inUseSince: ReadonlyMap<string, number>;
  deviceName: DeviceNamer;
}

const toIp = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

/** A vSwitch's gateway: the third-from-last address of its CIDR (`.253` on a /24). */
export function gatewayOf(cidr: string): string {
  const { base, bits } = parseCidr4(cidr);
  return toIp(base + 2 ** (32 - bits) - 3);
}

/** The highest address of `cidr` below its gateway for which `taken` is false, or undefined. */
export function highestFree(cidr: string, taken: (ip: string) => boolean): string | undefined {
  const { base, bits } = parseCidr4(cidr);
  for (let n = base + 2 ** (32 - bits) - 4; n > base; n--) if (!taken(toIp(n))) return toIp(n);
  return undefined;
}

/** The VPC-side name of a port: short (15 bytes, the kernel's limit) and the same for the same key. */
export function portName(key: string): string {
  if (key === HOST_KEY) return HOST_KEY;
  return `v${createHash('sha256').update(key).digest('hex').slice(0, 14)}`;
}

/**
 * The ports the VPC should have now: one per ENI that is InUse on a node of this VPC (a
 * secondary one `deviceDelayMs` after it was first seen InUse; a primary one only when the node
 * names its device), and the vpc-host's.
 */
export function planPorts(input: PlanInput): { ports: Port[]; inUseSince: Map<string, number> } {
  const { world, vpcId, now } = input;
  const vSwitches = new Map(world.vSwitches.map((v) => [v.id, v]));
  const mtuOf = new Map(world.instanceTypes.map((t) => [t.id, t.mtu ?? DEFAULT_MTU]));
  const inUseSince = new Map<string, number>();
  const ports: Port[] = [];
  for (const node of input.nodes) {
    const instance = world.instances.find((i) => i.id === node.instanceId);
    if (!instance || instance.vpcId !== vpcId) continue;
    const mtu = mtuOf.get(instance.instanceType) ?? DEFAULT_MTU;
    for (const eni of world.enis) {
      if (eni.instanceId !== instance.id || eni.status !== 'InUse' || eni.vpcId !== vpcId) continue;
      const vsw = vSwitches.get(eni.vSwitchId);
      if (!vsw) continue;
      const primaryDevice = node.primaryDevice === undefined ? 'eth0' : node.primaryDevice;
      if (eni.type === 'Primary' && primaryDevice === null) continue;
      if (eni.type === 'Secondary') {
        const key = `${eni.id}@${instance.id}`;
        const since = input.inUseSince.get(key) ?? now;
        inUseSince.set(key, since);
        if (now < since + input.deviceDelayMs) continue;
      }
      const gateway = gatewayOf(vsw.cidr);
      const addresses = [eni.primaryIp, ...eni.secondaryIps];
      ports.push({
        key: eni.id,
        name: portName(eni.id),
        alias: `${eni.id}@${node.netns}`,
        netns: node.netns,
        peerName:
          eni.type === 'Primary'
            ? primaryDevice!
            : input.deviceName({ id: eni.id, mac: eni.mac, instanceId: instance.id, deviceIndex: eni.deviceIndex }),
        peerMac: eni.mac,
        peerMtu: eni.type === 'Primary' ? mtu : FRESH_DEVICE_MTU,
        mtu,
        gateway,
        addresses,
        prefixes: [...eni.ipv4Prefixes],
        primaryIp: eni.primaryIp,
        sources: [...addresses.map((a) => `${a}/32`), ...eni.ipv4Prefixes],
        // An ENI's IPv6 addresses exist only where its vSwitch has an IPv6 CIDR (ECS refuses them elsewhere).
        addresses6: vsw.ipv6Cidr ? [...eni.ipv6] : [],
        prefixes6: vsw.ipv6Cidr ? [...eni.ipv6Prefixes] : [],
        configure:
          eni.type === 'Primary' ? { address: `${eni.primaryIp}/${parseCidr4(vsw.cidr).bits}`, gateway } : undefined,
      });
    }
  }
  const host = input.host;
  const hostVsw = host && vSwitches.get(host.vSwitchId);
  if (host && hostVsw) {
    const gateway = gatewayOf(hostVsw.cidr);
    ports.push({
      key: HOST_KEY,
      name: portName(HOST_KEY),
      alias: `${HOST_KEY}@${host.netns}`,
      netns: host.netns,
      peerName: 'eth0',
      peerMac: host.mac,
      peerMtu: host.mtu,
      mtu: host.mtu,
      gateway,
      addresses: [host.ip],
      prefixes: [],
      primaryIp: host.ip,
      sources: [`${host.ip}/32`],
      addresses6: host.ipv6 ? [host.ipv6] : [],
      prefixes6: [],
      configure: {
        address: `${host.ip}/${parseCidr4(hostVsw.cidr).bits}`,
        gateway,
        ...(host.ipv6 ? { address6: host.ipv6 } : {}),
      },
    });
  }
  ports.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { ports, inUseSince };
}
