/** One of the node's ENIs that the operator created, with its addresses. */
export interface ReleasableEni {
  id: string;
  /** The ENI's own primary address: released only with the ENI. */
  primaryIp: string;
  /** Its secondary addresses. */
  secondaryIps: string[];
}

export interface ReleaseInput {
  enis: ReleasableEni[];
  /** IPs the agent reports in use. */
  used: Set<string>;
  /** How many IPs the pool has above its need now. */
  excess: number;
  /** Since when the pool has been in excess without a break (ms), or undefined. */
  excessSince?: number;
  now: number;
  delayMs: number;
  /** Outstanding requests: IP -> requested at (ms). */
  requests: Map<string, number>;
  acks: Map<string, 'ready' | 'do-not-release'>;
  deleteEmptyEnis: boolean;
}

export interface ReleasePlan {
  /** IPs to add to status.releaseRequests. */
  request: string[];
  /** Requests to take back (no longer excess, or the agent said do-not-release). */
  withdraw: string[];
  /** Acknowledged IPs to unassign, per ENI. */
  unassign: Array<{ eniId: string; ips: string[] }>;
  /** ENIs whose every address was released: detach and delete. */
  deleteEnis: string[];
}

/**
 * The release handshake as pure planning. Excess IPs that stayed excess for the delay are
 * requested, taken from the ENIs with the fewest IPs in use first so that ENIs empty out;
 * the agent's `ready` acks are unassigned, `do-not-release` and no-longer-excess requests are
 * withdrawn. An IP in use is never requested and never unassigned.
 */
export function planRelease(i: ReleaseInput): ReleasePlan {
  const plan: ReleasePlan = { request: [], withdraw: [], unassign: [], deleteEnis: [] };
  const outstanding = new Set(i.requests.keys());
  for (const ip of outstanding) {
    if (i.used.has(ip) || i.acks.get(ip) === 'do-not-release') {
      plan.withdraw.push(ip);
      outstanding.delete(ip);
    }
  }
  // Too many outstanding for today's excess: withdraw those not yet acknowledged first.
  const over = outstanding.size - i.excess;
  if (over > 0) {
    const byPreference = [...outstanding].sort((a, b) => Number(i.acks.get(a) === 'ready') - Number(i.acks.get(b) === 'ready'));
    for (const ip of byPreference.slice(0, over)) {
      plan.withdraw.push(ip);
      outstanding.delete(ip);
    }
  }
  const due = i.excessSince !== undefined && i.now - i.excessSince >= i.delayMs;
  let toRequest = due ? i.excess - outstanding.size : 0;
  if (toRequest > 0) {
    const usedOn = (e: ReleasableEni) => [e.primaryIp, ...e.secondaryIps].filter((ip) => i.used.has(ip)).length;
    const order = [...i.enis].sort((a, b) => usedOn(a) - usedOn(b) || (a.id < b.id ? -1 : 1));
    for (const eni of order) {
      // An ENI whose every address can go (when empty ENIs are deleted) gives its primary too.
      const whole = i.deleteEmptyEnis && usedOn(eni) === 0;
      const candidates = [...eni.secondaryIps, ...(whole ? [eni.primaryIp] : [])].filter((ip) => !i.used.has(ip) && !outstanding.has(ip));
      for (const ip of candidates) {
        if (toRequest === 0) break;
        plan.request.push(ip);
        outstanding.add(ip);
        toRequest--;
      }
      if (toRequest === 0) break;
    }
  }
  for (const eni of i.enis) {
    // Only an ack to a request made in an earlier pass counts: one left from before is stale.
    const ready = (ip: string) => i.requests.has(ip) && outstanding.has(ip) && i.acks.get(ip) === 'ready' && !i.used.has(ip);
    const all = [eni.primaryIp, ...eni.secondaryIps];
    if (i.deleteEmptyEnis && all.every(ready)) {
      plan.deleteEnis.push(eni.id);
      continue;
    }
    const ips = eni.secondaryIps.filter(ready);
    if (ips.length) plan.unassign.push({ eniId: eni.id, ips });
  }
  return plan;
}
