import { API_VERSION, POLICY_FIELDS, type ENIPool, type ENIPoolClassSpec, type ENIPoolSpec } from '../api/types.js';
import type { ActionLimit } from '../cloud/limits.js';
import type { InstanceLimits } from '../ipam/capacity.js';
import { familyLimits, ipv6Only, needsIpv6 } from '../ipam/families.js';
import { candidateVSwitches, type SecurityGroupInfo } from '../ipam/placement.js';
import {
  planPool,
  sizingOf,
  type EniFact,
  type PoolMemory,
  type PoolObservation,
  type PoolPlan,
} from '../ipam/pool-plan.js';
import { PREFIX_SIZE } from '../ipam/prefix.js';
import { addCalls, fewestScaleUpCalls, quotaTime, scaleUpWant } from '../ipam/quota-time.js';

/**
 * `kubectl eni-ipam plan`: what N nodes joining a class at once would take, found by running the
 * operator's own planner (planPool) on simulated nodes until each pool is Ready or short, and
 * timed by the quota bound the benchmarks use (ipam/quota-time.ts). The cloud is simulated as
 * the operator's shell would change it: a create gives an attached ENI with all its addresses at
 * once (no attach in flight), an assign adds its addresses; each takes them from its vSwitch's
 * free count, which the nodes share, one node after another.
 */

/** A vSwitch the class may use, as last described. */
export interface WhatIfVSwitch {
  id: string;
  zoneId: string;
  vpcId: string;
  cidr?: string;
  ipv6Cidr?: string;
  /** Free IPv4 addresses (AvailableIpAddressCount). */
  free: number;
  tags: Record<string, string>;
}

export interface WhatIfInput {
  className: string;
  spec: ENIPoolClassSpec;
  /** Nodes joining at once (at least 1). */
  nodes: number;
  instanceType: string;
  limits: InstanceLimits;
  /** Pods each node runs once up (0: just the warm pool); counted in use from the start. */
  podsPerNode: number;
  /** The nodes' zone. */
  zone: string;
  vpcId: string;
  /** The vSwitches the class may use (and the nodes' own, for usePrimaryENI), as last described. */
  vSwitches: WhatIfVSwitch[];
  /** The vSwitch of the nodes' primary ENIs, one of `vSwitches`: usePrimaryENI assigns from it. */
  nodeVSwitchId?: string;
  /** The VPC's security groups: read only when the class selects them by tag. */
  securityGroups?: SecurityGroupInfo[];
  /** Per action, as src/cloud/limits.ts resolves them. */
  quotas: Record<string, Required<ActionLimit>>;
  /** The cloud's attach delay, if known (0 by default). */
  attachDelayMs?: number;
}

/** What one node's pool holds once the planner is done with it. */
export interface NodeWhatIf {
  /** Secondary ENIs created for the node. */
  enis: number;
  /** IPv4 pod addresses (secondary IPs and every address of its /28s; the primary ENI's with usePrimaryENI). */
  ips: number;
  /** Single IPv6 addresses (dual-stack companions, or an IPv6-only pool's pod addresses). */
  ipv6?: number;
  /** IPv4 /28 prefixes (ipv4Mode Prefix). */
  prefixes?: number;
  /** IPv6 /80 prefixes (ipv6Mode Prefix). */
  ipv6Prefixes?: number;
  /** The pool's Ready condition once nothing more is planned (at capacity counts as Ready). */
  ready: boolean;
  /** Why the pool holds less than it wants (a vSwitch, the instance), as the planner says it. */
  shortfall?: string;
  /** Mutating calls the planner made for this node, per action. */
  calls: Record<string, number>;
}

export interface WhatIf {
  /** The first node's pool: every node's when the vSwitches have room for all (else see `byNode`). */
  perNode: NodeWhatIf;
  /** Each node's, in the order planned. */
  byNode: NodeWhatIf[];
  nodesReady: number;
  /** Mutating calls per action for all nodes. */
  calls: Record<string, number>;
  /** Time to all pools Ready at the quotas, for `calls`. */
  predictedSeconds: number;
  /** The fewest calls per action for the pools that would be Ready (the bound's count, bench/bound.ts), and their time: the floor. */
  boundCalls: Record<string, number>;
  boundSeconds: number;
  vSwitches: Array<{ id: string; zoneId: string; freeBefore: number; freeAfter: number }>;
  warnings: string[];
}

