import { sameJson } from '../../kube/same-json.js';
import type { ENIPool, ENIPoolStatus, PoolENI } from '../../api/types.js';
import { ipv6Only, needsIpv6 } from '../../ipam/families.js';
import type { NetworkInterface, VSwitch } from '../../cloud/index.js';
import { IPV6_GATEWAY } from '../../ipam/families.js';
import { vSwitchGateway } from '../../ipam/gateway.js';
import { withoutAddresses } from '../../ipam/pool-plan.js';
import { prefixAddresses } from '../../ipam/prefix.js';

/**
 * The pool's ENIs as published: an ENI's secondary addresses, and every address of its /28
 * prefixes, are usable by pods once it is InUse (its own primary address is the node's: an image
 * configures it on the device).
 */
export function publishedEnis(
  enis: NetworkInterface[],
  vSwitches: VSwitch[],
  spec: Pick<ENIPool['spec'], 'ipFamilies' | 'ipv6Mode'>,
  /** The node's own addresses (its Node's InternalIPs): never published as a pod's, on the primary ENI. */
  nodeAddresses: readonly string[] = [],
): PoolENI[] {
  const routesIpv6 = needsIpv6(spec);
  // An IPv6-only pool's pods take none of the primary ENI's IPv4 (it may be the node's).
  const ipv4Pods = !ipv6Only(spec);
  return (
    enis
      // The node's own addresses on the primary ENI are no pod's (the planner leaves them out alike).
      .map((eni) => (eni.type === 'Primary' ? withoutAddresses(eni, nodeAddresses) : eni))
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
          ips:
            e.status === 'InUse' && (ipv4Pods || e.type !== 'Primary')
              ? [...e.secondaryIps, ...e.ipv4Prefixes.flatMap(prefixAddresses)]
              : [],
          ...(e.ipv4Prefixes.length ? { prefixes: [...e.ipv4Prefixes] } : {}),
          // The ENI's IPv6 addresses (the agent answers release requests for them), and, where the
          // pool's pods use IPv6, the next hop the node routes them through (families.ts). The
          // primary ENI's only where they do: its IPv6 may be the node's own, and no pod's route.
          ...(showsIpv6(e, routesIpv6, vsw)
            ? {
                ipv6s: e.status === 'InUse' ? [...e.ipv6] : [],
                ...(e.ipv6Prefixes.length ? { ipv6Prefixes: e.status === 'InUse' ? [...e.ipv6Prefixes] : [] } : {}),
                ...(vsw?.ipv6Cidr ? { vSwitchIPv6CIDR: vsw.ipv6Cidr } : {}),
                // Also while pods still hold IPv6 of a pool that stopped using it: they keep their route.
                ...((routesIpv6 || e.ipv6.length || e.ipv6Prefixes.length) && vsw?.ipv6Cidr
                  ? { gatewayIPv6: IPV6_GATEWAY }
                  : {}),
              }
            : {}),
        };
      })
      .sort((a, b) => (a.deviceIndex ?? 99) - (b.deviceIndex ?? 99) || (a.id < b.id ? -1 : 1))
  );
}

/**
 * Whether the pool publishes an ENI's IPv6 addresses: a secondary ENI's whenever it holds any
 * (pods keep their route while they hold one of a pool that stopped using IPv6) or the pool's
 * pods use IPv6 in its vSwitch; the primary ENI's only in the latter case.
 */
function showsIpv6(e: NetworkInterface, routesIpv6: boolean, vsw: VSwitch | undefined): boolean {
  const inUse = routesIpv6 && Boolean(vsw?.ipv6Cidr);
  return e.type === 'Primary' ? inUse : e.ipv6.length > 0 || e.ipv6Prefixes.length > 0 || inUse;
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
    if (!sameJson(current?.[k], desired[k])) patch[k] = desired[k];
  }
  const cur = current?.releaseRequests ?? {};
  const want = desired.releaseRequests ?? {};
  const rr: Record<string, string | null> = {};
  for (const ip of Object.keys(cur)) if (!(ip in want)) rr[ip] = null;
  for (const [ip, at] of Object.entries(want)) if (cur[ip] !== at) rr[ip] = at;
  if (Object.keys(rr).length) patch.releaseRequests = rr;
  return Object.keys(patch).length ? patch : undefined;
}

/**
 * Names of release requests: a request's time, to the millisecond, never the same twice from one
 * operator, so that an ack to an earlier request for the same IP cannot pass for an answer to
 * this one. One per operator (its composition root makes it); a pool is planned by one worker at
 * a time, and a name is taken only once a plan used it.
 */
export class RequestStamps {
  private last = 0;

  /** The name the next request would get. */
  next(now: number): string {
    return new Date(Math.max(now, this.last + 1)).toISOString();
  }

  /** A plan used `stamp`: no later request gets it, or an earlier time. */
  took(stamp: string): void {
    this.last = Math.max(this.last, Date.parse(stamp));
  }

  /** A name, taken at once. */
  take(now: number): string {
    const stamp = this.next(now);
    this.took(stamp);
    return stamp;
  }
}
