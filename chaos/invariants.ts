import { agentRequest } from '../src/agent/client.js';
import { MUTATING_ACTIONS } from '../src/cloud/limits.js';
import type { CallRecord } from '../testbed/ecs/index.js';
import type { ChaosCluster, OperatorProcess } from './cluster.js';
import { addressesOfKey, prefixAddresses } from '../src/ipam/prefix.js';
import type { Workload } from './workload.js';

export const INVARIANTS = {
  'one-pod-per-ip': 'no IP held by two pods',
  'one-eni-per-ip': 'no IP on two ENIs',
  'no-release-in-use': 'no unassign or delete of an IP a pod holds',
  'no-leak': 'no ENI leaked; ENIs in the cloud = ENIs in pools',
  recovers: 'every pool Ready, the operator ready and leading, in time',
  'within-quota': 'calls during the fault within the quotas',
  'create-tokens': 'every create carries a ClientToken, none repeated without it',
  'silent-once-deposed':
    'no mutating call from a replica after it read another holder in the Lease, lost a conflict on it or stepped down (one retry period of grace)',
} as const;
export type InvariantName = keyof typeof INVARIANTS;

export interface Verdict {
  ok: boolean;
  /** Why not, or what was checked. */
  detail: string;
}

type Holders = Map<string, string[]>;

/**
 * Checks the invariants that must hold at every moment, every `everyMs`: from the emulators'
 * own records (the ECS world and its call journal) and what the pods hold (the workload's
 * record and each agent's GET /v1/allocations). An unassign or delete is checked against what
 * pods held before it and still held after it (both polls), so a release that raced the poll
 * is not blamed.
 */
export class Checker {
  readonly violations: Record<'one-pod-per-ip' | 'one-eni-per-ip' | 'no-release-in-use', string[]> = {
    'one-pod-per-ip': [],
    'one-eni-per-ip': [],
    'no-release-in-use': [],
  };
  polls = 0;
  private timer?: NodeJS.Timeout;
  private lastSeq = 0;
  private previous: Holders = new Map();
  /** What each agent said it holds, last time it answered (a dead agent's pods keep their IPs). */
  private readonly agentHeld = new Map<string, Array<{ pod: string; ip: string }>>();
  private busy = false;

  constructor(
    private readonly c: ChaosCluster,
    private readonly w: Workload,
    private readonly everyMs = 200,
  ) {}