/** Plans past this many for one node mean the planner does not settle: a bug to report, not a prediction. */
const MAX_PLANS_PER_NODE = 64;
/** A fixed instant: nothing predicted depends on the time (no release delay passes, no demand is learned). */
const NOW = Date.parse('2000-01-01T00:00:00Z');

/**
 * What `input.nodes` nodes joining the class at once would take: each node planned to the end
 * in turn against the vSwitches' shared free counts, the calls timed at the quotas, and what
 * would run short. Throws a RangeError, naming the class, on a count that is no whole number.
 */
export function whatIf(input: WhatIfInput): WhatIf {
  if (!Number.isInteger(input.nodes) || input.nodes < 1)
    throw new RangeError(
      `plan for class ${input.className}: nodes must be a whole number, at least 1 (got ${input.nodes})`,
    );
  if (!Number.isInteger(input.podsPerNode) || input.podsPerNode < 0)
    throw new RangeError(
      `plan for class ${input.className}: pods per node must be a whole number, at least 0 (got ${input.podsPerNode})`,
    );
  const free = new Map(input.vSwitches.map((v) => [v.id, v.free] as const));
  const addresses = addressSource();
  const outcomes = Array.from({ length: input.nodes }, (_, k) => planNode(input, k, free, addresses));
  const nodes = outcomes.map((o) => o.node);
  const calls: Record<string, number> = {};
  for (const n of nodes) addCalls(calls, n.calls);
  // The bound counts the primary ENI's room only where it can be had: a known vSwitch with room at
  // all (IPv4's; an IPv6-only pool's primary takes none).
  const usesPrimary =
    primaryUsable(input) &&
    (ipv6Only(input.spec) || input.vSwitches.some((v) => v.id === input.nodeVSwitchId && v.free > 0));
  const boundSpec = { ...input.spec, usePrimaryENI: usesPrimary };
  const boundCalls: Record<string, number> = {};
  addCalls(
    boundCalls,
    fewestScaleUpCalls(input.limits, boundSpec, scaleUpWant(input.limits, boundSpec, input.podsPerNode)),
    // The floor of what is predicted: the pools that would be Ready (a pool left short is not one).
    nodes.filter((n) => n.ready).length,
  );
  const attachDelayMs = input.attachDelayMs ?? 0;
  const vSwitches = input.vSwitches.map((v) => ({
    id: v.id,
    zoneId: v.zoneId,
    freeBefore: v.free,
    freeAfter: free.get(v.id)!,
  }));
  return {
    perNode: nodes[0]!,
    byNode: nodes,
    nodesReady: nodes.filter((n) => n.ready).length,
    calls,
    predictedSeconds: quotaTime(calls, input.quotas, attachDelayMs).ms / 1000,
    boundCalls,
    boundSeconds: quotaTime(boundCalls, input.quotas, attachDelayMs).ms / 1000,
    vSwitches,
    warnings: warningsOf(input, outcomes, calls, vSwitches),
  };
}

interface NodeOutcome {
  node: NodeWhatIf;
  /** The planner's reason for a shortfall, or for not being Ready. */
  reason?: string;
  /** Pod addresses the pool still lacks. */
  needed: number;
}

/** The pool spec the operator makes from the class for a node (src/operator/class/node-placement.ts). */
function poolOf(input: WhatIfInput, k: number): ENIPool {
  const name = `${input.className}-node-${k + 1}`;
  const spec: ENIPoolSpec = {
    nodeName: name,
    instanceID: `i-whatif-${k + 1}`,
    instanceType: input.instanceType,
    zoneID: input.zone,
    vpcID: input.vpcId,
    className: input.className,
  };
  for (const f of POLICY_FIELDS) if (input.spec[f] !== undefined) (spec as Record<string, unknown>)[f] = input.spec[f];
  return { apiVersion: API_VERSION, kind: 'ENIPool', metadata: { name, generation: 1 }, spec };
}

