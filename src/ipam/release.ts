import type { ENIPoolStatus } from '../api/types.js';

/** A /28 prefix of an ENI and its addresses: requested, answered and released whole. */
export interface PrefixUnit {
  prefix: string;
  ips: string[];
}

/** One of the node's ENIs that the operator created, with its addresses. */
export interface ReleasableEni {
  id: string;
  /** The ENI's own primary address: released only with the ENI. */
  primaryIp: string;
  /** Its secondary addresses. */
  secondaryIps: string[];
  /** Its /28 prefixes (ipv4Mode Prefix): each goes only whole, once none of its addresses is in use. */
  prefixes?: PrefixUnit[];
  /** Never deleted (the instance's primary ENI): emptied, its addresses are unassigned instead. */
  keep?: boolean;
  /** Its addresses are released before any other ENI's (a primary ENI the class no longer uses). */
  drain?: boolean;
}

/** The agent's answer to one release request, naming the request by its requested-at time. */
export interface Ack {
  answer: 'ready' | 'do-not-release';
  requestedAt: string;
}

export interface ReleaseInput {
  enis: ReleasableEni[];
  /** IPs the agent reports in use. */
  used: Set<string>;
  /** IPs cooling down after a pod released them: not releasable until the cool-down ends. */
  cooling?: Set<string>;
  /** How many IPs the pool has above its need now (a prefix counts its 16). */
  excess: number;
  /**
   * Addresses of excess kept on single IPs (a Prefix-mode pool: its allocations round up to a
   * whole /28, so up to 15 above the need are no reason to give single IPs back).
   */
  singleSlack?: number;
  /** Since when the pool has been in excess without a break (ms), or undefined. */
  excessSince?: number;
  now: number;
  delayMs: number;
  /** Outstanding requests: IP or prefix -> the request's name (its requested-at time). */
  requests: Map<string, string>;
  acks: Map<string, Ack>;
  deleteEmptyEnis: boolean;
}

export interface ReleasePlan {
  /** IPs and prefixes to add to status.releaseRequests. */
  request: string[];
  /** Requests to take back (in use, refused, gone from the ENIs, or beyond the excess and not yet confirmed). */
  withdraw: string[];
  /** Confirmed IPs and prefixes to unassign, per ENI. */
  unassign: Array<{ eniId: string; ips: string[]; prefixes?: string[] }>;
  /** ENIs whose every address was confirmed: detach and delete. */
  deleteEnis: string[];
}

/** The agent's answer to the request outstanding for `ip`; an answer to any other request is stale and ignored. */
export function answerTo(
  ip: string,
  requests: ReadonlyMap<string, string>,
  acks: ReadonlyMap<string, Ack>,
): Ack['answer'] | undefined {
  const ack = acks.get(ip);
  const request = requests.get(ip);
  return ack && request !== undefined && ack.requestedAt === request ? ack.answer : undefined;
}

/** What a release request names: one secondary address, or a prefix with all its addresses. */
interface Unit {
  key: string;
  ips: string[];
  prefix: boolean;
}

const unitsOf = (e: ReleasableEni): Unit[] => [
  ...e.secondaryIps.map((ip) => ({ key: ip, ips: [ip], prefix: false })),
  ...(e.prefixes ?? []).map((p) => ({ key: p.prefix, ips: p.ips, prefix: true })),
];

/**
 * The release handshake as pure planning. Excess IPs that stayed excess for the delay are
 * requested, from the ENIs with the fewest IPs in use first so that ENIs empty out; an IP is
 * released only on a `ready` that answers its current request (the agent has taken it off its
 * free list for that request), and such a confirmed IP is released rather than withdrawn.
 * Refused, in-use and vanished requests are withdrawn. An IP in use or cooling down is never
 * requested, and an IP in use is never released. A prefix is one unit throughout: requested
 * only when none of its addresses is in use or cooling and the excess covers all 16, answered
 * by one ack, withdrawn when any of its addresses is taken.
 */
