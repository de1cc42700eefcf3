import type { ENIPool, ReleaseAck } from '../../api/types.js';
import type { NetworkInterface, VSwitch } from '../../cloud/index.js';
import { exclusiveMode } from '../../ipam/exclusive.js';
import { needsIpv6 } from '../../ipam/families.js';
import { sameJson } from '../../kube/same-json.js';
import {
  ENI_INDEX_TAG,
  type AllocationMap,
  type CiliumEni,
  type CiliumNode,
  type CiliumNodeStatus,
  type ReleaseState,
} from './types.js';

/**
 * What the operator publishes in a CiliumNode, from its own record of the node (the ENIPool the
 * pool reconciler keeps) and the cloud: pure functions, so that the order the agent needs (an
 * ENI in status before its addresses in the pool) and its release protocol (§2.4 of
 * reference/cilium-node.md) are checked on plain data.
 */

/**
 * What of a class's or pool's settings cilium-agents cannot use, if anything: their alibabacloud
 * IPAM takes IPv4 secondary addresses of secondary, shared ENIs only (no whole ENI per pod, no
 * /28 prefix, no IPv6, nothing of the primary ENI: reference/cilium-node.md §7).
 */
export function ciliumCannotUse(
  spec: Pick<ENIPool['spec'], 'eniMode' | 'ipv4Mode' | 'ipFamilies' | 'usePrimaryENI'>,
): string | undefined {
  if (exclusiveMode(spec)) return 'eniMode Exclusive';
  if (spec.ipv4Mode === 'Prefix') return 'ipv4Mode Prefix';
  if (needsIpv6(spec)) return `ipFamilies ${(spec.ipFamilies ?? []).join(', ')}`;
  return spec.usePrimaryENI ? 'usePrimaryENI' : undefined;
}

/** What to do about such settings, said to whoever set them. */
export const CILIUM_CLASS_FIX =
  'give the Cilium nodes a class with eniMode Shared, ipv4Mode SecondaryIP, IPv4 only and no usePrimaryENI';

/** Why a pool cannot be served to cilium-agents, if it cannot. */
export function unservableByCilium(spec: ENIPool['spec']): string | undefined {
  const why = ciliumCannotUse(spec);
  return (
    why &&
    `class ${spec.className ?? '(none)'} has ${why}, which cilium-agents cannot use (Cilium's alibabacloud IPAM takes IPv4 ` +
      `secondary addresses of secondary, shared ENIs): its addresses are not published to the CiliumNode; ${CILIUM_CLASS_FIX}`
  );
}

/** The pool's pod addresses, each with its ENI: those of InUse ENIs, IPv4 (Cilium's alibabacloud mode is IPv4). */
export function publishedAddresses(pool: ENIPool | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of pool?.status?.enis ?? []) if (e.state === 'InUse') for (const ip of e.ips ?? []) out.set(ip, e.id);
  return out;
}

/** The pool's release requests of single IPv4 addresses (prefixes and whole ENIs have no Cilium form). */
function requestedAddresses(pool: ENIPool | undefined): Map<string, string> {
  return new Map(
    Object.entries(pool?.status?.releaseRequests ?? {}).filter(([key]) => !key.includes('/') && !key.includes(':')),
  );
}