/** The instance's limits in the pool's pod family, as the planner sizes the pool (families.ts, ipv6-only.ts). */
const podFamilyLimits = ({ limits, spec }: WhatIfInput): InstanceLimits =>
  ipv6Only(spec) ? { ...limits, ipv4PerEni: (limits.ipv6PerEni ?? 0) + 1 } : familyLimits(limits, spec);

/** With usePrimaryENI, the primary ENI takes addresses only from the node's vSwitch, which must be known. */
const primaryUsable = (input: WhatIfInput): boolean =>
  input.spec.usePrimaryENI === true &&
  input.vSwitches.some((v) => v.id === input.nodeVSwitchId && (!needsIpv6(input.spec) || v.ipv6Cidr));

/** Plans node `k` until the planner changes nothing more, carrying each plan out on the simulated cloud. */
function planNode(input: WhatIfInput, k: number, free: Map<string, number>, addresses: AddressSource): NodeOutcome {
  let pool = poolOf(input, k);
  const spec = pool.spec;
  const instanceId = spec.instanceID!;
  // The pods are counted in use from the start: the pool is planned for its final size at once.
  const used = Object.fromEntries(
    Array.from({ length: input.podsPerNode }, (_, p) => [
      ipv6Only(spec) ? addresses.podIpv6() : addresses.podIpv4(),
      { pod: `default/pod-${p + 1}`, containerID: `whatif-${k + 1}-${p + 1}` },
    ]),
  );
  pool = { ...pool, status: { used } };
  const enis: EniFact[] = [];
  const primary: EniFact = {
    id: `eni-whatif-${k + 1}-primary`,
    status: 'InUse',
    instanceId,
    vSwitchId: input.nodeVSwitchId ?? '',
    primaryIp: addresses.ipv4(),
    secondaryIps: [],
    ours: false,
    removing: false,
    attaching: false,
    primary: true,
  };
  let memory: PoolMemory = { failures: [] };
  const calls: Record<string, number> = {};
  for (let round = 0; round < MAX_PLANS_PER_NODE; round++) {
    const o: PoolObservation = {
      now: NOW,
      mode: 'normal',
      vpcId: input.vpcId,
      pool,
      limits: input.limits,
      instanceEnis: enis,
      ownedEnis: enis,
      primaryEni: primary,
      inFlight: { enis: 0, ips: 0 },
      pendingPods: 0,
      vSwitches: input.vSwitches.map((v) => ({
        id: v.id,
        zoneId: v.zoneId,
        vpcId: v.vpcId,
        free: Math.max(0, free.get(v.id)!),
        tags: v.tags,
        ...(v.ipv6Cidr ? { ipv6Cidr: v.ipv6Cidr } : {}),
        blocked: false,
      })),
      securityGroups: input.securityGroups ?? [],
      removedByUs: new Set(),
      requestStamp: new Date(NOW).toISOString(),
    };
    const plan = planPool(o, memory);
    memory = { ...plan.memory, failures: [] };
    pool = {
      ...pool,
      status: {
        ...pool.status,
        enis: plan.status.eniIds.map((id) => ({ id, state: 'InUse' as const })),
        summary: plan.status.summary,
        releaseRequests: plan.status.releaseRequests,
        conditions: plan.status.conditions,
        observedGeneration: plan.status.observedGeneration,
      },
    };
    if (!changesOf(plan)) return outcomeOf(plan, enis, primary, calls);
    addCalls(calls, carryOut(plan, { enis, primary, instanceId, free, addresses }));
  }
  throw new Error(
    `plan for class ${input.className}: node ${k + 1} (${input.instanceType}) still changes after ` +
      `${MAX_PLANS_PER_NODE} plans; the planner does not settle on this input`,
  );
}

const changesOf = (p: PoolPlan): number =>
  p.adopt.length +
  p.assign.length +
  p.create.length +
  p.assignIpv6.length +
  p.assignIpv6Prefixes.length +
  p.unassign.length +
  p.unassignIpv6.length +
  p.unassignIpv6Prefixes.length +
  p.deleteEnis.length;

