import ipaddr from 'ipaddr.js';
import type { ENIPool, PoolENI, ReleaseAck } from '../api/types.js';
import { dualStack, ipv6Only, isIpv6 } from '../ipam/families.js';
import {
  firstFreeInIpv6Prefix,
  inIpv6Prefix,
  ipv6PrefixMode,
  isIpv6Prefix80,
  isIpv6PrefixKey,
} from '../ipam/ipv6-prefix.js';
import { exclusiveMode, isEniKey } from '../ipam/exclusive.js';
import { addressesOfKey, isPrefixKey, keyCovers, prefixMembership } from '../ipam/prefix.js';

/** One pod interface's address, as the agent hands it out and records it. */
export interface Allocation {
  ip: string;
  /** `namespace/name` of the pod. */
  pod: string;
  containerId: string;
  ifName: string;
  eniId: string;
  allocatedAt: number;
  /**
   * Recovered after a restart from the pool's status or the node's pods, not from this agent's
   * own records; it goes when its pod does. Its interface is the one status.used or the pod
   * names, or `*` when nothing did: then only a release of the whole container frees it.
   */
  recovered?: boolean;
  /** The CNI network (the configuration's `name`) that asked for it; GC only releases its own. */
  network?: string;
  /**
   * eniMode Exclusive: the whole ENI is the pod's (its address is the ENI's primary), its device
   * moved into the pod's network namespace `netns`; `mac` finds it there and back.
   */
  exclusive?: { mac: string; netns?: string };
}

/** The agent's own state: what it handed out, and released IPs cooling down before reuse. */
export interface AgentState {
  allocations: Record<string, Allocation>;
  /** IP -> epoch ms when it may be handed out again. */
  cooling: Record<string, number>;
}

export const emptyState = (): AgentState => ({ allocations: {}, cooling: {} });
export const allocationKey = (containerId: string, ifName: string): string => `${containerId}/${ifName}`;
/** A dual-stack pod interface's IPv6 address is an allocation of its own, beside the IPv4 one. */
const ipv6Key = (containerId: string, ifName: string): string => `${allocationKey(containerId, ifName)}/ipv6`;

/** What a pod needs to use an address of the pool. */
export interface Lease {
  ip: string;
  prefixLength: number;
  gateway: string;
  eniId: string;
  mac: string;
  vSwitchCidr: string;
  /** Dual-stack: the interface's IPv6 address, on the same ENI. */
  ipv6?: { ip: string; prefixLength: number; gateway: string };
  /** eniMode Exclusive: the ENI is the pod's whole, its address the ENI's primary. */
  exclusive?: true;
}
type Where = Omit<Lease, 'ip' | 'ipv6'>;

/**
 * A dual-stack pod's IPv6 gateway: a link-local address that ptp puts on the pod's host-side
 * veth (each veth may hold it). The node then routes the pod's packets out of its ENI to the VPC
 * router (the ENI's gatewayIPv6); the VPC's own gateway could not be a pod's, as the kernel
 * refuses a next hop that is one of the node's own global addresses.
 */
export const POD_IPV6_GATEWAY = 'fe80::1';

// poolAddresses by pool object: the informer replaces the object on every change, so an entry
// never goes stale, and every allocation in between (a burst of pod starts) skips the walk.
const addressesOf = new WeakMap<ENIPool, ReadonlyMap<string, Where>>();

/** The IPs of the pool an agent may hand out (IPv6 too, dual-stack), with where each lives: InUse ENIs only. */
export function poolAddresses(pool: ENIPool | undefined): ReadonlyMap<string, Where> {
  if (!pool) return new Map();
  let known = addressesOf.get(pool);
  if (!known) addressesOf.set(pool, (known = walkPool(pool)));
  return known;
}

const prefixes6Of = new WeakMap<ENIPool, ReadonlyArray<{ prefix: string; where: Where }>>();