/** An attached ENI as the agent reads it: found by its MAC, routed through table 10 + its index. */
export function ciliumEni(
  eni: NetworkInterface,
  vSwitches: readonly VSwitch[],
  vpcCidr?: string,
  /** The CIDR the node's status gave the ENI before: a vSwitch list that lacks it is no word on it. */
  knownCidr?: string,
): CiliumEni {
  const vsw = vSwitches.find((v) => v.id === eni.vSwitchId);
  return {
    'network-interface-id': eni.id,
    'mac-address': eni.mac,
    type: eni.type === 'Primary' ? 'Primary' : 'Secondary',
    ...(eni.instanceId ? { 'instance-id': eni.instanceId } : {}),
    'security-groupids': [...eni.securityGroupIds],
    vpc: { 'vpc-id': eni.vpcId, ...(vpcCidr ? { cidr: vpcCidr } : {}) },
    'zone-id': eni.zoneId,
    vswitch: { 'vswitch-id': eni.vSwitchId, cidr: vsw?.cidr ?? knownCidr ?? '' },
    'primary-ip-address': eni.primaryIp,
    // `primary` is omitted when false, as the agent's own writes carry it (Go omitempty).
    'private-ipsets': [
      { 'private-ip-address': eni.primaryIp, primary: true },
      ...eni.secondaryIps.map((ip) => ({ 'private-ip-address': ip })),
    ],
    // The device index is unique among the instance's attached ENIs and fixed while attached:
    // a stable route table per ENI (a missing index would put every ENI in table 10).
    tags: { ...eni.tags, [ENI_INDEX_TAG]: String(eni.deviceIndex) },
  };
}

export interface StatusInput {
  /** The CiliumNode as read. */
  node: CiliumNode;
  /** The operator's record of the node's pool. */
  pool: ENIPool | undefined;
  /** The instance's ENIs as the cloud cache has them, its primary ENI included. */
  instanceEnis: readonly NetworkInterface[];
  vSwitches: readonly VSwitch[];
}

/**
 * The node's status with the operator's fields set: every attached ENI of the instance (the
 * primary one too: the agent starts only once the list is not empty), the release states, and
 * `operator-status.error` while the pool is Degraded (why it cannot grow or shrink).
 * An ENI the pool in spec still names stays listed until its addresses have left the pool, so
 * the agent never holds an address whose ENI it cannot find.
 */
export function ciliumStatus(input: StatusInput): CiliumNodeStatus {
  const { node, pool } = input;
  const vpcCidr = node.spec['alibaba-cloud']?.['cidr-block'];
  const enis: Record<string, CiliumEni> = {};
  const before = node.status?.['alibaba-cloud']?.enis ?? {};
  for (const eni of input.instanceEnis)
    if (eni.status === 'InUse' && eni.deviceIndex !== undefined)
      enis[eni.id] = ciliumEni(eni, input.vSwitches, vpcCidr, before[eni.id]?.vswitch?.cidr || undefined);
  const referenced = new Set(
    [...Object.values(node.spec.ipam?.pool ?? {}), ...Object.values(node.status?.ipam?.used ?? {})].map(
      (a) => a.resource,
    ),
  );
  for (const [key, eni] of Object.entries(before))
    if (!(key in enis) && referenced.has(eni['network-interface-id'])) enis[key] = eni;
  const { 'release-ips': _states, 'operator-status': _error, ...ipam } = node.status?.ipam ?? {};
  const states = releaseStates(node, pool);
  // Where a Cilium user looks for the operator's word on the node (kubectl get cn -o yaml).
  const degraded = pool?.status?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
  return {
    ...node.status,
    'alibaba-cloud': { ...node.status?.['alibaba-cloud'], enis },
    ipam: {
      ...ipam,
      ...(Object.keys(states).length ? { 'release-ips': states } : {}),
      ...(degraded ? { 'operator-status': { error: `${degraded.reason}: ${degraded.message}` } } : {}),
    },
  };
}

/**
 * The release handshake in the agent's words: a requested address is `marked-for-release` once;
 * the agent's answer is never overwritten while the request stands; an address unassigned after
 * `ready-for-release` is `released` (the agent then drops the entry); an entry whose request
 * ended any other way (no longer excess) is withdrawn. So is a `do-not-release` once the agent
 * no longer uses the address: the planner may ask again for a freed address at once (a new
 * request, the same address), and an old refusal must not answer it; the address is marked
 * afresh on a later write, never in the one that withdraws the answer.
 */
