import type { ENIPool } from '../api/types.js';
import type { NetworkInterface, VSwitch } from '../cloud/index.js';
import { forecastFree, type Forecast, type FreeSample } from '../ipam/headroom.js';
import type { ShortfallReason } from '../ipam/pool-plan.js';

/**
 * The reasons of an Exhausted pool that lie in its zone's vSwitches (the others, InstanceLimit
 * and QuotaExceeded, are the node's or the account's): another vSwitch in the zone would help.
 */
export const VSWITCH_SHORTFALLS = [
  'VSwitchExhausted',
  'VSwitchFragmented',
  'NoVSwitchInZone',
] as const satisfies readonly ShortfallReason[];
export type VSwitchShortfall = (typeof VSWITCH_SHORTFALLS)[number];

/** A vSwitch's room: what is free, what our pools hold of it, and how long the free part lasts. */
export interface VSwitchHeadroom {
  id: string;
  zone: string;
  /** Free addresses, as last described (less what our own calls took since). */
  free: number;
  /** IPv4 addresses on the pools' ENIs in this vSwitch (`available`), and of those, the ones pods hold (`used`). */
  pooled: { available: number; used: number };
  /** Absent until the describes of the window say enough (headroom.ts). */
  forecast?: Forecast;
}

/** The fleet as the caches see it, read at each scrape. */
export interface FleetView {
  nodes: Record<'ready' | 'in-deficit' | 'at-capacity' | 'error', number>;
  enis: Record<string, number>;
  vSwitches: VSwitchHeadroom[];
  /**
   * Per zone (of a vSwitch or a pool), the pools below their preAllocate/minAllocate target
   * (needed > 0) that the operator cannot fill for lack of room in the zone's vSwitches, by
   * Exhausted reason; 0 for the reasons none has.
   */
  zones: Array<{ zone: string; short: Record<VSwitchShortfall, number> }>;
}

/** What the view is made of: the caches, the cloud state and the time of the scrape. */
export interface FleetSources {
  pools: readonly ENIPool[];
  ownedEnis: readonly NetworkInterface[];
  vSwitches: readonly VSwitch[];
  freeHistoryOf: (vSwitchId: string) => readonly FreeSample[];
  now: number;
}

const condition = (p: ENIPool, type: string) => p.status?.conditions?.find((c) => c.type === type);

export function fleetView(s: FleetSources): FleetView {
  const nodes = { ready: 0, 'in-deficit': 0, 'at-capacity': 0, error: 0 };
  for (const p of s.pools) {
    if (condition(p, 'Degraded')?.status === 'True') nodes.error++;
    else if (condition(p, 'Exhausted')?.status === 'True' || condition(p, 'Ready')?.reason === 'AtCapacity')
      nodes['at-capacity']++;
    else if (condition(p, 'Ready')?.status === 'True') nodes.ready++;
    else nodes['in-deficit']++;
  }
  const enis: Record<string, number> = {};
  for (const e of s.ownedEnis) enis[e.status] = (enis[e.status] ?? 0) + 1;
  return { nodes, enis, vSwitches: vSwitchHeadroom(s), zones: zoneShortfalls(s) };
}

function vSwitchHeadroom(s: FleetSources): VSwitchHeadroom[] {
  const pooled = new Map<string, { available: number; used: number }>();
  for (const p of s.pools) {
    const used = p.status?.used ?? {};
    for (const e of p.status?.enis ?? []) {
      if (!e.vSwitchID) continue;
      const ips = e.ips ?? [];
      const sum = pooled.get(e.vSwitchID) ?? pooled.set(e.vSwitchID, { available: 0, used: 0 }).get(e.vSwitchID)!;
      sum.available += ips.length;
      sum.used += ips.filter((ip) => ip in used).length;
    }
  }
  return s.vSwitches.map((v) => {
    const forecast = forecastFree(s.freeHistoryOf(v.id), s.now);
    return {
      id: v.id,
      zone: v.zoneId,
      free: v.availableIpCount,
      pooled: pooled.get(v.id) ?? { available: 0, used: 0 },
      ...(forecast ? { forecast } : {}),
    };
  });
}

function zoneShortfalls(s: FleetSources): FleetView['zones'] {
  const zones = new Map<string, Record<VSwitchShortfall, number>>();
  const of = (zone: string) =>
    zones.get(zone) ??
    zones
      .set(zone, Object.fromEntries(VSWITCH_SHORTFALLS.map((r) => [r, 0])) as Record<VSwitchShortfall, number>)
      .get(zone)!;
  for (const v of s.vSwitches) of(v.zoneId);
  for (const p of s.pools) {
    const zone = p.spec.zoneID;
    if (!zone) continue;
    const short = of(zone);
    // A pool on its way out is no demand; one at its target lacks nothing, whatever the vSwitches.
    if (p.metadata.deletionTimestamp || !((p.status?.summary?.needed ?? 0) > 0)) continue;
    const exhausted = condition(p, 'Exhausted');
    const reason = VSWITCH_SHORTFALLS.find((r) => r === exhausted?.reason);
    if (exhausted?.status === 'True' && reason) short[reason]++;
  }
  return [...zones].map(([zone, short]) => ({ zone, short }));
}