/**
 * The IPv6 /80 prefixes of the pool's InUse ENIs (ipv6Mode Prefix), with where they live: their
 * addresses are never listed, only tested (ipv6-prefix.ts).
 */
function poolIpv6Prefixes(pool: ENIPool | undefined): ReadonlyArray<{ prefix: string; where: Where }> {
  if (!pool) return [];
  let known = prefixes6Of.get(pool);
  if (!known) {
    known = (pool.status?.enis ?? []).flatMap((eni) =>
      eni.state === 'InUse' && eni.vSwitchIPv6CIDR
        ? (eni.ipv6Prefixes ?? [])
            .filter(isIpv6Prefix80)
            .map((prefix) => ({ prefix, where: whereOn(eni, eni.vSwitchIPv6CIDR!, POD_IPV6_GATEWAY) }))
        : [],
    );
    prefixes6Of.set(pool, known);
  }
  return known;
}

/** Where an address of the pool lives: a listed one, or one of an ENI's IPv6 /80 prefixes. */
export function locate(pool: ENIPool | undefined, ip: string): Where | undefined {
  return poolAddresses(pool).get(ip) ?? poolIpv6Prefixes(pool).find((p) => inIpv6Prefix(ip, p.prefix))?.where;
}

const leftoversOf = new WeakMap<ENIPool, ReadonlyMap<string, Where>>();

/**
 * Where an address of the pool lives, a pod's to take or not: also, in an Exclusive pool, a
 * secondary address a Shared spell left on an ENI (a pod of that spell may hold it; the operator
 * drains the rest). For recovery, strays and release answers; never handed out (locate is).
 */
function known(pool: ENIPool | undefined, ip: string): Where | undefined {
  const found = locate(pool, ip);
  if (found || !pool || !exclusiveMode(pool.spec)) return found;
  let leftovers = leftoversOf.get(pool);
  if (!leftovers) leftoversOf.set(pool, (leftovers = secondaryAddresses(pool)));
  return leftovers.get(ip);
}

/** An ENI a pod of an Exclusive pool may take whole: it holds no address but its primary. */
export const holdsNoAddress = (eni: PoolENI): boolean =>
  !eni.ips?.length && !eni.ipv6s?.length && !eni.prefixes?.length && !eni.ipv6Prefixes?.length;

/** Where an address of `eni` in its vSwitch's `cidr` (IPv4 or IPv6) lives, and its gateway. */
const whereOn = (eni: PoolENI, cidr: string, gateway: string | undefined): Where => ({
  prefixLength: Number(cidr.split('/')[1]),
  gateway: gateway ?? '',
  eniId: eni.id,
  mac: eni.mac ?? '',
  vSwitchCidr: cidr,
});

function walkPool(pool: ENIPool): Map<string, Where> {
  const out = new Map<string, Where>();
  // An Exclusive pool's pod addresses are its secondary ENIs' primaries, each ENI a pod's whole.
  if (exclusiveMode(pool.spec)) {
    for (const eni of pool.status?.enis ?? [])
      if (
        eni.state === 'InUse' &&
        eni.vSwitchCIDR &&
        eni.primaryIP &&
        eni.mac &&
        (eni.deviceIndex ?? 0) > 0 &&
        holdsNoAddress(eni)
      )
        out.set(eni.primaryIP, { ...whereOn(eni, eni.vSwitchCIDR, eni.gatewayIP), exclusive: true });
    return out;
  }
  return secondaryAddresses(pool);
}

/** The secondary addresses (IPv4 and IPv6) of the pool's InUse ENIs: a Shared pool's pod addresses. */
function secondaryAddresses(pool: ENIPool): Map<string, Where> {
  const out = new Map<string, Where>();
  for (const eni of pool?.status?.enis ?? []) {
    if (eni.state !== 'InUse' || !eni.vSwitchCIDR) continue;
    for (const ip of eni.ips ?? []) out.set(ip, whereOn(eni, eni.vSwitchCIDR, eni.gatewayIP));
    if (eni.vSwitchIPv6CIDR)
      for (const ip of eni.ipv6s ?? []) out.set(ip, whereOn(eni, eni.vSwitchIPv6CIDR, POD_IPV6_GATEWAY));
  }
  return out;
}