interface SimulatedCloud {
  enis: EniFact[];
  primary: EniFact;
  instanceId: string;
  free: Map<string, number>;
  addresses: AddressSource;
}

/**
 * The plan's changes on the simulated cloud, as the pool reconciler and the ENI lifecycle make
 * them (release first, then assigns, then creates), and the mutating calls they take (the ECS
 * action of each, src/cloud/ecs.ts).
 */
function carryOut(plan: PoolPlan, c: SimulatedCloud): Record<string, number> {
  const calls: Record<string, number> = {};
  const call = (action: string) => (calls[action] = (calls[action] ?? 0) + 1);
  const eniOf = (id: string): EniFact => {
    const e = id === c.primary.id ? c.primary : c.enis.find((x) => x.id === id);
    if (!e) throw new Error(`plan names ENI ${id}, which the simulated node does not have`);
    return e;
  };
  const take = (vSwitchId: string, n: number) => c.free.set(vSwitchId, (c.free.get(vSwitchId) ?? 0) - n);
  for (const a of plan.adopt) {
    if (!a.alreadyAttaching) call('AttachNetworkInterface');
    Object.assign(eniOf(a.eniId), { status: 'InUse', instanceId: c.instanceId });
  }
  for (const u of plan.unassign) {
    const e = eniOf(u.eniId);
    const prefixes = u.prefixes ?? [];
    e.secondaryIps = e.secondaryIps.filter((ip) => !u.ips.includes(ip));
    e.ipv4Prefixes = (e.ipv4Prefixes ?? []).filter((p) => !prefixes.includes(p));
    take(e.vSwitchId, -(u.ips.length + PREFIX_SIZE * prefixes.length));
    call('UnassignPrivateIpAddresses');
  }
  for (const u of plan.unassignIpv6) {
    const e = eniOf(u.eniId);
    e.ipv6 = (e.ipv6 ?? []).filter((ip) => !u.ips.includes(ip));
    call('UnassignIpv6Addresses');
  }
  for (const u of plan.unassignIpv6Prefixes) {
    const e = eniOf(u.eniId);
    e.ipv6Prefixes = (e.ipv6Prefixes ?? []).filter((p) => !u.prefixes.includes(p));
    call('UnassignIpv6Addresses');
  }
  for (const a of plan.assign) {
    const e = eniOf(a.eniId);
    if (a.prefix) e.ipv4Prefixes = [...(e.ipv4Prefixes ?? []), ...c.addresses.prefixes(a.count / PREFIX_SIZE)];
    else e.secondaryIps = [...e.secondaryIps, ...c.addresses.ipv4s(a.count)];
    take(a.vSwitchId, a.count);
    call('AssignPrivateIpAddresses');
  }
  for (const a of plan.assignIpv6) {
    const e = eniOf(a.eniId);
    e.ipv6 = [...(e.ipv6 ?? []), ...c.addresses.ipv6s(a.count)];
    call('AssignIpv6Addresses');
  }
  for (const a of plan.assignIpv6Prefixes) {
    const e = eniOf(a.eniId);
    e.ipv6Prefixes = [...(e.ipv6Prefixes ?? []), ...c.addresses.ipv6Prefixes(a.count)];
    call('AssignIpv6Addresses');
  }
  for (const cr of plan.create) {
    c.enis.push({
      id: `eni-whatif-${c.instanceId}-${c.enis.length + 1}`,
      status: 'InUse',
      instanceId: c.instanceId,
      vSwitchId: cr.vSwitchId,
      primaryIp: c.addresses.ipv4(),
      secondaryIps: cr.prefix ? [] : c.addresses.ipv4s(cr.ips),
      ipv4Prefixes: cr.prefix ? c.addresses.prefixes(cr.ips / PREFIX_SIZE) : [],
      ipv6: c.addresses.ipv6s(cr.ipv6 ?? 0),
      ipv6Prefixes: c.addresses.ipv6Prefixes(cr.ipv6Prefixes ?? 0),
      ours: true,
      removing: false,
      attaching: false,
    });
    // Its addresses and its own primary, as the operator counts a create (operator/eni/lifecycle.ts).
    take(cr.vSwitchId, cr.ips + 1);
    call('CreateNetworkInterface');
    call('AttachNetworkInterface');
  }
  for (const id of plan.deleteEnis) {
    const e = eniOf(id);
    take(e.vSwitchId, -(1 + e.secondaryIps.length + PREFIX_SIZE * (e.ipv4Prefixes?.length ?? 0)));
    c.enis.splice(c.enis.indexOf(e), 1);
    call('DetachNetworkInterface');
    call('DeleteNetworkInterface');
  }
  return calls;
}

