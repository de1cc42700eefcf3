import { CREATE_MAX_IPS, type InstanceLimits } from './capacity.js';

/** An ENI of the node as the planner sees it: a secondary one, or the primary (usePrimaryENI). */
export interface EniView {
  id: string;
  vSwitchId: string;
  /** Only InUse ENIs take new addresses; the others still hold an ENI slot. */
  attached: boolean;
  /** IPv4 addresses on the ENI, its own primary included. */
  ips: number;
  /** The instance's primary ENI (usePrimaryENI): it takes assigns and holds no secondary ENI's slot. */
  primary?: boolean;
}

/** A vSwitch the node's class allows in its zone, with what is known of its free addresses. */
export interface VSwitchView {
  id: string;
  free: number;
  /** Refused addresses lately (IpNotEnough): not used until its free count is refreshed. */
  blocked?: boolean;
  /** Only for assigns to an ENI already in it (the node's own vSwitch, for its primary ENI): no ENI is created here. */
  assignOnly?: boolean;
}

export interface AllocationInput {
  /** IPs to add. */
  want: number;
  /**
   * IPs to add beyond `want` where that costs no call the want alone would not make (the
   * batch learned from the node's demand). A shortfall is judged on `want` alone.
   */
  extra?: number;
  enis: EniView[];
  limits: InstanceLimits;
  /** In the class's order (which `Ordered` follows). */
  vSwitches: VSwitchView[];
  selection: 'MostFreeIPs' | 'Ordered';
  /** ENIs already being created for the node (they hold slots). */
  creating?: number;
  /** Kinds of operation allowed now (one may be held back after failures); both when absent. */
  allow?: { assign: boolean; create: boolean };
}

export type AllocationOp =
  | { kind: 'assign'; eniId: string; vSwitchId: string; count: number }
  | { kind: 'create'; vSwitchId: string; ips: number };

export interface AllocationPlan {
  ops: AllocationOp[];
  /** IPs the plan adds. */
  planned: number;
  /** Why the plan adds fewer than wanted. */
  shortfall?: 'instance-limit' | 'vswitch-exhausted';
}

/** Mutating calls a plan takes: one per assign, two per new ENI (create, attach). */
export const callsOf = (ops: AllocationOp[]): number => ops.reduce((n, op) => n + (op.kind === 'assign' ? 1 : 2), 0);

/**
 * Creates ENIs for `remaining` IPs in free slots, each carrying as many IPs as it may. Each
 * create also takes its own primary address from the vSwitch (the node's, never a pod's).
 */
function planCreates(
  remaining: number,
  slots: number,
  perEni: number,
  free: Map<string, number>,
  order: string[],
  selection: AllocationInput['selection'],
) {
  const ops: AllocationOp[] = [];
  let added = 0;
  while (remaining - added > 0 && ops.length < slots) {
    const wanted = Math.min(perEni, remaining - added);
    const candidates = order.filter((id) => (free.get(id) ?? 0) > 1);
    if (!candidates.length) break;
    const pick =
      selection === 'Ordered'
        ? (candidates.find((id) => free.get(id)! >= wanted + 1) ?? candidates[0]!)
        : candidates.reduce((best, id) => (free.get(id)! > free.get(best)! ? id : best));
    const ips = Math.min(wanted, free.get(pick)! - 1);
    free.set(pick, free.get(pick)! - ips - 1);
    ops.push({ kind: 'create', vSwitchId: pick, ips });
    added += ips;
  }
  return { ops, added };
}

/**
 * The cheapest cloud operations that add `want` IPs to a node within its instance limits and
 * its vSwitches' free addresses, carrying up to `extra` more where no call is added for them:
 * either the cheapest plan for the whole amount, when it takes no more calls, or the plan for
 * `want` with each of its calls filled further (an assign up to its ENI's room, a create up to
 * a whole ENI).
 */
export function planAllocation(input: AllocationInput): AllocationPlan {
  const base = cheapest(input, input.want);
  const extra = input.extra ?? 0;
  let plan = base;
  if (extra > 0 && base.planned > 0) {
    const wide = cheapest(input, input.want + extra);
    const filled = fillCalls(input, base, extra);
    // No more calls and no more new ENIs: a create and an attach do not stand in for two assigns.
    const creates = (p: AllocationPlan) => p.ops.filter((op) => op.kind === 'create').length;
    const cheaper = callsOf(wide.ops) <= callsOf(filled.ops) && creates(wide) <= creates(filled);
    plan = cheaper && wide.planned >= filled.planned ? wide : filled;
  }
  if (base.planned < input.want) {
    const { limits } = input;
    const slots = slotsOf(input);
    const roomLeft =
      input.enis.some((e) => e.attached && e.ips < limits.ipv4PerEni) ||
      slots > base.ops.filter((o) => o.kind === 'create').length;
    return { ...plan, shortfall: roomLeft ? 'vswitch-exhausted' : 'instance-limit' };
  }
  return plan;
}