const prefixesOf = new WeakMap<ENIPool, ReadonlyMap<string, string>>();

/** Address -> the /28 prefix of an InUse ENI of the pool holding it (ipv4Mode Prefix). */
export function poolPrefixes(pool: ENIPool | undefined): ReadonlyMap<string, string> {
  if (!pool) return new Map();
  let known = prefixesOf.get(pool);
  if (!known) {
    const inUse = (pool.status?.enis ?? []).filter((e) => e.state === 'InUse');
    prefixesOf.set(pool, (known = prefixMembership(inUse.flatMap((e) => e.prefixes ?? []))));
  }
  return known;
}

/**
 * The addresses free to hand out now, in a stable order: in the pool, not requested for
 * release (those leave the free list first, a prefix's all at once), not in use, not cooling
 * down, and not held by the node (`exclude`: an ENI's address the image configured on its
 * device). Addresses of the fullest prefixes come first, so that whole prefixes become free to
 * release; a single secondary IP counts as an empty prefix.
 */
export function freeAddresses(
  state: AgentState,
  pool: ENIPool | undefined,
  now: number,
  exclude?: ReadonlySet<string>,
  family: 4 | 6 = 4,
): string[] {
  // A pool being deleted is giving its ENIs back: nothing more is handed out from it.
  if (pool?.metadata.deletionTimestamp) return [];
  const requested = new Set(Object.keys(pool?.status?.releaseRequests ?? {}));
  const prefixOf = poolPrefixes(pool);
  const inUse = new Set(Object.values(state.allocations).map((a) => a.ip));
  const addresses = poolAddresses(pool);
  const free = [...addresses.keys()].filter(
    (ip) =>
      isIpv6(ip) === (family === 6) &&
      !requested.has(ip) &&
      // An Exclusive pool's requests name whole ENIs.
      !requested.has(addresses.get(ip)!.eniId) &&
      !requested.has(prefixOf.get(ip) ?? '') &&
      !inUse.has(ip) &&
      !((state.cooling[ip] ?? 0) > now) &&
      !exclude?.has(ip),
  );
  // A /80 offers its first address that no one holds (ipv6Mode Prefix, dual-stack or IPv6-only;
  // a /80 left on an IPv6-only pool of single addresses is being given back): one per prefix is
  // enough, as each allocation looks again.
  if (family === 6 && pool && (dualStack(pool.spec) || (ipv6Only(pool.spec) && ipv6PrefixMode(pool.spec)))) {
    const holds = new Set([...inUse, ...Object.keys(state.cooling), ...(exclude ?? [])]);
    // An IPv6-only pool's /80 comes first: the single addresses left beside it are draining.
    const first = ipv6Only(pool.spec);
    for (const { prefix } of poolIpv6Prefixes(pool))
      if (!requested.has(prefix)) {
        const ip = firstFreeInIpv6Prefix(prefix, (x) => holds.has(x));
        if (first) free.unshift(ip);
        else free.push(ip);
      }
  }
  if (!prefixOf.size) return free;
  const taken = new Map<string, number>();
  for (const ip of [...inUse, ...Object.keys(state.cooling)]) {
    const p = prefixOf.get(ip);
    if (p) taken.set(p, (taken.get(p) ?? 0) + 1);
  }
  const fullness = (ip: string) => taken.get(prefixOf.get(ip) ?? '') ?? 0;
  return free
    .map((ip, i) => ({ ip, i, f: fullness(ip) }))
    .sort((a, b) => b.f - a.f || a.i - b.i)
    .map((x) => x.ip);
}

export type AllocateResult =
  { state: AgentState; lease: Lease; fresh: boolean } | { state: AgentState; error: 'pool-empty' };