export function releaseStates(node: CiliumNode, pool: ENIPool | undefined): Record<string, ReleaseState> {
  const requested = requestedAddresses(pool);
  const published = publishedAddresses(pool);
  const inPool = node.spec.ipam?.pool ?? {};
  const used = node.status?.ipam?.used ?? {};
  const out: Record<string, ReleaseState> = {};
  const withdrawn = new Set<string>();
  for (const [ip, state] of Object.entries(node.status?.ipam?.['release-ips'] ?? {})) {
    if (state === 'released') out[ip] = state;
    else if (requested.has(ip) && (state !== 'do-not-release' || ip in used)) out[ip] = state;
    else if (!published.has(ip) && state === 'ready-for-release') out[ip] = 'released';
    else withdrawn.add(ip);
  }
  // Only an address the agent has in its pool is asked about (another it would answer do-not-release).
  for (const ip of requested.keys())
    if (!(ip in out) && !withdrawn.has(ip) && published.has(ip) && ip in inPool) out[ip] = 'marked-for-release';
  return out;
}

/**
 * Whether the pool holds a `ready` ack for the address's current request: the pool reconciler
 * may unassign it at any moment, so it must stay out of the agent's reach.
 */
function readyAcked(pool: ENIPool | undefined, ip: string, requestedAt: string | undefined): boolean {
  const ack = pool?.status?.releaseAcks?.[ip];
  return requestedAt !== undefined && ack?.answer === 'ready' && ack.requestedAt === requestedAt;
}

/**
 * `spec.ipam.pool` as the node should have it: the pool's addresses whose ENI the status (as
 * written) lists with the vSwitch CIDR the agent routes by, `{resource: <eni>}` each. An address
 * in it stays while the pool publishes it, while the agent says it is used, or while its
 * handshake is not yet `released`; a `released` one leaves at once and is not offered again
 * until the agent has dropped its entry (it would never hand it out meanwhile). An address out
 * of it whose release is confirmed (a `ready` ack for the request standing: an agent that had
 * it answered, and the CiliumNode was made anew since) is not offered: it may be unassigned at
 * any moment.
 */
export function ciliumPool(node: CiliumNode, pool: ENIPool | undefined): AllocationMap {
  const listed = listedEnis(node);
  const states = node.status?.ipam?.['release-ips'] ?? {};
  const used = node.status?.ipam?.used ?? {};
  const requested = requestedAddresses(pool);
  const published = publishedAddresses(pool);
  const before = node.spec.ipam?.pool ?? {};
  const out: AllocationMap = {};
  for (const [ip, eni] of published) {
    const goingOut = !(ip in before) && readyAcked(pool, ip, requested.get(ip));
    if (listed.has(eni) && states[ip] !== 'released' && !goingOut) out[ip] = { resource: eni };
  }
  for (const [ip, entry] of Object.entries(before)) {
    const handshaking = states[ip] !== undefined && states[ip] !== 'released';
    const kept = published.has(ip) && states[ip] !== 'released';
    if (!(ip in out) && (ip in used || handshaking || kept)) out[ip] = entry;
  }
  return out;
}

/** The ENIs the node's status lists with the vSwitch CIDR the agent routes by: those whose addresses it may be offered. */
function listedEnis(node: CiliumNode): Set<string> {
  return new Set(
    Object.values(node.status?.['alibaba-cloud']?.enis ?? {})
      .filter((e) => e.vswitch?.cidr)
      .map((e) => e['network-interface-id']),
  );
}

/** A requested address the agent does not hold: out of its pool, not used, never asked about (no entry). */
function outOfReach(node: CiliumNode, ip: string): boolean {
  return (
    !(ip in (node.spec.ipam?.pool ?? {})) &&
    !(ip in (node.status?.ipam?.used ?? {})) &&
    node.status?.ipam?.['release-ips']?.[ip] === undefined
  );
}

/**
 * A requested address the agent was never offered, on the node as the API server has it: out of
 * its reach, on an ENI the cloud has attached without a device index (`unindexed`, so never
 * listed: an address enters the pool only once its ENI is listed) that the status does not list.
 * Not an ENI the status merely does not list: a CiliumNode made anew under a running agent lists
 * its ENIs only as the cloud cache has them, and the agent may hold their addresses.
 */
