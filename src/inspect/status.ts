import type { Condition, ENIPool, ENIPoolClass } from '../api/types.js';
import { isIpv6 } from '../ipam/families.js';
import { fields, table } from './table.js';

/** A node as the status reads it. */
export interface NodeFact {
  name: string;
  zone?: string;
}

export interface VSwitchRow {
  zone: string;
  vSwitch: string;
  /** Free addresses in the vSwitch as the operator last described it; undefined when no class publishes it. */
  freeIPs?: number;
  /** Pod addresses the pools hold on ENIs of this vSwitch, and how many of them pods use. */
  poolIPs: number;
  usedIPs: number;
  enis: number;
  classes: string[];
}

export interface ZoneRow {
  zone: string;
  nodes: number;
  ready: number;
  notReady: number;
  exhausted: number;
  degraded: number;
}

export interface PoolProblem {
  node: string;
  zone: string;
  /** Exhausted, Degraded, or NotReady (Ready False or Unknown, or no pool at all). */
  state: 'Exhausted' | 'Degraded' | 'NotReady' | 'NoPool';
  reason: string;
  message: string;
}

export interface ClassRow {
  name: string;
  nodes: number;
  valid: string;
  zones: string[];
  vSwitches: string[];
  instanceTypes: string[];
}

export interface ClusterStatus {
  totals: { nodes: number; ready: number; notReady: number; enis: number; availableIPs: number; usedIPs: number };
  vSwitches: VSwitchRow[];
  zones: ZoneRow[];
  problems: PoolProblem[];
  classes: ClassRow[];
}

const condition = (list: Condition[] | undefined, type: string) => list?.find((c) => c.type === type);
const byName =
  <T>(key: (t: T) => string) =>
  (a: T, b: T) =>
    key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;

/**
 * The cluster at a glance, from the objects everyone can read: per zone and vSwitch the room left
 * and what the pools hold of it; nodes whose pools are Ready or not, and why not; per class what it
 * selects. Pure: the caller lists the objects.
 */