  start(): void {
    this.lastSeq = this.c.ecs.calls().at(-1)?.seq ?? 0;
    this.timer = setInterval(() => void this.tick(), this.everyMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.settle();
  }

  /** Waits for a poll in progress, then polls once more (the calls up to now are judged). */
  async settle(): Promise<void> {
    while (this.busy) await new Promise((r) => setTimeout(r, 20));
    await this.tick();
  }

  /** Forgets the violations seen so far (a new phase starts) and counts polls afresh. */
  reset(): void {
    for (const k of Object.keys(this.violations) as Array<keyof Checker['violations']>) this.violations[k] = [];
    this.polls = 0;
  }

  private note(kind: keyof Checker['violations'], msg: string): void {
    const list = this.violations[kind];
    if (!list.includes(msg) && list.length < 50) list.push(msg);
  }

  private async holders(): Promise<Holders> {
    await Promise.all(
      this.c.agents.map(async (a) => {
        if (a.cilium) {
          const held = [...a.cilium.allocations()].map(([ip, x]) => ({ pod: x.owner ?? '', ip }));
          return void this.agentHeld.set(a.node, held);
        }
        if (!a.child || a.child.exitCode !== null || a.child.signalCode) return;
        try {
          const r = await agentRequest(a.socket, 'GET', '/v1/allocations', undefined, 1000);
          if (r.status === 200)
            this.agentHeld.set(
              a.node,
              (JSON.parse(r.text) as { allocations: Array<{ pod: string; ip: string }> }).allocations,
            );
        } catch {
          // Not answering now: its last answer stands.
        }
      }),
    );
    // A node that left took its pods with it.
    for (const node of [...this.agentHeld.keys()])
      if (!this.c.agents.some((a) => a.node === node)) this.agentHeld.delete(node);
    const out: Holders = new Map();
    const add = (ip: string, who: string) => {
      const list = out.get(ip) ?? [];
      if (!list.includes(who)) out.set(ip, [...list, who]);
    };
    for (const [ip, who] of this.w.holders()) who.forEach((x) => add(ip, x));
    // A pod is named by its node and namespace/name: an agent that recovered it does not know its container.
    for (const [node, allocs] of this.agentHeld) for (const a of allocs) add(a.ip, `${node}/${a.pod}`);
    return out;
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      // Calls answered up to now, judged against the holders before (previous poll) and after (this poll).
      const calls = this.c.ecs.calls().filter((r) => r.seq > this.lastSeq);
      if (calls.length) this.lastSeq = calls.at(-1)!.seq;
      const before = this.previous;
      const now = await this.holders();
      this.polls++;
      for (const [ip, who] of now)
        if (who.length > 1) this.note('one-pod-per-ip', `${ip} held by ${who.join(' and ')}`);
      const onEni = new Map<string, string>();
      for (const e of this.c.ecs.world.enis.values()) {
        for (const ip of [e.primaryIp, ...e.secondaryIps, ...e.ipv4Prefixes.flatMap(prefixAddresses)]) {
          const other = onEni.get(ip);
          if (other && other !== e.id) this.note('one-eni-per-ip', `${ip} on ${other} and ${e.id}`);
          onEni.set(ip, e.id);
        }
      }
      for (const r of calls) {
        if (
          !(r.action === 'UnassignPrivateIpAddresses' || r.action === 'DeleteNetworkInterface') ||
          !['OK', 'DropAnswer'].includes(r.code)
        )
          continue;
        // A prefix the call gave back names all its 16 addresses.
        for (const ip of (r.ips ?? []).flatMap(addressesOfKey)) {
          const held = before.get(ip)?.filter((x) => now.get(ip)?.includes(x));
          if (held?.length)
            this.note(
              'no-release-in-use',
              `${r.action} of ${ip} (${r.eniId}) by ${r.accessKeyId} at ${new Date(r.at).toISOString()} while ${held.join(', ')} held it`,
            );
        }
      }
      this.previous = now;
    } finally {
      this.busy = false;
    }
  }
}

/** Mutating and describe calls per action made by these operators in [from, to). */
export function callsIn(
  c: ChaosCluster,
  operators: OperatorProcess[],
  from: number,
  to: number,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of c.ecs.calls({ since: from })) {
    if (r.at >= to || !operators.some((op) => r.accessKeyId && op.accessKeyIds.has(r.accessKeyId))) continue;
    out[r.action] = (out[r.action] ?? 0) + 1;
  }
  return out;
}

/** Calls sent in the window against each action's quota (burst plus the rate over the window), per caller. */
export function quotaVerdict(c: ChaosCluster, from: number, to: number): Verdict {
  const over: string[] = [];
  for (const op of c.operators) {
    const calls = callsIn(c, [op], from, to);
    for (const [action, n] of Object.entries(calls)) {
      const l = c.limits[action];
      if (!l) continue;
      // A bucket that starts full: the burst, plus the rate for the window (and one refill tick).
      const allowed = Math.floor(l.burst + (l.perMinute * (to - from)) / 60_000) + 1;
      if (n > allowed)
        over.push(
          `${op.accessKeyId} ${action}: ${n} calls in ${((to - from) / 1000).toFixed(0)} s, quota allows ${allowed}`,
        );
    }
  }
  return over.length ? { ok: false, detail: over.join('; ') } : { ok: true, detail: 'every action within its quota' };
}

/** Every create carries a ClientToken; a token's replays all name one ENI. */
export function tokenVerdict(c: ChaosCluster, since: number): Verdict {
  const creates = c.ecs.calls({ since, action: 'CreateNetworkInterface' });
  const missing = creates.filter((r) => !r.clientToken && c.operatorOf(r.accessKeyId));
  const byToken = new Map<string, Set<string>>();
  for (const r of creates)
    if (r.clientToken && r.eniId) byToken.set(r.clientToken, new Set([...(byToken.get(r.clientToken) ?? []), r.eniId]));
  const split = [...byToken].filter(([, ids]) => ids.size > 1);
  if (missing.length || split.length)
    return {
      ok: false,
      detail: `${missing.length} creates without a ClientToken; ${split.length} tokens that made several ENIs`,
    };
  return { ok: true, detail: `${creates.length} creates, ${byToken.size} tokens` };
}