const usableVSwitches = (input: AllocationInput) => input.vSwitches.filter((v) => !v.blocked && v.free > 0);
const slotsOf = (input: AllocationInput) =>
  (input.allow ?? { create: true }).create
    ? Math.max(0, input.limits.eniQuantity - 1 - input.enis.filter((e) => !e.primary).length - (input.creating ?? 0))
    : 0;
const perEniOf = (limits: InstanceLimits) => Math.min(limits.ipv4PerEni, CREATE_MAX_IPS);

/**
 * The plan's calls, each carrying up to `extra` IPs more in all, within its ENI's room and its
 * vSwitch's free addresses: no call is added.
 */
function fillCalls(input: AllocationInput, plan: AllocationPlan, extra: number): AllocationPlan {
  const free = new Map(usableVSwitches(input).map((v) => [v.id, v.free] as const));
  for (const op of plan.ops)
    free.set(op.vSwitchId, free.get(op.vSwitchId)! - (op.kind === 'assign' ? op.count : op.ips + 1));
  const ipsOn = new Map(input.enis.map((e) => [e.id, e.ips] as const));
  let left = extra;
  const ops = plan.ops.map((op): AllocationOp => {
    const room =
      op.kind === 'assign'
        ? input.limits.ipv4PerEni - ipsOn.get(op.eniId)! - op.count
        : perEniOf(input.limits) - op.ips;
    const more = Math.max(0, Math.min(room, left, free.get(op.vSwitchId)!));
    left -= more;
    free.set(op.vSwitchId, free.get(op.vSwitchId)! - more);
    return op.kind === 'assign' ? { ...op, count: op.count + more } : { ...op, ips: op.ips + more };
  });
  return { ops, planned: plan.planned + (extra - left) };
}

/**
 * The cheapest cloud operations that add `want` IPs. It weighs filling the j roomiest attached
 * ENIs (one AssignPrivateIpAddresses each) against new ENIs (create with all their IPs, then
 * attach: two calls), for every j, and keeps the plan that adds the most IPs in the fewest
 * calls, preferring fewer new ENIs on a tie.
 */
function cheapest(input: AllocationInput, want: number): AllocationPlan {
  const { limits } = input;
  const usable = usableVSwitches(input);
  const order = usable.filter((v) => !v.assignOnly).map((v) => v.id);
  const baseFree = new Map(usable.map((v) => [v.id, v.free] as const));
  const allow = input.allow ?? { assign: true, create: true };
  const slots = slotsOf(input);
  const perEni = perEniOf(limits);
  // An assign-only vSwitch (the node's own) serves the primary ENI alone.
  const assignOnly = new Set(usable.filter((v) => v.assignOnly).map((v) => v.id));
  // The primary ENI's room comes first, always: it needs no create and no attach.
  const roomy = input.enis
    .filter((e) => allow.assign && e.attached && e.ips < limits.ipv4PerEni && baseFree.has(e.vSwitchId))
    .filter((e) => e.primary || !assignOnly.has(e.vSwitchId))
    .sort((a, b) => Number(!!b.primary) - Number(!!a.primary) || a.ips - b.ips || (a.id < b.id ? -1 : 1));

  let best: AllocationPlan | undefined;
  for (let j = roomy[0]?.primary ? 1 : 0; j <= roomy.length; j++) {
    const free = new Map(baseFree);
    const ops: AllocationOp[] = [];
    let planned = 0;
    for (const eni of roomy.slice(0, j)) {
      const count = Math.min(limits.ipv4PerEni - eni.ips, want - planned, free.get(eni.vSwitchId)!);
      if (count <= 0) continue;
      free.set(eni.vSwitchId, free.get(eni.vSwitchId)! - count);
      ops.push({ kind: 'assign', eniId: eni.id, vSwitchId: eni.vSwitchId, count });
      planned += count;
    }
    const creates = planCreates(want - planned, slots, perEni, free, order, input.selection);
    ops.push(...creates.ops);
    planned += creates.added;
    const plan: AllocationPlan = { ops, planned };
    if (
      !best ||
      plan.planned > best.planned ||
      (plan.planned === best.planned && callsOf(plan.ops) < callsOf(best.ops)) ||
      (plan.planned === best.planned &&
        callsOf(plan.ops) === callsOf(best.ops) &&
        creates.ops.length < best.ops.filter((o) => o.kind === 'create').length)
    ) {
      best = plan;
    }
  }
  return best!;
}
