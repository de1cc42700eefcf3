import ipaddr from 'ipaddr.js';
import type { ENIPool, ReleaseAck } from '../api/types.js';

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
   * own records: its container is unknown (`ifName` is `*`), and it goes when its pod does.
   */
  recovered?: boolean;
  /** The CNI network (the configuration's `name`) that asked for it; GC only releases its own. */
  network?: string;
}

/** The agent's own state: what it handed out, and released IPs cooling down before reuse. */
export interface AgentState {
  allocations: Record<string, Allocation>;
  /** IP -> epoch ms when it may be handed out again. */
  cooling: Record<string, number>;
}

export const emptyState = (): AgentState => ({ allocations: {}, cooling: {} });
export const allocationKey = (containerId: string, ifName: string): string => `${containerId}/${ifName}`;

/** What a pod needs to use an address of the pool. */
export interface Lease {
  ip: string;
  prefixLength: number;
  gateway: string;
  eniId: string;
  mac: string;
  vSwitchCidr: string;
}

// poolAddresses by pool object: the informer replaces the object on every change, so an entry
// never goes stale, and every allocation in between (a burst of pod starts) skips the walk.
const addressesOf = new WeakMap<ENIPool, ReadonlyMap<string, Omit<Lease, 'ip'>>>();

/** The IPs of the pool an agent may hand out, with where each lives: InUse ENIs only. */
export function poolAddresses(pool: ENIPool | undefined): ReadonlyMap<string, Omit<Lease, 'ip'>> {
  if (!pool) return new Map();
  let known = addressesOf.get(pool);
  if (!known) addressesOf.set(pool, (known = walkPool(pool)));
  return known;
}

function walkPool(pool: ENIPool): Map<string, Omit<Lease, 'ip'>> {
  const out = new Map<string, Omit<Lease, 'ip'>>();
  for (const eni of pool?.status?.enis ?? []) {
    if (eni.state !== 'InUse' || !eni.vSwitchCIDR) continue;
    const prefixLength = Number(eni.vSwitchCIDR.split('/')[1]);
    for (const ip of eni.ips ?? [])
      out.set(ip, {
        prefixLength,
        gateway: eni.gatewayIP ?? '',
        eniId: eni.id,
        mac: eni.mac ?? '',
        vSwitchCidr: eni.vSwitchCIDR,
      });
  }
  return out;
}

/**
 * The addresses free to hand out now, in a stable order: in the pool, not requested for
 * release (those leave the free list first), not in use, not cooling down.
 */
export function freeAddresses(state: AgentState, pool: ENIPool | undefined, now: number): string[] {
  // A pool being deleted is giving its ENIs back: nothing more is handed out from it.
  if (pool?.metadata.deletionTimestamp) return [];
  const requested = new Set(Object.keys(pool?.status?.releaseRequests ?? {}));
  const inUse = new Set(Object.values(state.allocations).map((a) => a.ip));
  return [...poolAddresses(pool).keys()].filter(
    (ip) => !requested.has(ip) && !inUse.has(ip) && !((state.cooling[ip] ?? 0) > now),
  );
}

export type AllocateResult =
  { state: AgentState; lease: Lease; fresh: boolean } | { state: AgentState; error: 'pool-empty' };

/** Hands an address to a pod interface; the same container and interface get the same address again. */
export function allocate(
  state: AgentState,
  pool: ENIPool | undefined,
  req: { containerId: string; ifName: string; pod: string; network?: string },
  now: number,
): AllocateResult {
  const key = allocationKey(req.containerId, req.ifName);
  const addresses = poolAddresses(pool);
  const existing = state.allocations[key];
  if (existing) {
    const where = addresses.get(existing.ip);
    const lease: Lease = where
      ? { ip: existing.ip, ...where }
      : { ip: existing.ip, prefixLength: 32, gateway: '', eniId: existing.eniId, mac: '', vSwitchCidr: '' };
    return { state, lease, fresh: false };
  }
  const [ip] = freeAddresses(state, pool, now);
  if (!ip) return { state, error: 'pool-empty' };
  const where = addresses.get(ip)!;
  const allocation: Allocation = {
    ip,
    pod: req.pod,
    containerId: req.containerId,
    ifName: req.ifName,
    eniId: where.eniId,
    allocatedAt: now,
    ...(req.network ? { network: req.network } : {}),
  };
  return {
    state: { ...state, allocations: { ...state.allocations, [key]: allocation } },
    lease: { ip, ...where },
    fresh: true,
  };
}