/**
 * Hands an address to a pod interface; the same container and interface get the same address
 * again. With `readyEnis` (the ENIs whose device and table the node's datapath has set), a free
 * address on one of them comes first.
 */
export function allocate(
  state: AgentState,
  pool: ENIPool | undefined,
  req: { containerId: string; ifName: string; pod: string; network?: string; netns?: string },
  now: number,
  exclude?: ReadonlySet<string>,
  readyEnis?: ReadonlySet<string>,
): AllocateResult {
  const key = allocationKey(req.containerId, req.ifName);
  const at = (ip: string) => locate(pool, ip);
  const existing = state.allocations[key];
  if (existing) {
    const where = at(existing.ip);
    const lease: Lease = where
      ? { ip: existing.ip, ...where }
      : {
          ip: existing.ip,
          prefixLength: 32,
          gateway: '',
          eniId: existing.eniId,
          mac: existing.exclusive?.mac ?? '',
          vSwitchCidr: '',
          ...(existing.exclusive ? { exclusive: true as const } : {}),
        };
    const six = state.allocations[ipv6Key(req.containerId, req.ifName)];
    const at6 = six && at(six.ip);
    if (six) lease.ipv6 = { ip: six.ip, prefixLength: at6?.prefixLength ?? 128, gateway: at6?.gateway ?? '' };
    return { state, lease, fresh: false };
  }
  // Dual-stack: an IPv4 address only on an ENI that has a free IPv6 address for the same pod.
  const free6 = pool && dualStack(pool.spec) ? freeAddresses(state, pool, now, exclude, 6) : undefined;
  const sixOn = new Map<string, string>();
  for (const ip of free6 ?? []) if (!sixOn.has(at(ip)!.eniId)) sixOn.set(at(ip)!.eniId, ip);
  // An IPv6-only pool's pods take an IPv6 address, as others take an IPv4 one.
  const family = pool && ipv6Only(pool.spec) ? 6 : 4;
  const free = freeAddresses(state, pool, now, exclude, family).filter((ip) => !free6 || sixOn.has(at(ip)!.eniId));
  // An address on an ENI whose datapath is set answers at once; one on an ENI just attached waits
  // for its device (seconds, on a real node): taken only when no ready ENI has a free address.
  const ip = (readyEnis && free.find((x) => readyEnis.has(at(x)!.eniId))) ?? free[0];
  if (!ip) return { state, error: 'pool-empty' };
  const where = at(ip)!;
  const allocationOf = (address: string): Allocation => ({
    ip: address,
    pod: req.pod,
    containerId: req.containerId,
    ifName: req.ifName,
    eniId: where.eniId,
    allocatedAt: now,
    ...(req.network ? { network: req.network } : {}),
    ...(where.exclusive ? { exclusive: { mac: where.mac, ...(req.netns ? { netns: req.netns } : {}) } } : {}),
  });
  const allocations = { ...state.allocations, [key]: allocationOf(ip) };
  const lease: Lease = { ip, ...where };
  const six = sixOn.get(where.eniId);
  if (six) {
    allocations[ipv6Key(req.containerId, req.ifName)] = allocationOf(six);
    const at6 = at(six)!;
    lease.ipv6 = { ip: six, prefixLength: at6.prefixLength, gateway: at6.gateway };
  }
  return { state: { ...state, allocations }, lease, fresh: true };
}

/**
 * Takes an address back; it cools down before anyone gets it again. Unknown containers are fine
 * (idempotent). With an interface, only that interface's address goes: a recovered address whose
 * interface nobody could name (`*`) may be another interface's, so it waits for a release of the
 * whole container, or for its pod to leave.
 */