export function planRelease(i: ReleaseInput): ReleasePlan {
  const plan: ReleasePlan = { request: [], withdraw: [], unassign: [], deleteEnis: [] };
  const units = new Map(i.enis.flatMap(unitsOf).map((u) => [u.key, u] as const));
  const anyUsed = (u: Unit) => u.ips.some((ip) => i.used.has(ip));
  const answer = (key: string) => answerTo(key, i.requests, i.acks);
  const confirmed = (key: string) => outstanding.has(key) && answer(key) === 'ready' && !anyUsed(units.get(key)!);
  const outstanding = new Set(i.requests.keys());
  const withdraw = (key: string) => {
    plan.withdraw.push(key);
    outstanding.delete(key);
  };
  // An ENI's primary address is the node's, never a pod's: nothing to ask of it.
  for (const key of [...outstanding]) {
    const u = units.get(key);
    if (!u || anyUsed(u) || answer(key) === 'do-not-release') withdraw(key);
  }
  const size = (key: string) => units.get(key)!.ips.length;
  const requested = () => [...outstanding].reduce((n, key) => n + size(key), 0);
  // Too many outstanding for today's excess: withdraw unconfirmed requests (confirmed ones are
  // released), and a confirmed prefix too: 16 addresses would be taken again at once.
  for (const key of [...outstanding].filter((x) => !confirmed(x))) {
    if (requested() <= i.excess) break;
    withdraw(key);
  }
  for (const key of [...outstanding].filter((x) => units.get(x)!.prefix)) {
    if (requested() <= i.excess) break;
    withdraw(key);
  }

  const due = i.excessSince !== undefined && i.now - i.excessSince >= i.delayMs;
  let toRequest = due ? i.excess - requested() : 0;
  if (toRequest > 0) {
    const usedOn = (e: ReleasableEni) =>
      unitsOf(e).reduce((n, u) => n + u.ips.filter((ip) => i.used.has(ip)).length, 0);
    const order = [...i.enis].sort(
      (a, b) => Number(!!b.drain) - Number(!!a.drain) || usedOn(a) - usedOn(b) || (a.id < b.id ? -1 : 1),
    );
    const idle = (u: Unit) => !outstanding.has(u.key) && u.ips.every((ip) => !i.used.has(ip) && !i.cooling?.has(ip));
    for (const eni of order) {
      for (const u of unitsOf(eni).filter(idle)) {
        if (u.ips.length > toRequest - (u.prefix ? 0 : (i.singleSlack ?? 0))) continue;
        plan.request.push(u.key);
        toRequest -= u.ips.length;
      }
      if (toRequest === 0) break;
    }
  }
  for (const eni of i.enis) {
    const own = unitsOf(eni);
    // Every pod address confirmed free: the ENI goes whole. Its primary is the node's, but a pod
    // may still hold it (handed out before eni-ipam kept primaries for the node): then it stays.
    if (
      i.deleteEmptyEnis &&
      !eni.keep &&
      own.length > 0 &&
      own.every((u) => confirmed(u.key)) &&
      !i.used.has(eni.primaryIp)
    ) {
      plan.deleteEnis.push(eni.id);
      continue;
    }
    const done = own.filter((u) => confirmed(u.key));
    const prefixes = done.filter((u) => u.prefix).map((u) => u.key);
    if (done.length)
      plan.unassign.push({
        eniId: eni.id,
        ips: done.filter((u) => !u.prefix).map((u) => u.key),
        ...(prefixes.length ? { prefixes } : {}),
      });
  }
  return plan;
}

/** The acks of a status that name a request; one of the old shape (a bare string) answers none. */
export const acksOf = (status: ENIPoolStatus | undefined): Map<string, Ack> =>
  new Map(Object.entries(status?.releaseAcks ?? {}).filter(([, a]) => typeof a === 'object' && a !== null));

/**
 * Whether a status shows an address the agent confirmed free for its current request: planning
 * on it may unassign, so the operator first reads the pool afresh (a cache may be older than
 * the agent's last word, or than the operator's own last write).
 */
export function showsConfirmedRelease(status: ENIPoolStatus | undefined): boolean {
  const requests = new Map(Object.entries(status?.releaseRequests ?? {}));
  const acks = acksOf(status);
  const used = status?.used ?? {};
  return [...requests.keys()].some((ip) => !(ip in used) && answerTo(ip, requests, acks) === 'ready');
}
