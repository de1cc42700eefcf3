import { ASSIGN_MAX_PREFIXES, CREATE_MAX_IPS, CREATE_MAX_PREFIXES, type InstanceLimits } from './capacity.js';
import { PREFIX_SIZE } from './prefix.js';

/** An ENI of the node as the planner sees it: a secondary one, or the primary (usePrimaryENI). */
export interface EniView {
  id: string;
  vSwitchId: string;
  /** Only InUse ENIs take new addresses; the others still hold an ENI slot. */
  attached: boolean;
  /** Pod addresses on the ENI (its own primary excluded): `limits.ipv4PerEni` slots' worth at most. */
  ips: number;
  /** The instance's primary ENI (usePrimaryENI): it takes assigns and holds no secondary ENI's slot. */
  primary?: boolean;
  /** Its slots hold /28 prefixes (16 addresses each): it takes prefixes only, never single IPs. */
  prefix?: boolean;
  /** IPv4 slots in use (an address or a prefix each), where `ips` cannot tell (an ENI that came mixed). */
  slots?: number;
}

/** A vSwitch the node's class allows in its zone, with what is known of its free addresses. */
export interface VSwitchView {
  id: string;
  free: number;
  /** Refused addresses lately (IpNotEnough): not used until its free count is refreshed. */
  blocked?: boolean;
  /** Only for assigns to an ENI already in it (the node's own vSwitch, for its primary ENI): no ENI is created here. */
  assignOnly?: boolean;
  /** Refused a /28 lately though it had free addresses: no prefix is planned in it for now. */
  fragmented?: boolean;
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
  /**
   * New ENIs hold /28 prefixes (ipv4Mode Prefix); with `fallback`, those in a fragmented vSwitch
   * hold single IPs instead. Absent: new ENIs hold single IPs.
   */
  prefixes?: { fallback: boolean };
  /**
   * Addresses the plan may add at most (the pool's ceiling less what the node holds): a /28
   * that would cross it is not planned. Unbounded when absent.
   */
  ceiling?: number;
  /** Single addresses one create may carry (IPv6: 10), and one assign; 49 and unbounded when absent. */
  perCall?: { create: number; assign?: number };
}

/** Counts are in addresses; with `prefix`, a multiple of 16 carried as /28 prefixes. */
export type AllocationOp =
  | { kind: 'assign'; eniId: string; vSwitchId: string; count: number; prefix?: true }
  | { kind: 'create'; vSwitchId: string; ips: number; prefix?: true };

export interface AllocationPlan {
  ops: AllocationOp[];
  /** IPs the plan adds. */
  planned: number;
  /** Why the plan adds fewer than wanted: no room, no addresses, or a /28 would cross the ceiling. */
  shortfall?: 'instance-limit' | 'vswitch-exhausted' | 'ceiling';
}

/** Mutating calls a plan takes: one per assign, two per new ENI (create, attach). */
export const callsOf = (ops: AllocationOp[]): number => ops.reduce((n, op) => n + (op.kind === 'assign' ? 1 : 2), 0);

/** Addresses per slot: 16 on an ENI of /28 prefixes, else 1. */
const granuleOf = (prefix: boolean | undefined) => (prefix ? PREFIX_SIZE : 1);
const roundUp = (n: number, g: number) => Math.ceil(n / g) * g;
const roundDown = (n: number, g: number) => Math.floor(n / g) * g;

/** Addresses a create in `vSwitch` carries per slot: 16 (prefixes), 1, or 0 (none may be created there). */
function createGranule(input: AllocationInput, vSwitch: VSwitchView | undefined): number {
  if (!input.prefixes) return 1;
  if (!vSwitch?.fragmented) return PREFIX_SIZE;
  return input.prefixes.fallback ? 1 : 0;
}

