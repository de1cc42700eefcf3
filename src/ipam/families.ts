import type { ENIPool } from '../api/types.js';
import type { InstanceLimits } from './capacity.js';
import { ipv6PrefixMode, isIpv6PrefixKey } from './ipv6-prefix.js';
import { planRelease, type Ack } from './release.js';

/**
 * Dual-stack (`ipFamilies: [IPv4, IPv6]`), as Terway does it: each pod IPv4 address of an ENI
 * has an IPv6 companion on the same ENI, so a pod takes one of each from one ENI and leaves by
 * that ENI for both families. The IPv4 plan is the pool's (sizing, batches, releases); IPv6
 * follows it per ENI: topped up to the ENI's IPv4 pod addresses, and given back, through the
 * same release handshake, where it has more. The same step gives back the other family's
 * addresses of a pool that no longer uses it (target 0; IPv6-only pools see IPv4 as theirs:
 * ipv6-only.ts).
 */

type Families = Pick<ENIPool['spec'], 'ipFamilies' | 'ipv6Mode'>;

/** The pool's pods get an IPv6 address beside their IPv4 one. */
export const dualStack = (spec: Families): boolean =>
  (spec.ipFamilies?.includes('IPv4') ?? true) && (spec.ipFamilies?.includes('IPv6') ?? false);

/** The pool's pods get an IPv6 address only (ipFamilies [IPv6]): it is sized in IPv6 addresses. */
export const ipv6Only = (spec: Families): boolean => spec.ipFamilies?.length === 1 && spec.ipFamilies[0] === 'IPv6';

/** The pool's ENIs need a vSwitch with an IPv6 CIDR. */
export const needsIpv6 = (spec: Families): boolean => dualStack(spec) || ipv6Only(spec);

/**
 * Whether an address or release key is of the family the pool is sized in (its pods' own, or
 * in dual-stack the IPv4 one, which the IPv6 one follows). An IPv6 /80 prefix is of neither:
 * the prefix step owns it (pool-plan.ts).
 */
export const inPodFamily =
  (spec: Families) =>
  (key: string): boolean =>
    !isIpv6PrefixKey(key) && isIpv6(key) === ipv6Only(spec);

/** A release key of the other family's single addresses (dual-stack companions, or what a family change left). */
export const inOtherFamily =
  (spec: Families) =>
  (key: string): boolean =>
    !isIpv6PrefixKey(key) && !inPodFamily(spec)(key);

/** IPv6 addresses per CreateNetworkInterface (Ipv6AddressCount), AssignIpv6Addresses and UnassignIpv6Addresses call (ECS). */
export const CREATE_MAX_IPV6 = 10;
export const ASSIGN_MAX_IPV6 = 10;
export const UNASSIGN_IPV6_BATCH = 10;

/**
 * The VPC router as an ENI sees it for IPv6: the link-local address of the gateway's MAC
 * (ee:ff:ff:ff:ff:ff, EUI-64), the same on every vSwitch. A link-local next hop is what a
 * router advertisement gives, and it needs no address of the vSwitch's /64 on the node.
 */
export const IPV6_GATEWAY = 'fe80::ecff:ffff:feff:ffff';

/** A release request or address of IPv6 (IPv4 keys and /28 prefixes have no colon). */
export const isIpv6 = (key: string): boolean => key.includes(':');

/**
 * In dual-stack an ENI serves as many pods as it has room in both families: its IPv4 slots are
 * capped by its IPv6 addresses (the ENI's own primary IPv4 address is the node's). A /80 prefix
 * has room for every IPv4 address (ipv6Mode Prefix).
 */
export function familyLimits(limits: InstanceLimits, spec: Families): InstanceLimits {
  if (!dualStack(spec) || ipv6PrefixMode(spec)) return limits;
  return { ...limits, ipv4PerEni: Math.min(limits.ipv4PerEni, (limits.ipv6PerEni ?? 0) + 1) };
}

