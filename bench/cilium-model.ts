import type { Fixture } from '../testbed/ecs/index.js';

/**
 * Cilium's own operator (cilium-operator-alibabacloud) filling the same nodes, by its published
 * algorithm (reference/anchors.md, "Cilium's AlibabaCloud ENI operator"): computed from the
 * world, not run. What it does per node, one cloud change per maintenance pass, the next pass
 * only after a sync that started after the change:
 * - the pool counts every address of the node's secondary ENIs, the ENIs' own primaries too,
 *   and `needed = pre-allocate - available` (no pod is in use during a scale-up);
 * - a change adds addresses to the first secondary ENI with room (AssignPrivateIpAddresses), or
 *   else creates an ENI with at most 10 (CreateNetworkInterface, AttachNetworkInterface, then
 *   polls for InUse, 6 times about 2.5 s apart);
 * - after a change, a resync of the instance (DescribeNetworkInterfaces) before its addresses
 *   are published.
 * One token bucket for the whole operator, 4 QPS with a burst of 20, takes Create, Attach and
 * DescribeNetworkInterfaces; Assign and the attach polls (counted, as DescribeNetworkInterfaces
 * calls of their own) bypass it. Left out, so that the result stays a floor for Cilium: the
 * full resync every minute (it re-lists every ENI, vSwitch and VPC through the same bucket), a
 * sync of an instance it does not know yet when its node joins, the limit on parallel
 * allocation workers, and the time a call itself takes.
 */

export const CILIUM_BUCKET = { qps: 4, burst: 20 };
const POLL_MS = 2500;
const POLLS = 6;
const MAX_IPS_AT_CREATE = 10;

export interface CiliumScaleUp {
  /** Cloud calls by action: the mutating ones, the per-instance resyncs, and the attach polls. */
  calls: Record<string, number>;
  /** Calls that waited on the operator's one bucket. */
  bucketCalls: number;
  /** Emulated ms from the nodes joining until every node's pool holds pre-allocate addresses. */
  ms: number;
  /** Each node's time until its pool was full, emulated ms, sorted. */
  readyMs: number[];
}

type Change = { kind: 'create' | 'assign'; ips: number };

/** The changes one node goes through, in order, from an empty pool to `want` addresses. */
export function ciliumChanges(limits: { eniQuantity: number; ipv4PerEni: number }, preAllocate: number): Change[] {
  // max-allocate 0 means what the instance holds: every secondary ENI full.
  const want = Math.min(preAllocate, Math.max(0, limits.eniQuantity - 1) * limits.ipv4PerEni);
  const enis: number[] = [];
  const changes: Change[] = [];
  for (let have = 0; have < want;) {
    const needed = want - have;
    const room = enis.findIndex((n) => n < limits.ipv4PerEni);
    if (room >= 0) {
      const ips = Math.min(needed, limits.ipv4PerEni - enis[room]!);
      enis[room]! += ips;
      changes.push({ kind: 'assign', ips });
      have += ips;
    } else {
      const ips = Math.min(needed, limits.ipv4PerEni, MAX_IPS_AT_CREATE);
      enis.push(ips);
      changes.push({ kind: 'create', ips });
      have += ips;
    }
  }
  return changes;
}

/** A FIFO token bucket (GCRA): the time a call asked for at `at` may go. */
function tokenBucket(qps: number, burst: number): (at: number) => number {
  const interval = 1000 / qps;
  const tolerance = (burst - 1) * interval;
  let theoretical = 0;
  return (at) => {
    const grant = Math.max(at, theoretical - tolerance);
    theoretical = Math.max(theoretical, grant) + interval;
    return grant;
  };
}

/** Each node's steps: a call through the bucket, one that bypasses it, or the attach polls. */
type Step = 'Create' | 'Attach' | 'InUse' | 'Assign' | 'Resync';
const stepsOf = (c: Change): Step[] =>
  c.kind === 'create' ? ['Create', 'Attach', 'InUse', 'Resync'] : ['Assign', 'Resync'];
const IN_BUCKET: ReadonlySet<Step> = new Set(['Create', 'Attach', 'Resync']);
const ACTION: Record<Exclude<Step, 'InUse'>, string> = {
  Create: 'CreateNetworkInterface',
  Attach: 'AttachNetworkInterface',
  Assign: 'AssignPrivateIpAddresses',
  Resync: 'DescribeNetworkInterfaces',
};

/** Every node of the world joins at once with an empty pool: the calls and the time Cilium's operator needs. */
export function ciliumScaleUp(world: Fixture, preAllocate: number): CiliumScaleUp {
  const types = new Map(world.instanceTypes.map((t) => [t.id, t]));
  const attachMs = world.delays?.attachMs ?? 0;
  // The first poll right after the attach, then every 2.5 s: the ENI is seen InUse at the first poll after it is.
  const waits = Math.max(1, Math.ceil(attachMs / POLL_MS));
  if (waits > POLLS - 1)
    throw new Error(`an attach of ${attachMs} ms outlasts Cilium's ${POLLS} polls 2.5 s apart: every ENI fails`);
  const POLL_CALLS = 'DescribeNetworkInterfaces (attach polls)';
  const nodes = world.instances.map((i) => {
    const t = types.get(i.instanceType)!;
    const steps = ciliumChanges(
      { eniQuantity: t.eniQuantity, ipv4PerEni: t.eniPrivateIpAddressQuantity },
      preAllocate,
    ).flatMap(stepsOf);
    return { steps, next: 0, at: 0 };
  });
  const grant = tokenBucket(CILIUM_BUCKET.qps, CILIUM_BUCKET.burst);
  const calls: Record<string, number> = {};
  let bucketCalls = 0;
  const readyMs: number[] = [];
  // Steps go in the order they are asked for (ties: the node listed first), so the bucket serves first come, first served.
  for (;;) {
    let node: (typeof nodes)[number] | undefined;
    for (const n of nodes) if (n.next < n.steps.length && (!node || n.at < node.at)) node = n;
    if (!node) break;
    const step = node.steps[node.next++]!;
    if (step === 'InUse') {
      node.at += waits * POLL_MS;
      calls[POLL_CALLS] = (calls[POLL_CALLS] ?? 0) + waits + 1;
    } else {
      calls[ACTION[step]] = (calls[ACTION[step]] ?? 0) + 1;
      if (IN_BUCKET.has(step)) {
        node.at = grant(node.at);
        bucketCalls++;
      }
    }
    if (node.next === node.steps.length) readyMs.push(node.at);
  }
  readyMs.sort((a, b) => a - b);
  return { calls, bucketCalls, ms: readyMs.at(-1) ?? 0, readyMs };
}
