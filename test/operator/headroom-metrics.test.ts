import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { Condition, ENIPool } from '../../src/api/types.js';
import type { EcsApi, VSwitch } from '../../src/cloud/index.js';
import { silentLogger } from '../../src/observability/logger.js';
import { CloudState } from '../../src/operator/eni/cloud-state.js';
import { fleetView } from '../../src/operator/fleet.js';
import { OperatorMetrics } from '../../src/operator/metrics.js';
import { NOW, VPC, ZONE, pool, vSwitch } from './fakes.js';

const MIN = 60_000;

/** A pool whose status says it lacks `needed` and, when given, why (its Exhausted condition). */
function short(name: string, needed: number, exhausted?: string, o: Partial<ENIPool['metadata']> = {}): ENIPool {
  const conditions: Condition[] = exhausted
    ? [{ type: 'Exhausted', status: 'True', reason: exhausted, message: '', lastTransitionTime: '' }]
    : [];
  return {
    ...pool(name, { metadata: o }),
    status: { summary: { enis: 0, available: 0, used: 0, needed, releasing: 0 }, conditions },
  };
}

/** The operator's cloud cache over a describe that answers `world`, the metrics over both, as operator.ts wires them. */
function headroom(pools: ENIPool[]) {
  let at = NOW;
  const world = { vSwitches: [] as VSwitch[] };
  const api = {
    describeVSwitches: async () => world.vSwitches.map((v) => ({ ...v })),
  } as unknown as EcsApi;
  const cloud = new CloudState(api, VPC, 'c1', silentLogger(), MIN, () => at);
  const registry = new Registry();
  const metrics = new OperatorMetrics(registry);
  metrics.fleet = () =>
    fleetView({
      pools,
      ownedEnis: [],
      vSwitches: cloud.knownVSwitches,
      freeHistoryOf: (id) => cloud.freeHistoryOf(id),
      now: at,
    });
  /** Time moves on, the world is as given, and the cache describes it (its TTL has passed). */
  const describeAt = async (minutes: number, vSwitches: VSwitch[]) => {
    at = NOW + minutes * MIN;
    world.vSwitches = vSwitches;
    await cloud.vSwitches();
  };
  /** The value of each series of the metric, by its labels as exposed. */
  const series = async (name: string) =>
    Object.fromEntries(
      (await registry.metrics())
        .split('\n')
        .filter((l) => l.startsWith(`${name}{`))
        .map((l) => [l.slice(name.length, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]),
    );
  return { describeAt, series, setNow: (minutes: number) => (at = NOW + minutes * MIN) };
}

describe('vSwitch headroom and forecast metrics', () => {
  it('forecasts from the describes of ten minutes on, never a stand-in value before, and drops a departed vSwitch', async () => {
    const h = headroom([]);
    const other = vSwitch('vsw-b', 500, { zoneId: 'zone-b' });
    // vsw-a loses 300 addresses every 5 minutes (1 a second); vsw-b stays at 500.
    await h.describeAt(0, [vSwitch('vsw-a', 4000), other]);
    await h.describeAt(5, [vSwitch('vsw-a', 3700), other]);
    expect(await h.series('eni_ipam_vswitch_free_ips')).toEqual({
      '{vswitch="vsw-a",zone="zone-a"}': 3700,
      '{vswitch="vsw-b",zone="zone-b"}': 500,
    });
    expect(await h.series('eni_ipam_vswitch_consumption_ips_per_second')).toEqual({});
    expect(await h.series('eni_ipam_vswitch_exhaustion_seconds')).toEqual({});

    await h.describeAt(10, [vSwitch('vsw-a', 3400), other]);
    expect(await h.series('eni_ipam_vswitch_consumption_ips_per_second')).toEqual({
      '{vswitch="vsw-a",zone="zone-a"}': 1,
      '{vswitch="vsw-b",zone="zone-b"}': 0,
    });
    // 3400 left at 1 a second; a steady vSwitch has no exhaustion series at all.
    expect(await h.series('eni_ipam_vswitch_exhaustion_seconds')).toEqual({ '{vswitch="vsw-a",zone="zone-a"}': 3400 });
    // A scrape a minute after the describe: a minute's worth is gone since.
    h.setNow(11);
    expect(await h.series('eni_ipam_vswitch_exhaustion_seconds')).toEqual({ '{vswitch="vsw-a",zone="zone-a"}': 3340 });

    // vsw-b is gone from the VPC, and vsw-a has its addresses back.
    await h.describeAt(12, [vSwitch('vsw-a', 4000)]);
    for (const name of [
      'eni_ipam_vswitch_free_ips',
      'eni_ipam_vswitch_pool_ips',
      'eni_ipam_vswitch_consumption_ips_per_second',
    ])
      expect(Object.keys(await h.series(name)).filter((k) => k.includes('vsw-b'))).toEqual([]);
    expect(
      (await h.series('eni_ipam_vswitch_consumption_ips_per_second'))['{vswitch="vsw-a",zone="zone-a"}'],
    ).toBeLessThan(1);
    // Listed again, vsw-b starts afresh: its readings from before it left are gone.
    await h.describeAt(14, [vSwitch('vsw-a', 4000), other]);
    expect(Object.keys(await h.series('eni_ipam_vswitch_consumption_ips_per_second'))).toEqual([
      '{vswitch="vsw-a",zone="zone-a"}',
    ]);
    // No stale readings either: forty minutes on, a describe of vsw-a alone has no forecast.
    await h.describeAt(54, [vSwitch('vsw-a', 4000)]);
    expect(await h.series('eni_ipam_vswitch_consumption_ips_per_second')).toEqual({});
    expect(await h.series('eni_ipam_vswitch_exhaustion_seconds')).toEqual({});
  });

  it('counts the addresses pools hold from each vSwitch, and the pools of a zone short of vSwitch room', async () => {
    const holding: ENIPool = {
      ...pool('node-a'),
      status: {
        enis: [
          { id: 'eni-1', state: 'InUse', vSwitchID: 'vsw-a', ips: ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'] },
          { id: 'eni-2', state: 'InUse', vSwitchID: 'vsw-b', ips: ['10.1.0.1', '10.1.0.2'] },
        ],
        used: { '10.0.0.2': { pod: 'default/web-1' }, '10.1.0.1': { pod: 'default/web-2' } },
      },
    };
    const h = headroom([
      holding,
      short('node-b', 3, 'VSwitchExhausted'),
      short('node-c', 5, 'VSwitchExhausted'),
      short('node-d', 2, 'VSwitchFragmented'),
      // Not for lack of vSwitch room, not short, or going away: not counted.
      short('node-e', 4, 'InstanceLimit'),
      short('node-f', 0, 'VSwitchExhausted'),
      short('node-g', 4),
      short('node-h', 4, 'VSwitchExhausted', { deletionTimestamp: '2026-03-01T11:00:00Z' }),
      { ...short('node-i', 6, 'NoVSwitchInZone'), spec: { ...pool('node-i').spec, zoneID: 'zone-c' } },
    ]);
    await h.describeAt(0, [vSwitch('vsw-a', 100), vSwitch('vsw-b', 50, { zoneId: 'zone-b' })]);
    expect(await h.series('eni_ipam_vswitch_pool_ips')).toEqual({
      '{vswitch="vsw-a",zone="zone-a",kind="available"}': 4,
      '{vswitch="vsw-a",zone="zone-a",kind="used"}': 1,
      '{vswitch="vsw-b",zone="zone-b",kind="available"}': 2,
      '{vswitch="vsw-b",zone="zone-b",kind="used"}': 1,
    });
    expect(await h.series('eni_ipam_zone_pools_short')).toEqual({
      [`{zone="${ZONE}",reason="VSwitchExhausted"}`]: 2,
      [`{zone="${ZONE}",reason="VSwitchFragmented"}`]: 1,
      [`{zone="${ZONE}",reason="NoVSwitchInZone"}`]: 0,
      '{zone="zone-b",reason="VSwitchExhausted"}': 0,
      '{zone="zone-b",reason="VSwitchFragmented"}': 0,
      '{zone="zone-b",reason="NoVSwitchInZone"}': 0,
      '{zone="zone-c",reason="VSwitchExhausted"}': 0,
      '{zone="zone-c",reason="VSwitchFragmented"}': 0,
      '{zone="zone-c",reason="NoVSwitchInZone"}': 1,
    });
  });
});
