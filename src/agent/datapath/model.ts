/**
 * What the node's datapath is made of, as plain data: the pool's ENIs and the pods' addresses
 * (what the kernel should hold), the kernel's links, routes and rules (what it holds), and the
 * numbers that say which of them are eni-ipam's.
 */

/**
 * Priority of the ingress rule `to <pod-ip>/32 lookup main`: before the egress rules, so that
 * traffic to a pod of this node (from another pod, or from the node) goes to its veth through
 * `main` and not out of an ENI; after `local` (0). Cilium's ENI datapath uses the same number.
 */
export const INGRESS_PRIORITY = 20;
/**
 * Priority of the egress rule `from <pod-ip>/32 lookup <ENI table>`: a pod's packets leave
 * through the ENI that owns their source address (the VPC drops them anywhere else). Before
 * `main` (32766); 21 to 110 are left to rules that must come between. Cilium uses 111 too.
 */
export const EGRESS_PRIORITY = 111;
/**
 * The routing protocol number eni-ipam writes on every rule and route it adds (`protocol 236`),
 * so that ownership is exact: a rule is ours only at one of our priorities AND with this
 * protocol, a route only in a table of our range AND with it. 236 is unassigned in
 * iproute2's rt_protos and the kernel's rtnetlink.h. Rule protocols need Linux 4.17 or later.
 */
export const RT_PROTOCOL = 236;
/**
 * Table of the ENI with device index N: base + N. 3000 is clear of the tables distributions
 * and other CNIs use (253 to 255; Cilium 10+N, 200 to 202, 300+N, 2004, 2005; the AWS VPC CNI
 * 1+N; Calico 1 to 250; kube-router 77 to 79; Tailscale 52; wg-quick 51820).
 */
export const DEFAULT_TABLE_BASE = 3000;
/** Device indexes above this are not numbered (an ECS instance has far fewer ENIs). */
export const MAX_DEVICE_INDEX = 255;
/** The kernel's `main` table. */
export const MAIN_TABLE = 254;
/** The metric the kernel gives an IPv6 route added without one (IPv4's is 0). */
export const IPV6_DEFAULT_METRIC = 1024;
/** rtnetlink's route types and scopes, as `ip -N` prints them. */
export const RTN_UNICAST = 1;
export const SCOPE_UNIVERSE = 0;
export const SCOPE_LINK = 253;

export interface DatapathConfig {
  /** The ENI with device index N gets table `tableBase + N`; tables base+1 .. base+MAX_DEVICE_INDEX are ours. */
  tableBase: number;
  /** The MTU set on every ENI's device. */
  mtu: number;
}

/** An InUse ENI of the pool, as its status publishes it. */
export interface PoolEni {
  id: string;
  mac: string;
  /** The ECS attachment's DeviceIndex (0 is the primary ENI). */
  deviceIndex?: number;
  gatewayIP: string;
  vSwitchCIDR: string;
  /** Dual-stack: the IPv6 next hop of its table's second default route (the VPC router's link-local address). */
  gatewayIPv6?: string;
  /** The ENI's own address: the image's network scripts may configure it on the device (DHCP) at any time. */
  primaryIP?: string;
}

/** An address a pod holds, and the ENI it belongs to. */
export interface PodAddress {
  ip: string;
  eniId: string;
}

/** What the kernel should hold: the pool's InUse ENIs and the addresses pods hold. */
export interface Desired {
  enis: PoolEni[];
  addresses: PodAddress[];
  /**
   * Addresses being handed out now (an ADD): their rules are set only when their ENI is ready,
   * and a problem is reported otherwise. Other addresses keep their rules whatever happens.
   */
  fresh?: string[];
}

export interface KernelLink {
  index: number;
  name: string;
  /** Lower case. */
  mac: string;
  mtu: number;
  /** Administratively up (IFF_UP). */
  up: boolean;
  /** Enslaved to this device (a bond, bridge or net_failover master). */
  master?: string;
  /** Stacked on this device of the same namespace (a VLAN, ipvlan, or a veth's peer). */
  parent?: string;
  /** Its IPv4 addresses, without prefix length. */
  addresses: string[];
}

export interface KernelRoute {
  /** 6 for an IPv6 route (read with `ip -6`); IPv4 when absent. */
  family?: 6;
  table: number;
  type: number;
  /** `default`, an address (a /32), or a CIDR, as ip prints it. */
  dst: string;
  gateway?: string;
  dev?: string;
  scope: number;
  protocol: number;
  metric?: number;
  /** A multipath route (`nexthops`): never one of the two routes we want. */
  multipath?: boolean;
}

export interface KernelRule {
  /** 6 for an IPv6 rule; IPv4 when absent. */
  family?: 6;
  priority: number;
  /** A CIDR, or undefined for `from all`. */
  src?: string;
  dst?: string;
  /** Undefined for a rule whose action is not a table lookup. */
  table?: number;
  protocol: number;
  /** Selectors we do not model (fwmark, iif, not, ...): such a rule is never the one we want. */
  extra?: boolean;
}

export interface KernelView {
  links: KernelLink[];
  routes: KernelRoute[];
  rules: KernelRule[];
}

/** Why an ENI or an address cannot be set up now. */
export type ProblemKind =
  | 'device-missing'
  | 'device-ambiguous'
  | 'primary-device'
  | 'no-device-index'
  | 'duplicate-device-index'
  | 'no-gateway'
  | 'foreign-routes'
  | 'not-in-pool'
  | 'address-on-device';

export interface Problem {
  kind: ProblemKind;
  eniId: string;
  /** For a problem of one address. */
  ip?: string;
  message: string;
}

export interface LinkChange {
  eniId: string;
  dev: string;
  mtu?: number;
  up?: boolean;
}

/** A route or rule to add, with what it serves (for errors, logs and rollback). */
export type RouteAdd = KernelRoute & { eniId: string };
export type RuleAdd = KernelRule & { ip: string; eniId: string };

export interface DatapathPlan {
  links: LinkChange[];
  addRoutes: RouteAdd[];
  delRoutes: KernelRoute[];
  addRules: RuleAdd[];
  delRules: KernelRule[];
  problems: Problem[];
  /** ENI id -> its device and table, for the ENIs that are ready (device found, nothing in the way). */
  ready: Record<string, { dev: string; table: number }>;
  /** Addresses on the ENIs' devices (the image's network scripts put them there): the node's, not a pod's. */
  deviceAddresses: string[];
}

/** Whether the plan changes nothing. */
export function isEmptyPlan(p: DatapathPlan): boolean {
  return !p.links.length && !p.addRoutes.length && !p.delRoutes.length && !p.addRules.length && !p.delRules.length;
}