/** Addresses one create may carry at granule `g`: 49 secondaries (or `perCall`), or 10 prefixes (ECS limits). */
const perCreate = (input: AllocationInput, g: number) =>
  g === PREFIX_SIZE
    ? Math.min(input.limits.ipv4PerEni, CREATE_MAX_PREFIXES) * g
    : Math.min(input.limits.ipv4PerEni, input.perCall?.create ?? CREATE_MAX_IPS);

/** Room left on an ENI in addresses, and what one assign may add to it (10 prefixes per call). */
function roomOf(limits: InstanceLimits, eni: EniView): number {
  const g = granuleOf(eni.prefix);
  return Math.max(0, limits.ipv4PerEni - (eni.slots ?? Math.ceil(eni.ips / g))) * g;
}
const perAssign = (input: AllocationInput, eni: EniView) =>
  eni.prefix ? ASSIGN_MAX_PREFIXES * PREFIX_SIZE : (input.perCall?.assign ?? Infinity);

/**
 * Creates ENIs for `remaining` IPs in free slots, each carrying as many IPs as it may. Each
 * create also takes its own primary address from the vSwitch (the node's, never a pod's).
 */
function planCreates(
  input: AllocationInput,
  remaining: number,
  ceilingLeft: number,
  slots: number,
  free: Map<string, number>,
  order: string[],
) {
  const ops: AllocationOp[] = [];
  const views = new Map(input.vSwitches.map((v) => [v.id, v] as const));
  const granule = (id: string) => createGranule(input, views.get(id));
  let added = 0;
  while (remaining - added > 0 && ops.length < slots) {
    const wanted = (id: string) =>
      Math.min(
        perCreate(input, granule(id)),
        roundUp(remaining - added, granule(id)),
        roundDown(ceilingLeft - added, granule(id)),
      );
    const candidates = order.filter((id) => granule(id) > 0 && (free.get(id) ?? 0) > granule(id) && wanted(id) > 0);
    if (!candidates.length) break;
    const pick =
      input.selection === 'Ordered'
        ? (candidates.find((id) => free.get(id)! >= wanted(id) + 1) ?? candidates[0]!)
        : candidates.reduce((best, id) => (free.get(id)! > free.get(best)! ? id : best));
    const g = granule(pick);
    const ips = roundDown(Math.min(wanted(pick), free.get(pick)! - 1), g);
    free.set(pick, free.get(pick)! - ips - 1);
    ops.push({ kind: 'create', vSwitchId: pick, ips, ...(g > 1 ? { prefix: true as const } : {}) });
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
    // Nothing at all only because a whole /28 would cross the ceiling: the pool is as full as it may be.
    if (
      input.ceiling !== undefined &&
      base.planned === 0 &&
      cheapest({ ...input, ceiling: undefined }, input.want).planned >= input.want
    )
      return { ...plan, shortfall: 'ceiling' };
    // A create that carries less than its ENI will hold (IPv6: 10 a create) is followed by assigns
    // once it is attached: the want is served in steps, not short.
    const callCap = perCreate(input, 1);
    const staged = callCap < limits.ipv4PerEni && base.ops.some((op) => op.kind === 'create' && op.ips === callCap);
    if (staged) return plan;
    const slots = slotsOf(input);
    // Not only the instance: a slot left, or room on an ENI, means the vSwitches fell short.
    const roomLeft =
      input.enis.some((e) => e.attached && roomOf(limits, e) > 0) ||
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

/**
 * The plan's calls, each carrying up to `extra` IPs more in all, within its ENI's room and its
 * vSwitch's free addresses: no call is added.
 */
function fillCalls(input: AllocationInput, plan: AllocationPlan, extra: number): AllocationPlan {
  const free = new Map(usableVSwitches(input).map((v) => [v.id, v.free] as const));
  for (const op of plan.ops)
    free.set(op.vSwitchId, free.get(op.vSwitchId)! - (op.kind === 'assign' ? op.count : op.ips + 1));
  const enis = new Map(input.enis.map((e) => [e.id, e] as const));
  let left = Math.min(extra, (input.ceiling ?? Infinity) - plan.planned);
  const ops = plan.ops.map((op): AllocationOp => {
    const g = granuleOf(op.prefix);
    const room =
      op.kind === 'assign'
        ? Math.min(roomOf(input.limits, enis.get(op.eniId)!), perAssign(input, enis.get(op.eniId)!)) - op.count
        : perCreate(input, g) - op.ips;
    const more = roundDown(Math.max(0, Math.min(room, left, free.get(op.vSwitchId)!)), g);
    left -= more;
    free.set(op.vSwitchId, free.get(op.vSwitchId)! - more);
    return op.kind === 'assign' ? { ...op, count: op.count + more } : { ...op, ips: op.ips + more };
  });
  const added = ops.reduce((n, op, i) => n + sizeOf(op) - sizeOf(plan.ops[i]!), 0);
  return { ops, planned: plan.planned + added };
}

const sizeOf = (op: AllocationOp) => (op.kind === 'assign' ? op.count : op.ips);

/**
 * What an assign to `eni` adds toward `wanted` more, within its room, the vSwitch's free
 * addresses and the ceiling; a prefix ENI takes whole /28s, and none in a fragmented vSwitch.
 */
function assignAmount(input: AllocationInput, eni: EniView, wanted: number, ceilingLeft: number, free: number): number {
  if (wanted <= 0) return 0;
  if (!eni.prefix) return Math.min(roomOf(input.limits, eni), perAssign(input, eni), wanted, free, ceilingLeft);
  const vSwitch = input.vSwitches.find((v) => v.id === eni.vSwitchId);
  if (vSwitch?.fragmented) return 0;
  const most = Math.min(roomOf(input.limits, eni), perAssign(input, eni), roundDown(free, PREFIX_SIZE));
  return Math.min(most, roundUp(wanted, PREFIX_SIZE), roundDown(ceilingLeft, PREFIX_SIZE));
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
  const ceiling = input.ceiling ?? Infinity;
  // An assign-only vSwitch (the node's own) serves the primary ENI alone.
  const assignOnly = new Set(usable.filter((v) => v.assignOnly).map((v) => v.id));
  // The primary ENI's room comes first, always: it needs no create and no attach.
  const roomy = input.enis
    .filter((e) => allow.assign && e.attached && roomOf(limits, e) > 0 && baseFree.has(e.vSwitchId))
    .filter((e) => e.primary || !assignOnly.has(e.vSwitchId))
    .sort((a, b) => Number(!!b.primary) - Number(!!a.primary) || a.ips - b.ips || (a.id < b.id ? -1 : 1));

  let best: AllocationPlan | undefined;
  for (let j = roomy[0]?.primary ? 1 : 0; j <= roomy.length; j++) {
    const free = new Map(baseFree);
    const ops: AllocationOp[] = [];
    let planned = 0;
    for (const eni of roomy.slice(0, j)) {
      const count = assignAmount(input, eni, want - planned, ceiling - planned, free.get(eni.vSwitchId)!);
      if (count <= 0) continue;
      free.set(eni.vSwitchId, free.get(eni.vSwitchId)! - count);
      ops.push({
        kind: 'assign',
        eniId: eni.id,
        vSwitchId: eni.vSwitchId,
        count,
        ...(eni.prefix ? { prefix: true } : {}),
      });
      planned += count;
    }
    const creates = planCreates(input, want - planned, ceiling - planned, slots, free, order);
    ops.push(...creates.ops);
    planned += creates.added;
    const plan: AllocationPlan = { ops, planned };
    // Judged on what serves the want: a prefix's addresses beyond it are no gain.
    const served = (p: AllocationPlan) => Math.min(p.planned, want);
    if (
      !best ||
      served(plan) > served(best) ||
      (served(plan) === served(best) && callsOf(plan.ops) < callsOf(best.ops)) ||
      (served(plan) === served(best) &&
        callsOf(plan.ops) === callsOf(best.ops) &&
        creates.ops.length < best.ops.filter((o) => o.kind === 'create').length)
    ) {
      best = plan;
    }
  }
  return best!;
}
