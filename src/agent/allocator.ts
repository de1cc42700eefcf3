import type { ENIPool } from '../api/types.js';

/** One pod interface's address, as the agent hands it out and records it. */
export interface Allocation {
  ip: string;
  /** `namespace/name` of the pod. */
  pod: string;
  containerId: string;
  ifName: string;
  eniId: string;
  allocatedAt: number;
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
    for (const ip of eni.ips ?? []) out.set(ip, { prefixLength, gateway: eni.gatewayIP ?? '', eniId: eni.id, mac: eni.mac ?? '', vSwitchCidr: eni.vSwitchCIDR });
  }
  return out;
}

/**
 * The addresses free to hand out now, in a stable order: in the pool, not requested for
 * release (those leave the free list first), not in use, not cooling down.
 */
export function freeAddresses(state: AgentState, pool: ENIPool | undefined, now: number): string[] {
  const requested = new Set(Object.keys(pool?.status?.releaseRequests ?? {}));
  const inUse = new Set(Object.values(state.allocations).map((a) => a.ip));
  return [...poolAddresses(pool).keys()].filter((ip) => !requested.has(ip) && !inUse.has(ip) && !((state.cooling[ip] ?? 0) > now));
}

export type AllocateResult = { state: AgentState; lease: Lease; fresh: boolean } | { state: AgentState; error: 'pool-empty' };

/** Hands an address to a pod interface; the same container and interface get the same address again. */
export function allocate(state: AgentState, pool: ENIPool | undefined, req: { containerId: string; ifName: string; pod: string; network?: string }, now: number): AllocateResult {
  const key = allocationKey(req.containerId, req.ifName);
  const addresses = poolAddresses(pool);
  const existing = state.allocations[key];
  if (existing) {
    const where = addresses.get(existing.ip);
    const lease: Lease = where ? { ip: existing.ip, ...where } : { ip: existing.ip, prefixLength: 32, gateway: '', eniId: existing.eniId, mac: '', vSwitchCidr: '' };
    return { state, lease, fresh: false };
  }
  const [ip] = freeAddresses(state, pool, now);
  if (!ip) return { state, error: 'pool-empty' };
  const where = addresses.get(ip)!;
  const allocation: Allocation = { ip, pod: req.pod, containerId: req.containerId, ifName: req.ifName, eniId: where.eniId, allocatedAt: now, ...(req.network ? { network: req.network } : {}) };
  return { state: { ...state, allocations: { ...state.allocations, [key]: allocation } }, lease: { ip, ...where }, fresh: true };
}

/** Takes an address back; it cools down before anyone gets it again. Unknown containers are fine (idempotent). */
export function release(state: AgentState, containerId: string, ifName: string | undefined, now: number, cooldownMs: number): { state: AgentState; released: string[] } {
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

/** The agent's part of the pool status: who uses which IP, and its answers to release requests. */
export function agentStatus(
  state: AgentState,
  pool: ENIPool | undefined,
  now: number,
): { used: Record<string, { pod: string; containerID: string }>; releaseAcks: Record<string, 'ready' | 'do-not-release'>; cooling: Record<string, string> } {
  const used: Record<string, { pod: string; containerID: string }> = {};
  for (const a of Object.values(state.allocations)) used[a.ip] = { pod: a.pod, containerID: a.containerId };
  // Cooling IPs are not free, so the operator counts them as used until the time given.
  const cooling: Record<string, string> = {};
  for (const [ip, until] of Object.entries(state.cooling)) if (until > now && !used[ip]) cooling[ip] = new Date(until).toISOString();
  const releaseAcks: Record<string, 'ready' | 'do-not-release'> = {};
  // Requested IPs are out of the free list (freeAddresses), so an unused one can go at once.
  for (const ip of Object.keys(pool?.status?.releaseRequests ?? {})) releaseAcks[ip] = used[ip] ? 'do-not-release' : 'ready';
  return { used, releaseAcks, cooling };
}

/** Allocations whose address the pool no longer has (after a restart, or an ENI taken away). */
export function strayAllocations(state: AgentState, pool: ENIPool | undefined): Allocation[] {
  const addresses = poolAddresses(pool);
  return Object.values(state.allocations).filter((a) => !addresses.has(a.ip));
}
