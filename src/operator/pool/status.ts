import type { ENIPoolStatus, PoolENI } from '../../api/types.js';
import type { NetworkInterface, VSwitch } from '../../cloud/index.js';
import { vSwitchGateway } from '../../ipam/gateway.js';

/**
 * The pool's ENIs as published: an ENI's secondary addresses are usable by pods once it is InUse
 * (its own primary address is the node's: an image configures it on the device).
 */
export function publishedEnis(enis: NetworkInterface[], vSwitches: VSwitch[]): PoolENI[] {
  return enis
    .map((e) => {
      const vsw = vSwitches.find((v) => v.id === e.vSwitchId);
      return {
        id: e.id,
        mac: e.mac,
        vSwitchID: e.vSwitchId,
        vSwitchCIDR: vsw?.cidr ?? '',
        gatewayIP: vsw ? vSwitchGateway(vsw.cidr) : '',
        primaryIP: e.primaryIp,
        securityGroupIDs: e.securityGroupIds,
        state: e.status,
        deviceIndex: e.deviceIndex,
        ips: e.status === 'InUse' ? [...e.secondaryIps] : [],
      };
    })
    .sort((a, b) => (a.deviceIndex ?? 99) - (b.deviceIndex ?? 99) || (a.id < b.id ? -1 : 1));
}

/** The operator's part of a pool's status, for a merge patch (the agent's fields are left alone). */
export type OperatorStatus = Pick<
  ENIPoolStatus,
  'enis' | 'summary' | 'releaseRequests' | 'conditions' | 'observedGeneration'
>;

/** A merge patch from the current status to the desired one; null removes a release request. */
export function statusPatch(
  current: ENIPoolStatus | undefined,
  desired: OperatorStatus,
): Record<string, unknown> | undefined {
  const patch: Record<string, unknown> = {};
  for (const k of ['enis', 'summary', 'conditions', 'observedGeneration'] as const) {
    if (JSON.stringify(current?.[k]) !== JSON.stringify(desired[k])) patch[k] = desired[k];
  }
  const cur = current?.releaseRequests ?? {};
  const want = desired.releaseRequests ?? {};
  const rr: Record<string, string | null> = {};
  for (const ip of Object.keys(cur)) if (!(ip in want)) rr[ip] = null;
  for (const [ip, at] of Object.entries(want)) if (cur[ip] !== at) rr[ip] = at;
  if (Object.keys(rr).length) patch.releaseRequests = rr;
  return Object.keys(patch).length ? patch : undefined;
}

let lastStamp = 0;

/**
 * The name of the next release request: its time, to the millisecond, never the same twice in
 * this process, so that an ack to an earlier request for the same IP cannot pass for an answer
 * to this one. Taken only once used (`tookRequestStamp`); a pool is planned by one worker at a time.
 */
export function nextRequestStamp(now: number): string {
  return new Date(Math.max(now, lastStamp + 1)).toISOString();
}

export function tookRequestStamp(stamp: string): void {
  lastStamp = Math.max(lastStamp, Date.parse(stamp));
}

/** A request name, taken at once. */
export function requestStamp(now: number): string {
  const stamp = nextRequestStamp(now);
  tookRequestStamp(stamp);
  return stamp;
}