function neverOffered(node: CiliumNode, pool: ENIPool, ip: string, unindexed: ReadonlySet<string>): boolean {
  const eni = publishedAddresses(pool).get(ip);
  const listed = Object.values(node.status?.['alibaba-cloud']?.enis ?? {}).some(
    (e) => e['network-interface-id'] === eni,
  );
  return eni !== undefined && unindexed.has(eni) && !listed && outOfReach(node, ip);
}

/**
 * The agent's fields of the ENIPool, from the CiliumNode: `used` as the agent reports it, and an
 * ack per release request the agent has answered. `ready` is taken only from a live read
 * (`live`): a cached `ready-for-release` may belong to a handshake withdrawn since, after which
 * the agent was free to hand the address out. While the entry stands it is the agent's promise
 * that the address is free and stays so, whatever request it was written for.
 */
export function poolAgentPatch(
  node: CiliumNode,
  pool: ENIPool,
  o: { live: boolean; unindexed?: ReadonlySet<string> },
): Record<string, unknown> | undefined {
  const used = Object.fromEntries(
    Object.entries(node.status?.ipam?.used ?? {}).map(([ip, a]) => [ip, { pod: a.owner ?? '' }]),
  );
  const states = node.status?.ipam?.['release-ips'] ?? {};
  const acks: Record<string, ReleaseAck> = {};
  for (const [ip, requestedAt] of requestedAddresses(pool)) {
    const state = states[ip];
    if (state === 'do-not-release') acks[ip] = { answer: 'do-not-release', requestedAt };
    else if (state === 'ready-for-release' && !(ip in used) && o.live) acks[ip] = { answer: 'ready', requestedAt };
    // Not live: an ack already given stands until a live read says otherwise.
    else if (state === 'ready-for-release' && !o.live && readyAcked(pool, ip, requestedAt))
      acks[ip] = pool.status!.releaseAcks![ip]!;
    // No entry (the CiliumNode was made anew): the old agent's promise holds while this one cannot have the address.
    else if (outOfReach(node, ip) && readyAcked(pool, ip, requestedAt)) acks[ip] = pool.status!.releaseAcks![ip]!;
    // Never offered to the agent (its ENI never listed): free, on the node as the API server has it.
    else if (o.live && neverOffered(node, pool, ip, o.unindexed ?? new Set()))
      acks[ip] = { answer: 'ready', requestedAt };
  }
  const patch: Record<string, unknown> = {};
  const usedPatch = mapPatch(pool.status?.used ?? {}, used);
  if (usedPatch) patch.used = usedPatch;
  const ackPatch = mapPatch(pool.status?.releaseAcks ?? {}, acks);
  if (ackPatch) patch.releaseAcks = ackPatch;
  return Object.keys(patch).length ? patch : undefined;
}

/**
 * Whether the cached node frees a requested address the pool has no `ready` ack for yet (a
 * `ready-for-release`, or an address never offered to the agent): a live read decides.
 */
export function newReadyAnswer(node: CiliumNode, pool: ENIPool, unindexed: ReadonlySet<string> = new Set()): boolean {
  const states = node.status?.ipam?.['release-ips'] ?? {};
  return [...requestedAddresses(pool)].some(
    ([ip, at]) =>
      (states[ip] === 'ready-for-release' || neverOffered(node, pool, ip, unindexed)) && !readyAcked(pool, ip, at),
  );
}

/** A merge patch from one map to another (null removes a key). */
function mapPatch<T>(current: Record<string, T>, desired: Record<string, T>): Record<string, T | null> | undefined {
  const patch: Record<string, T | null> = {};
  for (const key of Object.keys(current)) if (!(key in desired)) patch[key] = null;
  for (const [key, value] of Object.entries(desired)) if (!sameJson(current[key], value)) patch[key] = value;
  return Object.keys(patch).length ? patch : undefined;
}