export function release(
  state: AgentState,
  containerId: string,
  ifName: string | undefined,
  now: number,
  cooldownMs: number,
): { state: AgentState; released: string[] } {
  const allocations = { ...state.allocations };
  const cooling = { ...state.cooling };
  const released: string[] = [];
  for (const [key, a] of Object.entries(allocations)) {
    if (a.containerId !== containerId || (ifName !== undefined && a.ifName !== ifName)) continue;
    delete allocations[key];
    cooling[a.ip] = now + cooldownMs;
    released.push(a.ip);
  }
  for (const [ip, until] of Object.entries(cooling)) if (until <= now) delete cooling[ip];
  return { state: { allocations, cooling }, released };
}

/** The agent's part of the pool status: who uses which IP, its answers to release requests, and cool-downs. */
export function agentStatus(
  state: AgentState,
  pool: ENIPool | undefined,
  now: number,
  /** Addresses the node itself uses (configured on one of its devices): never given up. */
  heldByNode?: ReadonlySet<string>,
): {
  used: Record<string, UsedBy>;
  releaseAcks: Record<string, ReleaseAck>;
  cooling: Record<string, string>;
} {
  const used: Record<string, UsedBy> = {};
  for (const a of Object.values(state.allocations))
    used[a.ip] = { pod: a.pod, containerID: a.containerId, ...(a.ifName === '*' ? {} : { ifName: a.ifName }) };
  // Cooling IPs are not free, so the operator counts them as used until the time given.
  const cooling: Record<string, string> = {};
  for (const [ip, until] of Object.entries(state.cooling))
    if (until > now && !used[ip]) cooling[ip] = new Date(until).toISOString();
  // Each answer names the request it answers. Requested IPs are out of the free list
  // (freeAddresses), so an unused one can go at once; one still cooling down gets no answer
  // until its cool-down ends (the VPC could hand it to another node meanwhile). An address that
  // is not on an InUse ENI of this pool is not this agent's to give: whoever asks is mistaken
  // about whose it is (two pools naming one instance), and a pod elsewhere may hold it. One the
  // node itself uses (an address on eth0, with usePrimaryENI) is the node's: not released either.
  // A prefix is answered for all its addresses at once: ready only when none is used or cooling.
  const exclusive = pool !== undefined && exclusiveMode(pool.spec);
  // An Exclusive pool's ENIs may still hold secondaries of a Shared spell, which the operator drains.
  const own = (ip: string) => known(pool, ip) !== undefined;
  const prefixOf = poolPrefixes(pool);
  const prefixes6 = new Set(poolIpv6Prefixes(pool).map((p) => p.prefix));
  // The addresses a key stands for here; none when the pool's ENIs do not hold it (it is not this
  // agent's to give). A /80's are never listed: those held, cooling or the node's stand for it.
  const membersOf = (key: string): string[] => {
    // An Exclusive pool's whole ENI: its one pod address, its primary.
    if (exclusive && isEniKey(key))
      return [...poolAddresses(pool).entries()].filter(([, w]) => w.eniId === key).map(([ip]) => ip);
    if (isIpv6PrefixKey(key)) {
      if (!prefixes6.has(key)) return [];
      const touched = [...Object.keys(used), ...Object.keys(cooling), ...(heldByNode ?? [])];
      return touched.filter(keyCovers(key));
    }
    if (isPrefixKey(key)) return addressesOfKey(key).filter((ip) => prefixOf.get(ip) === key);
    return [key];
  };
  const releaseAcks: Record<string, ReleaseAck> = {};
  for (const [key, requestedAt] of Object.entries(pool?.status?.releaseRequests ?? {})) {
    const members = membersOf(key);
    // A free /80 has no member to show: held by the pool, it is the agent's to give.
    const held = members.length > 0 || prefixes6.has(key);
    const refused = !held || members.some((ip) => used[ip] || !own(ip) || heldByNode?.has(ip));
    if (refused) releaseAcks[key] = { answer: 'do-not-release', requestedAt };
    else if (!members.some((ip) => cooling[ip])) releaseAcks[key] = { answer: 'ready', requestedAt };
  }
  return { used, releaseAcks, cooling };
}