/** Why a class with IPv6 (dual-stack or IPv6-only) cannot be served by the vSwitches it selects, or undefined. */
export function familyProblem(
  spec: Pick<ENIPool['spec'], 'ipFamilies' | 'ipv4Mode' | 'ipv6Mode'>,
  vSwitches: ReadonlyArray<{ id: string; ipv6Cidr?: string }>,
): string | undefined {
  if (!needsIpv6(spec)) return undefined;
  const families = `ipFamilies [${spec.ipFamilies!.join(', ')}]`;
  if (spec.ipv4Mode === 'Prefix' && !(dualStack(spec) && ipv6PrefixMode(spec)))
    return `${families} with ipv4Mode Prefix needs ipFamilies [IPv4, IPv6] and ipv6Mode Prefix`;
  // usePrimaryENI: the primary ENIs serve IPv6 pods where the nodes' vSwitches have IPv6 (each pool says where not).
  if (!vSwitches.some((v) => v.ipv6Cidr))
    return (
      `no vSwitch of the class has an IPv6 CIDR (${vSwitches.map((v) => v.id).join(', ')}): ` +
      `enable IPv6 on them, or select vSwitches that have it, for ${families}`
    );
  return undefined;
}

/** One attached ENI as the IPv6 step sees it. */
export interface CompanionEni {
  id: string;
  /** InUse and taking addresses: only then is it topped up. */
  attached: boolean;
  /** Its pod IPv4 addresses once this reconcile's releases and assigns are done. */
  podIpv4: number;
  /** Its IPv6 addresses now. */
  ipv6: string[];
}

export interface CompanionInput {
  enis: CompanionEni[];
  /** IPv6 addresses an ENI may hold (the instance type's EniIpv6AddressQuantity). */
  perEni: number;
  used: ReadonlySet<string>;
  cooling: ReadonlySet<string>;
  /** Outstanding IPv6 release requests. */
  requests: ReadonlyMap<string, string>;
  acks: ReadonlyMap<string, Ack>;
  now: number;
  /** `release` false: nothing is requested, withdrawn or unassigned (the pool releases nothing now). */
  allow: { assign: boolean; release: boolean };
}

export interface CompanionPlan {
  assign: Array<{ eniId: string; count: number }>;
  /** Free IPv6 addresses beyond their ENI's IPv4, to request for release. */
  request: string[];
  withdraw: string[];
  /** Confirmed ones, at most 10 per call. */
  unassign: Array<{ eniId: string; ips: string[] }>;
}

/**
 * Each ENI's IPv6 addresses brought to its IPv4 pod addresses (at most `perEni`): the missing
 * ones assigned, at most 10 per call; the surplus requested at once (its IPv4 waited the release
 * delay already), released on the agent's `ready`, never one in use or cooling down. A request
 * for an address no ENI holds is withdrawn.
 */
export function planCompanions(i: CompanionInput): CompanionPlan {
  const plan: CompanionPlan = { assign: [], request: [], withdraw: [], unassign: [] };
  const held = new Set(i.enis.flatMap((e) => e.ipv6));
  if (i.allow.release) for (const key of i.requests.keys()) if (!held.has(key)) plan.withdraw.push(key);
  for (const eni of i.enis) {
    const target = Math.min(eni.podIpv4, i.perEni);
    let left = eni.ipv6.length;
    let missing = target - left;
    if (!i.allow.release) {
      if (eni.attached && i.allow.assign) plan.assign.push(...assignsFor(eni.id, missing));
      continue;
    }
    const requests = new Map([...i.requests].filter(([key]) => eni.ipv6.includes(key)));
    const release = planRelease({
      enis: [{ id: eni.id, primaryIp: '', secondaryIps: eni.ipv6, keep: true }],
      used: new Set(i.used),
      cooling: new Set(i.cooling),
      excess: Math.max(0, eni.ipv6.length - target),
      excessSince: i.now,
      now: i.now,
      delayMs: 0,
      requests,
      acks: new Map(i.acks),
      deleteEmptyEnis: false,
    });
    plan.request.push(...release.request);
    plan.withdraw.push(...release.withdraw);
    for (const u of release.unassign)
      for (let n = 0; n < u.ips.length; n += UNASSIGN_IPV6_BATCH) {
        const ips = u.ips.slice(n, n + UNASSIGN_IPV6_BATCH);
        plan.unassign.push({ eniId: eni.id, ips });
        left -= ips.length;
      }
    missing = target - left;
    if (eni.attached && i.allow.assign) plan.assign.push(...assignsFor(eni.id, missing));
  }
  return plan;
}

/** `missing` addresses for one ENI, at most 10 per AssignIpv6Addresses call. */
function assignsFor(eniId: string, missing: number): CompanionPlan['assign'] {
  const out: CompanionPlan['assign'] = [];
  for (let left = missing; left > 0; left -= ASSIGN_MAX_IPV6)
    out.push({ eniId, count: Math.min(left, ASSIGN_MAX_IPV6) });
  return out;
}