/** What the node holds once the last plan changed nothing, and what that plan says of it. */
function outcomeOf(plan: PoolPlan, enis: EniFact[], primary: EniFact, calls: Record<string, number>): NodeOutcome {
  const ready = plan.status.conditions.find((c) => c.type === 'Ready');
  const isReady = ready?.status === 'True';
  const all = [primary, ...enis];
  const count = (f: (e: EniFact) => number) => all.reduce((n, e) => n + f(e), 0);
  const prefixes = count((e) => e.ipv4Prefixes?.length ?? 0);
  const ipv6 = count((e) => e.ipv6?.length ?? 0);
  const ipv6Prefixes = count((e) => e.ipv6Prefixes?.length ?? 0);
  const short = plan.memory.shortfall;
  const node: NodeWhatIf = {
    enis: enis.length,
    ips: count((e) => e.secondaryIps.length) + PREFIX_SIZE * prefixes,
    ...(ipv6 ? { ipv6 } : {}),
    ...(prefixes ? { prefixes } : {}),
    ...(ipv6Prefixes ? { ipv6Prefixes } : {}),
    ready: isReady,
    ...(short ? { shortfall: short.message } : !isReady ? { shortfall: ready?.message ?? 'not Ready' } : {}),
    calls,
  };
  return {
    node,
    reason: short?.reason ?? (isReady ? undefined : ready?.reason),
    needed: plan.status.summary.needed ?? 0,
  };
}