/** Allocations whose address the pool no longer has (after a restart, or an ENI taken away). */
export function strayAllocations(state: AgentState, pool: ENIPool | undefined): Allocation[] {
  return Object.values(state.allocations).filter((a) => !known(pool, a.ip));
}

/** Who holds an address, as status.used records it. */
export interface UsedBy {
  pod: string;
  containerID: string;
  ifName?: string;
}

/** A pod of this node as the API server shows it: who holds which address. */
export interface NodePod {
  pod: string;
  podIP?: string;
  /** A host-network pod's address is the node's own, not one of the pool's. */
  hostNetwork?: boolean;
  /** Address -> the pod interface holding it, where the pod says (see podInterfaces). */
  interfaces?: Record<string, string>;
}

/** The interface of a pod's own addresses: the runtime names it eth0 (containerd and CRI-O alike). */
export const POD_INTERFACE = 'eth0';
/** Multus's record of a pod's interfaces: [{name, interface, ips}]. */
export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';

/**
 * Which interface of a pod holds which address: its podIPs are its default network's (eth0), and
 * Multus's network-status annotation names the interface of each further network. An annotation
 * that does not parse tells nothing.
 */
export function podInterfaces(
  podIPs: string[],
  annotations: Record<string, string> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  let status: unknown;
  try {
    status = JSON.parse(annotations?.[NETWORK_STATUS_ANNOTATION] ?? '[]');
  } catch {
    status = [];
  }
  for (const n of Array.isArray(status) ? status : []) {
    const entry = n as { interface?: unknown; ips?: unknown };
    if (typeof entry?.interface !== 'string' || !entry.interface || !Array.isArray(entry.ips)) continue;
    for (const ip of entry.ips) if (typeof ip === 'string') out[ip] = entry.interface;
  }
  for (const ip of podIPs) out[ip] = POD_INTERFACE;
  return out;
}

/**
 * Takes into the agent's state every address of the pool that someone else says is in use but
 * the state does not hold (nor saw released, still cooling down): the agent's own last report
 * (`status.used`, after a state file was lost) and the pods the API server places on the node. Such an address is kept, never handed
 * out again, until its pod is gone. Returns the new state and what it had to take in.
 */