/** The operators' leader-election retry period (the CLI's default): a deposed leader learns within one. */
export const RETRY_PERIOD_MS = 2000;

/** The mutating calls (answered, whatever their answer: they were sent) one operator made after `since`. */
export function mutatingCallsOf(c: ChaosCluster, op: OperatorProcess, since = 0): CallRecord[] {
  return c.ecs
    .calls({ since })
    .filter((r) => MUTATING_ACTIONS.has(r.action) && r.accessKeyId && op.accessKeyIds.has(r.accessKeyId));
}

const seconds = (ms: number) => `${ms >= 0 ? '+' : ''}${(ms / 1000).toFixed(1)} s`;

/**
 * No mutating call from a replica after the moment it stopped leading (it read another holder,
 * lost a conflict or passed its renew deadline: its own log line says when), one retry period
 * of grace aside (calls already on their way). The detail gives, per deposed replica, its last
 * mutating call relative to that moment. Calls are timed by their answer, which is later than
 * their sending: the check errs on the strict side.
 */
export function deposedVerdict(
  c: ChaosCluster,
  operators: OperatorProcess[] = c.operators,
  graceMs = RETRY_PERIOD_MS,
): Verdict {
  const deposed = operators.filter((op) => op.steppedDown);
  if (!deposed.length) return { ok: true, detail: 'no replica stepped down' };
  let ok = true;
  const parts = deposed.map((op) => {
    const s = op.steppedDown!;
    const calls = mutatingCallsOf(c, op, s.at - 60_000);
    const late = calls.filter((r) => r.at > s.at + graceMs);
    if (late.length) ok = false;
    const last = calls.at(-1);
    const why = s.reason === 'other-holder' ? `read another holder (${s.holder})` : s.reason;
    const lastCall = last
      ? `last mutating call ${seconds(last.at - s.at)} from then`
      : 'no mutating call in the minute before';
    const lateCalls = late.length
      ? `${late.length} after the grace: ${late
          .slice(0, 3)
          .map((r) => `${r.action} ${seconds(r.at - s.at)}`)
          .join(', ')}`
      : 'none after the grace';
    return `${op.accessKeyId} ${why} at ${new Date(s.at).toISOString()}: ${lastCall}, ${lateCalls}`;
  });
  return { ok, detail: parts.join('; ') };
}

/**
 * No ENI leaked: waits (up to `withinMs`) until every secondary ENI tagged for the cluster is
 * in a pool's status, and every pool's ENI exists in the cloud.
 */
export async function leakVerdict(c: ChaosCluster, withinMs: number): Promise<Verdict> {
  const deadline = Date.now() + withinMs;
  let detail = '';
  for (;;) {
    const inPools = new Set(c.pools().flatMap((p) => (p.status?.enis ?? []).map((e) => e.id)));
    const cloud = c.clusterEnis().filter((e) => e.status !== 'Deleting');
    const orphans = cloud.filter((e) => !inPools.has(e.id));
    const cloudIds = new Set(cloud.map((e) => e.id));
    const ghosts = [...inPools].filter((id) => !cloudIds.has(id));
    if (!orphans.length && !ghosts.length)
      return { ok: true, detail: `${cloud.length} ENIs in the cloud, all in pools` };
    detail = `${orphans.length} ENIs in the cloud in no pool (${orphans
      .slice(0, 5)
      .map((e) => `${e.id} of ${e.node} ${e.status}`)
      .join(', ')}); ${ghosts.length} ENIs in pools not in the cloud`;
    if (Date.now() > deadline) return { ok: false, detail: `after ${(withinMs / 1000).toFixed(0)} s: ${detail}` };
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Waits until every pool is Ready and an operator is ready and leading; answers the time it took, or undefined. */
export async function waitRecovered(c: ChaosCluster, withinMs: number): Promise<number | undefined> {
  const t0 = Date.now();
  while (Date.now() - t0 < withinMs) {
    if (c.pools().length === c.nodes.length && c.readyPools() === c.nodes.length && (await c.operatorReady(c.leader())))
      return Date.now() - t0;
    await new Promise((r) => setTimeout(r, 200));
  }
  return undefined;
}
