import type { Condition, ENIPool } from '../api/types.js';
import { inIpv6Prefix } from '../ipam/ipv6-prefix.js';
import { age, fields, table } from './table.js';

/** A pod as `why` reads it. */
export interface PodFact {
  namespace: string;
  name: string;
  uid?: string;
  node?: string;
  hostNetwork: boolean;
  phase?: string;
  ips: string[];
  /** The PodScheduled condition's message when it is not scheduled. */
  unscheduled?: string;
}

/** An Event on the pod, as `kubectl describe` lists it. */
export interface EventFact {
  type: string;
  reason: string;
  message: string;
  from: string;
  count: number;
  /** When it last happened (ms). */
  last: number;
}

export interface AddressPlace {
  ip: string;
  eni?: string;
  vSwitch?: string;
  zone?: string;
  deviceIndex?: number;
  /** The pool's record of who holds it (status.used). */
  holder?: string;
}

export interface PodWhy {
  pod: string;
  node?: string;
  /** Its addresses, each with its ENI and vSwitch where the node's pool has them. */
  addresses: AddressPlace[];
  /** Why it has no address yet, in the pool's words; undefined when it has one. */
  waiting?: string;
  pool?: { conditions: Array<Pick<Condition, 'type' | 'status' | 'reason' | 'message'>> };
  events: EventFact[];
}

const problem = (c: Condition) => (c.type === 'Ready' ? c.status !== 'True' : c.status === 'True');

/** Why a pool cannot give a pod an address: its first condition that says so, or that all are in use. */
function poolReason(pool: ENIPool): string {
  const conditions = pool.status?.conditions ?? [];
  for (const type of ['Exhausted', 'Degraded', 'Ready']) {
    const c = conditions.find((x) => x.type === type);
    if (c && problem(c))
      return `the pool is ${type === 'Ready' ? 'not ready' : type.toLowerCase()} (${c.reason}: ${c.message})`;
  }
  const s = pool.status?.summary;
  return s
    ? `the pool is Ready with ${s.available} available and ${s.used} used: the agent's Events below say what the ADD found`
    : 'the operator has not published the pool yet';
}

/**
 * A pod's address and where it lives (its ENI, vSwitch, zone), or why it has none yet: not
 * scheduled, in the host network, its node has no pool, or what its pool waits for, with the last
 * Events on the pod (the agent's and the runtime's). Pure: the caller reads the objects.
 */
export function podWhy(pod: PodFact, pool: ENIPool | undefined, events: EventFact[]): PodWhy {
  const name = `${pod.namespace}/${pod.name}`;
  const base = { pod: name, node: pod.node, events: [...events].sort((a, b) => a.last - b.last).slice(-10) };
  const poolView = pool && {
    conditions: (pool.status?.conditions ?? []).map(({ type, status, reason, message }) => ({
      type,
      status,
      reason,
      message,
    })),
  };
  const addresses = pod.ips.map((ip): AddressPlace => {
    const eni = pool?.status?.enis?.find(
      (e) => e.ips?.includes(ip) || e.ipv6s?.includes(ip) || (e.ipv6Prefixes ?? []).some((p) => inIpv6Prefix(ip, p)),
    );
    const holder = pool?.status?.used?.[ip]?.pod;
    return {
      ip,
      ...(eni ? { eni: eni.id, vSwitch: eni.vSwitchID, zone: pool?.spec.zoneID, deviceIndex: eni.deviceIndex } : {}),
      ...(holder ? { holder } : {}),
    };
  });
  if (pod.hostNetwork)
    return {
      ...base,
      addresses,
      waiting: addresses.length
        ? undefined
        : 'it runs in the host network: it takes the node’s address, not one of the pool',
    };
  if (addresses.length) return { ...base, addresses, ...(poolView ? { pool: poolView } : {}) };
  if (!pod.node)
    return {
      ...base,
      addresses,
      waiting: `it is not scheduled to a node yet${pod.unscheduled ? `: ${pod.unscheduled}` : ''}`,
    };
  if (!pool)
    return {
      ...base,
      addresses,
      waiting: `node ${pod.node} has no ENIPool (does an ENIPoolClass select it? is the operator running?)`,
    };
  return { ...base, addresses, waiting: poolReason(pool), pool: poolView };
}

/** The answer as `kubectl describe` would print it. */
export function podWhyText(w: PodWhy, now: number): string {
  const rows: Array<[string, string]> = [
    ['Pod', w.pod],
    ['Node', w.node ?? '<none>'],
  ];
  for (const a of w.addresses)
    rows.push([
      'IP',
      a.eni
        ? `${a.ip} on ENI ${a.eni} (device ${a.deviceIndex ?? '?'}), vSwitch ${a.vSwitch}, zone ${a.zone ?? '?'}` +
          (a.holder && a.holder !== w.pod ? ` (the pool says ${a.holder} holds it)` : '')
        : `${a.ip} (not an address of the node's pool)`,
    ]);
  if (!w.addresses.length) rows.push(['IP', '<none>']);
  if (w.waiting) rows.push(['Waiting', w.waiting]);
  for (const c of w.pool?.conditions ?? [])
    rows.push([`Pool ${c.type}`, `${c.status}${c.reason ? ` ${c.reason}` : ''}${c.message ? `: ${c.message}` : ''}`]);
  const out = [fields(rows)];
  out.push(
    w.events.length
      ? `Events:\n${table(
          ['TYPE', 'REASON', 'AGE', 'FROM', 'MESSAGE'],
          w.events.map((e) => [
            e.type,
            e.reason,
            `${age(now - e.last)}${e.count > 1 ? ` (x${e.count})` : ''}`,
            e.from,
            e.message,
          ]),
        )
          .split('\n')
          .map((l) => `  ${l}`)
          .join('\n')}`
      : 'Events: <none>',
  );
  return `${out.join('\n')}\n`;
}