export function recoverAllocations(
  state: AgentState,
  pool: ENIPool | undefined,
  pods: NodePod[] | undefined,
  now: number,
): { state: AgentState; recovered: Allocation[] } {
  // Cooling down: this state saw its pod's DEL, so an older word (a status.used not yet rewritten,
  // a pod still showing its podIP while it terminates) does not bring it back.
  const released = Object.entries(state.cooling)
    .filter(([, until]) => until > now)
    .map(([ip]) => ip);
  const held = new Set([...Object.values(state.allocations).map((a) => a.ip), ...released]);
  const allocations = { ...state.allocations };
  const cooling = { ...state.cooling };
  const recovered: Allocation[] = [];
  // What the pods say about which interface holds which address.
  const named = new Map<string, { pod: string; ifName: string }>();
  for (const p of pods ?? [])
    if (!p.hostNetwork)
      for (const [ip, ifName] of Object.entries(p.interfaces ?? {})) named.set(ip, { pod: p.pod, ifName });
  // An interface's IPv6 address beside an IPv4 one (dual-stack, now or before the class changed)
  // has a key of its own; in an IPv6-only pool the IPv6 address is the interface's own.
  const six = pool !== undefined && ipv6Only(pool.spec);
  const keyOf = (ip: string, containerId: string, ifName: string) =>
    isIpv6(ip) && !six ? ipv6Key(containerId, ifName) : allocationKey(containerId, ifName);
  const take = (ip: string, pod: string, containerId: string, recorded?: string) => {
    if (held.has(ip)) return;
    held.add(ip);
    const told = named.get(ip);
    let ifName = recorded || (told?.pod === pod ? told.ifName : undefined);
    // Two addresses claiming one interface of a container (or one the state holds): name neither
    // wrongly, keep this one apart under its address.
    if (ifName && allocations[keyOf(ip, containerId, ifName)]) ifName = undefined;
    const a: Allocation = {
      ip,
      pod,
      containerId,
      ifName: ifName ?? '*',
      eniId: known(pool, ip)?.eniId ?? '',
      allocatedAt: now,
      recovered: true,
    };
    allocations[ifName ? keyOf(ip, containerId, ifName) : allocationKey(containerId, `*${ip}`)] = a;
    recovered.push(a);
  };
  for (const [ip, owner] of Object.entries(pool?.status?.used ?? {}))
    take(ip, owner.pod ?? 'unknown', owner.containerID || `pod:${owner.pod ?? ip}`, owner.ifName);
  // Any address a pod of the node holds in one of the pool's vSwitches, whatever its ENI's state now.
  const cidrs = (pool?.status?.enis ?? []).flatMap((e) => (e.vSwitchCIDR ? [ipaddr.parseCIDR(e.vSwitchCIDR)] : []));
  const ours = (ip: string) =>
    known(pool, ip) !== undefined ||
    (ipaddr.isValid(ip) && cidrs.some((c) => ipaddr.parse(ip).kind() === c[0].kind() && ipaddr.parse(ip).match(c)));
  for (const p of pods ?? []) {
    if (p.hostNetwork) continue;
    for (const ip of new Set([...(p.podIP ? [p.podIP] : []), ...Object.keys(p.interfaces ?? {})]))
      if (ours(ip)) take(ip, p.pod, `pod:${p.pod}`);
  }
  // Cool-downs the agent reported still run: the VPC must not get those addresses back early.
  for (const [ip, until] of Object.entries(pool?.status?.cooling ?? {})) {
    const end = Date.parse(until);
    if (!held.has(ip) && end > now && !((cooling[ip] ?? 0) >= end)) cooling[ip] = end;
  }
  return { state: { allocations, cooling }, recovered };
}

/** Recovered allocations whose pod is no longer on the node: their addresses can cool down and return. */
export function departedRecoveries(state: AgentState, pods: NodePod[]): Allocation[] {
  const present = new Set(pods.map((p) => p.pod));
  return Object.values(state.allocations).filter((a) => a.recovered && !present.has(a.pod));
}

/**
 * Why a pod interface found no address, in the pool's own words, for the CNI error the runtime
 * shows (`FailedCreatePodSandBox`) and the allocate answer: the pool's condition that says what
 * it waits for (a vSwitch exhausted, the instance's limit, the API quota, an ENI being attached),
 * or what the agent itself waits for.
 */
export function emptyPoolReason(pool: ENIPool | undefined, o: { recovering: boolean; node: string }): string {
  if (o.recovering) return 'the agent is taking back what the pods of the node hold (after a restart)';
  if (!pool)
    return `node ${o.node} has no ENIPool yet (is the eni-ipam operator running, and does a class select the node?)`;
  if (pool.metadata.deletionTimestamp) return `the pool of node ${o.node} is being deleted`;
  const condition = (type: string) => pool.status?.conditions?.find((c) => c.type === type);
  const said = (c: { reason?: string; message?: string }) => `${c.reason}${c.message ? `: ${c.message}` : ''}`;
  const exhausted = condition('Exhausted');
  if (exhausted?.status === 'True') return `the pool is exhausted (${said(exhausted)})`;
  const degraded = condition('Degraded');
  if (degraded?.status === 'True') return `the pool is degraded (${said(degraded)})`;
  const ready = condition('Ready');
  if (ready && ready.status !== 'True') return `the pool is not ready (${said(ready)})`;
  const s = pool.status?.summary;
  return (
    `all ${s?.available ?? 0} pod IPs of the pool are in use or cooling down` +
    ((s?.needed ?? 0) > 0 ? `; ${s!.needed} more are being allocated` : '; the operator adds more as pods wait')
  );
}
