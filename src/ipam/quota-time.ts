import type { ENIPool } from '../api/types.js';
import { CREATE_MAX_IPS, CREATE_MAX_PREFIXES, type InstanceLimits } from './capacity.js';
import { ipv6Only } from './families.js';
import { PREFIX_SIZE } from './prefix.js';

/**
 * The quota bound of a scale-up: how long mutating calls take at the account's per-action API
 * quotas, and the fewest calls a pool that starts empty needs. One model for the benchmarks
 * (bench/bound.ts) and for `kubectl eni-ipam plan`, so that what the plugin predicts and what the
 * benchmarks measure against are the same bound.
 */

/**
 * An action's quota: calls per minute, and calls that may go at once after a quiet spell (the
 * per-minute figure when absent).
 */
export interface ActionQuota {
  perMinute: number;
  burst?: number;
}

export interface QuotaTime {
  /** Per quota-limited action: milliseconds its calls beyond the burst take at its rate. */
  perActionMs: Record<string, number>;
  /** The slowest action (the actions' queues drain side by side), plus one attach delay when an ENI is attached. */
  ms: number;
}

/**
 * How long `calls` take at `quotas`. Each action spends its burst at once and the rest at its
 * rate; an action without a quota costs no time. The last attach still takes one attach delay
 * (the calls before it overlap the queue). Nothing else is counted (no describe, no Kubernetes
 * write), so for the fewest calls this is a floor no operator can beat.
 */
export function quotaTime(
  calls: Readonly<Record<string, number>>,
  quotas: Readonly<Record<string, ActionQuota>>,
  attachDelayMs = 0,
): QuotaTime {
  const perActionMs: Record<string, number> = {};
  for (const [action, n] of Object.entries(calls)) {
    const q = quotas[action];
    if (!q) continue;
    perActionMs[action] = (Math.max(0, n - (q.burst ?? q.perMinute)) / q.perMinute) * 60_000;
  }
  const attach = (calls.AttachNetworkInterface ?? 0) > 0 ? attachDelayMs : 0;
  return { perActionMs, ms: Math.max(0, ...Object.values(perActionMs)) + attach };
}

type BoundSpec = Pick<
  ENIPool['spec'],
  | 'preAllocate'
  | 'minAllocate'
  | 'maxAboveWatermark'
  | 'maxAllocate'
  | 'ipv4Mode'
  | 'ipv6Mode'
  | 'usePrimaryENI'
  | 'ipFamilies'
>;

/**
 * Pod addresses a pool that starts empty is filled to: `pods` in use plus `preAllocate`, at least
 * `minAllocate`, plus the watermark (if that is any), within maxAllocate and what the instance holds. The
 * instance's room counts every IPv4 entry of its secondary ENIs (the ENIs' own primaries too),
 * and the ENIs below carry as many: generous, so that the calls counted stay a floor.
 */
export function scaleUpWant(limits: InstanceLimits, spec: BoundSpec, pods = 0): number {
  // An ENI without a secondary address serves no pod, whatever its primary.
  const perEni = ipv6Only(spec)
    ? (limits.ipv6PerEni ?? 0)
    : limits.ipv4PerEni > 1
      ? limits.ipv4PerEni * (spec.ipv4Mode === 'Prefix' ? PREFIX_SIZE : 1)
      : 0;
  const capacity = Math.max(0, limits.eniQuantity - 1) * perEni;
  const max = spec.maxAllocate && spec.maxAllocate > 0 ? spec.maxAllocate : capacity;
  const need = Math.max((spec.preAllocate ?? 8) + pods, spec.minAllocate ?? 0);
  // The watermark rides on a need: a pool that needs nothing gets nothing (sizing.ts, toAllocate).
  const level = need > 0 ? need + (spec.maxAboveWatermark ?? 0) : 0;
  return Math.max(0, Math.min(capacity, max, level));
}

/**
 * The fewest mutating calls that fill one empty pool to `want` addresses: every ENI created with
 * as many addresses as one create may carry (so no assign), then attached; with usePrimaryENI,
 * one assign fills the primary ENI's room first. IPv6 addresses beyond what a create carries
 * (dual-stack companions, an IPv6-only pool's) are not counted: fewer calls, still a floor.
 * `createMaxIps`: secondary addresses one CreateNetworkInterface may carry (ECS: 49).
 */
export function fewestScaleUpCalls(
  limits: InstanceLimits,
  spec: BoundSpec,
  want: number,
  createMaxIps = CREATE_MAX_IPS,
): Record<string, number> {
  // An IPv6-only pool of /80s needs one /80: an assign on the primary ENI, or one ENI made for it.
  if (ipv6Only(spec) && spec.ipv6Mode === 'Prefix' && want > 0)
    return spec.usePrimaryENI ? { AssignIpv6Addresses: 1 } : { CreateNetworkInterface: 1, AttachNetworkInterface: 1 };
  // What one create carries, its own primary included (as scaleUpWant counts an ENI's room).
  const perCreate = ipv6Only(spec)
    ? (limits.ipv6PerEni ?? 0)
    : spec.ipv4Mode === 'Prefix'
      ? Math.min(limits.ipv4PerEni, CREATE_MAX_PREFIXES) * PREFIX_SIZE
      : Math.min(limits.ipv4PerEni, createMaxIps + 1);
  const slots = Math.max(0, limits.eniQuantity - 1);
  const calls: Record<string, number> = {};
  let rest = want;
  let perEni = perCreate;
  if (spec.usePrimaryENI) {
    // An IPv6-only pool's primary ENI holds IPv6 pod addresses (none of them its own).
    const onPrimary = Math.min(want, ipv6Only(spec) ? (limits.ipv6PerEni ?? 0) : limits.ipv4PerEni - 1);
    if (onPrimary > 0) calls[ipv6Only(spec) ? 'AssignIpv6Addresses' : 'AssignPrivateIpAddresses'] = 1;
    rest = want - onPrimary;
    // Its room is counted exactly, and so are the secondary ENIs' after it.
    perEni = spec.ipv4Mode === 'Prefix' || ipv6Only(spec) ? perCreate : perCreate - 1;
  }
  // No /28 is planned across maxAllocate: what is left below it in whole prefixes.
  if (spec.ipv4Mode === 'Prefix' && !ipv6Only(spec) && (spec.maxAllocate ?? 0) > 0)
    rest = Math.min(rest, Math.floor((spec.maxAllocate! - (want - rest)) / PREFIX_SIZE) * PREFIX_SIZE);
  const enis = rest > 0 && perEni > 0 ? Math.min(slots, Math.ceil(rest / perEni)) : 0;
  if (enis > 0) Object.assign(calls, { CreateNetworkInterface: enis, AttachNetworkInterface: enis });
  return calls;
}

/** Per-action counts added up. */
export function addCalls(into: Record<string, number>, more: Readonly<Record<string, number>>, times = 1): void {
  for (const [action, n] of Object.entries(more)) into[action] = (into[action] ?? 0) + n * times;
}
