import type { ENIPoolStatus } from '../api/types.js';

/** One of the node's ENIs that the operator created, with its addresses. */
export interface ReleasableEni {
  id: string;
  /** The ENI's own primary address: released only with the ENI. */
  primaryIp: string;
  /** Its secondary addresses. */
  secondaryIps: string[];
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
  /** How many IPs the pool has above its need now. */
  excess: number;
  /** Since when the pool has been in excess without a break (ms), or undefined. */
  excessSince?: number;
  now: number;
  delayMs: number;
  /** Outstanding requests: IP -> the request's name (its requested-at time). */
  requests: Map<string, string>;
  acks: Map<string, Ack>;
  deleteEmptyEnis: boolean;
}

export interface ReleasePlan {
  /** IPs to add to status.releaseRequests. */
  request: string[];
  /** Requests to take back (in use, refused, gone from the ENIs, or beyond the excess and not yet confirmed). */
  withdraw: string[];
  /** Confirmed IPs to unassign, per ENI. */
  unassign: Array<{ eniId: string; ips: string[] }>;
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

/**
 * The release handshake as pure planning. Excess IPs that stayed excess for the delay are
 * requested, from the ENIs with the fewest IPs in use first so that ENIs empty out; an IP is
 * released only on a `ready` that answers its current request (the agent has taken it off its
 * free list for that request), and such a confirmed IP is released rather than withdrawn.
 * Refused, in-use and vanished requests are withdrawn. An IP in use or cooling down is never
 * requested, and an IP in use is never released.
 */
export function planRelease(i: ReleaseInput): ReleasePlan {
  const plan: ReleasePlan = { request: [], withdraw: [], unassign: [], deleteEnis: [] };
  const onEnis = new Set(i.enis.flatMap((e) => [e.primaryIp, ...e.secondaryIps]));
  const answer = (ip: string) => answerTo(ip, i.requests, i.acks);
  const confirmed = (ip: string) => outstanding.has(ip) && answer(ip) === 'ready' && !i.used.has(ip);
  const outstanding = new Set(i.requests.keys());
  const withdraw = (ip: string) => {
    plan.withdraw.push(ip);
    outstanding.delete(ip);
  };
  for (const ip of [...outstanding]) {
    if (!onEnis.has(ip) || i.used.has(ip) || answer(ip) === 'do-not-release') withdraw(ip);
  }
  // An ENI's primary address is the node's, never a pod's: nothing to ask of it.
  for (const eni of i.enis) if (outstanding.has(eni.primaryIp)) withdraw(eni.primaryIp);
  // Too many outstanding for today's excess: withdraw unconfirmed requests (confirmed ones are released).
  const over = outstanding.size - i.excess;
  if (over > 0) for (const ip of [...outstanding].filter((x) => !confirmed(x)).slice(0, over)) withdraw(ip);

  const due = i.excessSince !== undefined && i.now - i.excessSince >= i.delayMs;
  let toRequest = due ? i.excess - outstanding.size : 0;
  if (toRequest > 0) {
    const usedOn = (e: ReleasableEni) => e.secondaryIps.filter((ip) => i.used.has(ip)).length;
    const order = [...i.enis].sort(
      (a, b) => Number(!!b.drain) - Number(!!a.drain) || usedOn(a) - usedOn(b) || (a.id < b.id ? -1 : 1),
    );
    for (const eni of order) {
      const candidates = eni.secondaryIps.filter(
        (ip) => !i.used.has(ip) && !outstanding.has(ip) && !i.cooling?.has(ip),
      );
      for (const ip of candidates) {
        if (toRequest === 0) break;
        plan.request.push(ip);
        toRequest--;
      }
      if (toRequest === 0) break;
    }
  }
  for (const eni of i.enis) {
    // Every pod address confirmed free: the ENI goes whole. Its primary is the node's, but a pod
    // may still hold it (handed out before eni-ipam kept primaries for the node): then it stays.
    if (
      i.deleteEmptyEnis &&
      !eni.keep &&
      eni.secondaryIps.length > 0 &&
      eni.secondaryIps.every(confirmed) &&
      !i.used.has(eni.primaryIp)
    ) {
      plan.deleteEnis.push(eni.id);
      continue;
    }
    const ips = eni.secondaryIps.filter(confirmed);
    if (ips.length) plan.unassign.push({ eniId: eni.id, ips });
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