export function clusterStatus(pools: ENIPool[], classes: ENIPoolClass[], nodes: NodeFact[]): ClusterStatus {
  const vSwitches = new Map<string, VSwitchRow>();
  const row = (id: string, zone: string) => {
    let r = vSwitches.get(id);
    if (!r) vSwitches.set(id, (r = { zone, vSwitch: id, poolIPs: 0, usedIPs: 0, enis: 0, classes: [] }));
    return r;
  };
  for (const c of classes)
    for (const v of c.status?.vSwitches ?? []) {
      const r = row(v.id, v.zoneID);
      r.freeIPs = v.freeIPs;
      r.classes.push(c.metadata.name);
    }
  const poolOf = new Map(pools.map((p) => [p.metadata.name, p]));
  const zoneOf = (name: string) =>
    poolOf.get(name)?.spec.zoneID ?? nodes.find((n) => n.name === name)?.zone ?? 'unknown';
  const totals = { nodes: nodes.length, ready: 0, notReady: 0, enis: 0, availableIPs: 0, usedIPs: 0 };
  const problems: PoolProblem[] = [];
  for (const p of pools) {
    const used = new Set(Object.keys(p.status?.used ?? {}));
    for (const e of p.status?.enis ?? []) {
      if (!e.vSwitchID) continue;
      const r = row(e.vSwitchID, p.spec.zoneID ?? 'unknown');
      const ips = (e.ips ?? []).filter((ip) => !isIpv6(ip));
      r.enis++;
      r.poolIPs += ips.length;
      r.usedIPs += ips.filter((ip) => used.has(ip)).length;
    }
    totals.enis += p.status?.summary?.enis ?? 0;
    totals.availableIPs += p.status?.summary?.available ?? 0;
    totals.usedIPs += p.status?.summary?.used ?? 0;
  }
  const zones = new Map<string, ZoneRow>();
  for (const n of nodes) {
    const zone = zoneOf(n.name);
    let z = zones.get(zone);
    if (!z) zones.set(zone, (z = { zone, nodes: 0, ready: 0, notReady: 0, exhausted: 0, degraded: 0 }));
    z.nodes++;
    const pool = poolOf.get(n.name);
    const conditions = pool?.status?.conditions;
    const ready = condition(conditions, 'Ready');
    if (ready?.status === 'True') {
      z.ready++;
      totals.ready++;
    } else {
      z.notReady++;
      totals.notReady++;
    }
    const exhausted = condition(conditions, 'Exhausted');
    const degraded = condition(conditions, 'Degraded');
    const say = (state: PoolProblem['state'], c?: Condition) =>
      problems.push({ node: n.name, zone, state, reason: c?.reason ?? '', message: c?.message ?? '' });
    if (!pool)
      say('NoPool', {
        type: 'Ready',
        status: 'False',
        reason: 'NoPool',
        message: 'no ENIPool for this node (does a class select it?)',
        lastTransitionTime: '',
      });
    else if (exhausted?.status === 'True') {
      z.exhausted++;
      say('Exhausted', exhausted);
    } else if (degraded?.status === 'True') {
      z.degraded++;
      say('Degraded', degraded);
    } else if (ready?.status !== 'True')
      say(
        'NotReady',
        ready ?? {
          type: 'Ready',
          status: 'Unknown',
          reason: 'NotPublished',
          message: 'the operator has not published this pool yet',
          lastTransitionTime: '',
        },
      );
  }
  const classRows = classes.map((c) => ({
    name: c.metadata.name,
    nodes: c.status?.matchedNodes ?? 0,
    valid: condition(c.status?.conditions, 'Valid')?.status ?? 'Unknown',
    zones: [...new Set((c.status?.vSwitches ?? []).map((v) => v.zoneID))].sort(),
    vSwitches: (c.status?.vSwitches ?? []).map((v) => v.id),
    instanceTypes: (c.status?.instanceTypes ?? []).map((t) => `${t.name} (${t.nodes})`),
  }));
  return {
    totals,
    vSwitches: [...vSwitches.values()].sort(byName((r) => `${r.zone}/${r.vSwitch}`)),
    zones: [...zones.values()].sort(byName((z) => z.zone)),
    problems: problems.sort(byName((p) => `${p.zone}/${p.node}`)),
    classes: classRows.sort(byName((c) => c.name)),
  };
}

/** The status as tables. */
export function statusText(s: ClusterStatus): string {
  const t = s.totals;
  const parts = [
    fields([
      ['Nodes', `${t.nodes} (${t.ready} Ready, ${t.notReady} not Ready)`],
      ['ENIs', String(t.enis)],
      ['Pod IPs', `${t.availableIPs} available, ${t.usedIPs} used`],
    ]),
    table(
      ['ZONE', 'VSWITCH', 'FREE IN VSWITCH', 'ENIS', 'POOL IPS', 'USED', 'CLASSES'],
      s.vSwitches.map((v) => [
        v.zone,
        v.vSwitch,
        v.freeIPs ?? '?',
        v.enis,
        v.poolIPs,
        v.usedIPs,
        v.classes.join(',') || '-',
      ]),
    ),
    table(
      ['ZONE', 'NODES', 'READY', 'NOT READY', 'EXHAUSTED', 'DEGRADED'],
      s.zones.map((z) => [z.zone, z.nodes, z.ready, z.notReady, z.exhausted, z.degraded]),
    ),
  ];
  if (s.problems.length)
    parts.push(
      table(
        ['NODE', 'ZONE', 'STATE', 'REASON', 'MESSAGE'],
        s.problems.map((p) => [p.node, p.zone, p.state, p.reason, p.message]),
      ),
    );
  parts.push(
    table(
      ['CLASS', 'NODES', 'VALID', 'ZONES', 'VSWITCHES', 'INSTANCE TYPES'],
      s.classes.map((c) => [
        c.name,
        c.nodes,
        c.valid,
        c.zones.join(',') || '-',
        c.vSwitches.join(',') || '-',
        c.instanceTypes.join(', ') || '-',
      ]),
    ),
  );
  return `${parts.join('\n\n')}\n`;
}