/** Takes an address back; it cools down before anyone gets it again. Unknown containers are fine (idempotent). */
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
    if (a.containerId !== containerId || (ifName !== undefined && a.ifName !== ifName && a.ifName !== '*')) continue;
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
): {
  used: Record<string, { pod: string; containerID: string }>;
  releaseAcks: Record<string, ReleaseAck>;
  cooling: Record<string, string>;
} {
  const used: Record<string, { pod: string; containerID: string }> = {};
  for (const a of Object.values(state.allocations)) used[a.ip] = { pod: a.pod, containerID: a.containerId };
  // Cooling IPs are not free, so the operator counts them as used until the time given.
  const cooling: Record<string, string> = {};
  for (const [ip, until] of Object.entries(state.cooling))
    if (until > now && !used[ip]) cooling[ip] = new Date(until).toISOString();
  // Each answer names the request it answers. Requested IPs are out of the free list
  // (freeAddresses), so an unused one can go at once; one still cooling down gets no answer
  // until its cool-down ends (the VPC could hand it to another node meanwhile).
  const releaseAcks: Record<string, ReleaseAck> = {};
  for (const [ip, requestedAt] of Object.entries(pool?.status?.releaseRequests ?? {})) {
    if (used[ip]) releaseAcks[ip] = { answer: 'do-not-release', requestedAt };
    else if (!cooling[ip]) releaseAcks[ip] = { answer: 'ready', requestedAt };
  }
  return { used, releaseAcks, cooling };
}

/** Allocations whose address the pool no longer has (after a restart, or an ENI taken away). */
export function strayAllocations(state: AgentState, pool: ENIPool | undefined): Allocation[] {
  const addresses = poolAddresses(pool);
  return Object.values(state.allocations).filter((a) => !addresses.has(a.ip));
}

/** A pod of this node as the API server shows it: who holds which address. */
export interface NodePod {
  pod: string;
  podIP?: string;
  /** A host-network pod's address is the node's own, not one of the pool's. */
  hostNetwork?: boolean;
}

/**
 * Takes into the agent's state every address of the pool that someone else says is in use but
 * the state does not hold: the agent's own last report (`status.used`, after a state file was
 * lost) and the pods the API server places on the node. Such an address is kept, never handed
 * out again, until its pod is gone. Returns the new state and what it had to take in.
 */
export function recoverAllocations(
  state: AgentState,
  pool: ENIPool | undefined,
  pods: NodePod[] | undefined,
  now: number,
): { state: AgentState; recovered: Allocation[] } {
  const addresses = poolAddresses(pool);
  const held = new Set(Object.values(state.allocations).map((a) => a.ip));
  const allocations = { ...state.allocations };
  const cooling = { ...state.cooling };
  const recovered: Allocation[] = [];
  const take = (ip: string, pod: string, containerId: string) => {
    if (held.has(ip)) return;
    held.add(ip);
    const a: Allocation = {
      ip,
      pod,
      containerId,
      ifName: '*',
      eniId: addresses.get(ip)?.eniId ?? '',
      allocatedAt: now,
      recovered: true,
    };
    // Keyed by address: one container may have held several.
    allocations[allocationKey(containerId, `*${ip}`)] = a;
    recovered.push(a);
  };
  for (const [ip, owner] of Object.entries(pool?.status?.used ?? {}))
    take(ip, owner.pod ?? 'unknown', owner.containerID || `pod:${owner.pod ?? ip}`);
  // Any address a pod of the node holds in one of the pool's vSwitches, whatever its ENI's state now.
  const cidrs = (pool?.status?.enis ?? []).flatMap((e) => (e.vSwitchCIDR ? [ipaddr.parseCIDR(e.vSwitchCIDR)] : []));
  const ours = (ip: string) =>
    addresses.has(ip) ||
    (ipaddr.isValid(ip) && cidrs.some((c) => ipaddr.parse(ip).kind() === c[0].kind() && ipaddr.parse(ip).match(c)));
  for (const p of pods ?? []) if (p.podIP && !p.hostNetwork && ours(p.podIP)) take(p.podIP, p.pod, `pod:${p.pod}`);
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