function warningsOf(
  input: WhatIfInput,
  outcomes: NodeOutcome[],
  calls: Record<string, number>,
  vSwitches: WhatIf['vSwitches'],
): string[] {
  const warnings: string[] = [];
  const spec = input.spec;
  const of = `class ${input.className}`;
  const total = outcomes.length;
  const byReason = new Map<string, NodeOutcome[]>();
  for (const o of outcomes) if (o.reason) byReason.set(o.reason, [...(byReason.get(o.reason) ?? []), o]);

  const exhausted = byReason.get('VSwitchExhausted') ?? [];
  if (exhausted.length) {
    const candidates = candidateVSwitches(spec, input.vSwitches, input.vpcId, input.zone)
      .filter((v) => !needsIpv6(spec) || v.ipv6Cidr)
      .map((v) => `${v.id} (${v.free} free, ${Math.max(0, vSwitches.find((s) => s.id === v.id)!.freeAfter)} after)`);
    const first = outcomes.indexOf(exhausted[0]!) + 1;
    const lacking = exhausted.reduce((n, o) => n + o.needed, 0);
    const unready = exhausted.filter((o) => !o.node.ready).length;
    warnings.push(
      `the vSwitches of ${of} in zone ${input.zone} run short: ${candidates.join(', ')}; ` +
        `${unready} of ${total} nodes cannot fill their pools (from node ${first} on), ${lacking} addresses short`,
    );
  }
  for (const v of vSwitches.filter((s) => s.freeAfter < 0))
    warnings.push(
      `vSwitch ${v.id} lacks ${-v.freeAfter} IPv4 addresses for the new ENIs' own primaries: ` +
        'creates there fail once it is empty',
    );

  const sizing = sizingOf(poolOf(input, 0).spec, podFamilyLimits(input));
  const wanted = Math.max(sizing.preAllocate + input.podsPerNode, sizing.minAllocate);
  if (wanted > sizing.maxAllocate) {
    const byClass = (spec.maxAllocate ?? 0) > 0 && spec.maxAllocate === sizing.maxAllocate;
    const cap = byClass
      ? `its maxAllocate of ${sizing.maxAllocate}`
      : `${sizing.maxAllocate} pod IPs (${input.instanceType})`;
    const pods =
      input.podsPerNode > sizing.maxAllocate
        ? `; ${input.podsPerNode - sizing.maxAllocate} of its pods get no address`
        : '';
    warnings.push(
      `each node's pool is capped at ${cap}, below podsPerNode ${input.podsPerNode} + preAllocate ` +
        `${sizing.preAllocate} = ${wanted}${pods}`,
    );
  }
  const nodeVSwitch = input.vSwitches.find((v) => v.id === input.nodeVSwitchId);
  if (spec.usePrimaryENI && !nodeVSwitch)
    warnings.push(
      `${of} uses the primary ENI, but the nodes' own vSwitch is not given: its room is not counted, ` +
        'so more ENIs are predicted than the operator creates',
    );
  else if (spec.usePrimaryENI && !primaryUsable(input))
    warnings.push(
      `${of} uses the primary ENI, but the nodes' vSwitch ${nodeVSwitch!.id} has no IPv6 CIDR: ` +
        'the primary ENIs serve no pod of the class, secondary ENIs do',
    );

  // Anything else that leaves pools not Ready (no vSwitch in the zone, no IPv6 on the type, ...),
  // in the planner's words.
  for (const [reason, list] of byReason) {
    if (reason === 'VSwitchExhausted') continue;
    const unready = list.filter((o) => !o.node.ready).length;
    if (unready) warnings.push(`${unready} of ${total} nodes not Ready (${reason}): ${list[0]!.node.shortfall}`);
  }

  for (const [action, n] of Object.entries(calls)) {
    const q = input.quotas[action];
    if (!q || n <= q.burst) continue;
    const waitSeconds = ((n - q.burst) / q.perMinute) * 60;
    warnings.push(
      `${action}: ${n} calls exceed its burst of ${q.burst}; the last waits ${waitSeconds.toFixed(1)} s ` +
        `at ${q.perMinute} a minute`,
    );
  }
  return warnings;
}

interface AddressSource {
  ipv4(): string;
  ipv4s(n: number): string[];
  prefixes(n: number): string[];
  ipv6s(n: number): string[];
  ipv6Prefixes(n: number): string[];
  podIpv4(): string;
  podIpv6(): string;
}

/**
 * Distinct addresses for the simulated ENIs (100.64.0.0/10, fd00::/8) and placeholders for the
 * pods' (198.18.0.0/15, 2001:db8::/32): the planner counts them and tells the families apart, and
 * an aligned /28 is a real one (the release step lists its addresses).
 */
function addressSource(): AddressSource {
  let v4 = 0;
  let v6 = 0;
  let v6Prefix = 0;
  let pod = 0;
  const dotted = (n: number) => [(n >>> 24) & 255, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
  // From 100.64.0.16: every /28 taken there is aligned.
  const cgnat = ((100 << 24) | (64 << 16)) + PREFIX_SIZE;
  const ipv4 = () => dotted(cgnat + v4++);
  const prefix = () => {
    v4 = Math.ceil(v4 / PREFIX_SIZE) * PREFIX_SIZE;
    const p = `${dotted(cgnat + v4)}/28`;
    v4 += PREFIX_SIZE;
    return p;
  };
  const times = <T>(n: number, f: () => T) => Array.from({ length: n }, f);
  return {
    ipv4,
    ipv4s: (n) => times(n, ipv4),
    prefixes: (n) => times(n, prefix),
    ipv6s: (n) => times(n, () => `fd00::${(++v6).toString(16)}`),
    ipv6Prefixes: (n) => times(n, () => `fd00:0:0:1:${(++v6Prefix).toString(16)}::/80`),
    podIpv4: () => dotted(((198 << 24) | (18 << 16)) + ++pod),
    podIpv6: () => `2001:db8::${(++pod).toString(16)}`,
  };
}
