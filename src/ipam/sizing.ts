/** How many IPs a node should have: the pool's policy, resolved (maxAllocate > 0). */
export interface Sizing {
  minAllocate: number;
  preAllocate: number;
  maxAboveWatermark: number;
  /** The node's ceiling: the class's maxAllocate, or the instance type's capacity when that is 0 or lower. */
  maxAllocate: number;
}

/** What a node has: IPs on attached ENIs (`available`), in use, and pods still waiting for one. */
export interface Usage {
  available: number;
  used: number;
  /** Pods scheduled to the node that have no IP yet. */
  pending: number;
}

/**
 * IPs the node lacks. Cilium's formula (keep `preAllocate` free above use, hold at least
 * `minAllocate`, never pass `maxAllocate`), with pending pods counted as use to come, so a
 * burst of pods is served in one step instead of one pre-allocation at a time.
 */
export function needed(s: Sizing, u: Usage): number {
  const free = u.available - u.used;
  let n = s.preAllocate + u.pending - free;
  if (s.minAllocate > 0) n = Math.max(n, s.minAllocate - u.available);
  n = Math.min(n, s.maxAllocate - u.available);
  return Math.max(0, n);
}

/** IPs to ask the cloud for in one step: the need plus the watermark, within the ceiling. */
export function toAllocate(s: Sizing, u: Usage): number {
  const n = needed(s, u);
  if (n === 0) return 0;
  return Math.max(0, Math.min(n + s.maxAboveWatermark, s.maxAllocate - u.available));
}

/**
 * IPs above the need that may be released: what lies above the level an allocation step aims
 * at (use plus `preAllocate`, at least `minAllocate`, plus the watermark and the batch the
 * node's demand calls for, so that a batch still being taken is not released). This is Cilium's
 * formula except in its middle case, where Cilium releases down to `minAllocate +
 * maxAboveWatermark` even below use plus `preAllocate`, so that a pool it just filled can be
 * found in excess at once and flap. Pending pods count as use; an IP in use is never excess.
 */
export function excess(s: Sizing, u: Usage, batch = 0): number {
  const used = u.used + u.pending;
  const level = Math.max(used + s.preAllocate, s.minAllocate) + s.maxAboveWatermark + batch;
  return Math.max(0, Math.min(u.available - level, u.available - used));
}

/** The pool's ceiling: its maxAllocate, bounded by what the instance type can hold. */
export function resolveMaxAllocate(maxAllocate: number, instanceCapacity: number): number {
  return maxAllocate > 0 ? Math.min(maxAllocate, instanceCapacity) : instanceCapacity;
}
