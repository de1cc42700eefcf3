import { DEFAULT_API_LIMITS } from '../src/cloud/index.js';
import { bucketCalls, callsChart, perSecond, type CallsOverTime } from './calls.js';
import { BenchCluster, type BenchAgent } from './harness.js';
import { percentile, writeResults } from './report.js';
import { writeChart } from './svg.js';

export interface GrowthOptions {
  nodes: number;
  /** slow or fast: one pod per node every `everySeconds`, for `seconds`. */
  rate: 'slow' | 'fast';
  everySeconds: number;
  seconds: number;
  preAllocate: number;
  /** The class's maxBatch (0: growth without batches, as before them). */
  maxBatch: number;
  /** The class's ipv4Mode: single secondary IPs, or /28 prefixes. */
  mode: 'secondary' | 'prefix';
}

export const GROWTH_RATES = {
  slow: { everySeconds: 10, seconds: 300 },
  fast: { everySeconds: 2, seconds: 120 },
} as const;

/** Pod addresses per secondary ENI of the benchmark's instance type (ecs.c7.2xlarge: 15 IPs, one the ENI's own). */
const PER_ENI = 14;
/** The most addresses the floor lets one AssignPrivateIpAddresses carry (Terway's figure, older ECS docs). */
const ASSIGN_MAX = 10;

/**
 * The fewest mutating calls that world allows to add `need` addresses to a node whose ENIs hold
 * `ips` addresses each: every ENI's room filled with assigns of at most 10, then new ENIs that
 * carry all their addresses at creation (create + attach), within the instance's free slots.
 * With `prefix` the slots hold /28s: 16 addresses each, at most 10 prefixes a call.
 */
export function floorCalls(ips: number[], need: number, freeSlots: number, prefix = false): number {
  const g = prefix ? 16 : 1;
  let left = Math.ceil(need / g);
  let calls = 0;
  for (const held of ips) {
    const take = Math.min(PER_ENI - Math.ceil(held / g), left);
    if (take <= 0) continue;
    calls += Math.ceil(take / ASSIGN_MAX);
    left -= take;
  }
  // A create carries at most 49 secondaries (all 14 here), or 10 prefixes (an assign brings the rest).
  const perCreate = prefix ? 10 : PER_ENI;
  const enis = Math.min(freeSlots, Math.ceil(left / PER_ENI));
  const rest = Math.max(0, Math.min(left, enis * PER_ENI) - enis * perCreate);
  return calls + 2 * enis + Math.ceil(rest / ASSIGN_MAX);
}

/**
 * Writes results/<scenario>-calls.svg: the growth's mutating calls per action over time,
 * against their quotas. Answers its path.
 */
export function drawGrowth(scenario: string, d: { options: GrowthOptions; callsOverTime: CallsOverTime }): string {
  const o = d.options;
  return writeChart(
    `${scenario}-calls`,
    callsChart(
      `growth: mutating calls per action, ${o.nodes} nodes, a pod on each every ${o.everySeconds} s${o.mode === 'prefix' ? ' (ipv4Mode Prefix)' : ''}`,
      'seconds since the growth began',
      d.callsOverTime,
    ),
  );
}

/**
 * Pods arriving steadily on every node (real time, the default quotas), after the pools have
 * filled: the mutating calls the growth took against the floor, allocations that found the
 * pool empty after the first minute, and the idle addresses at the end against the documented
 * bound (preAllocate plus one batch).
 */
export async function growth(o: GrowthOptions): Promise<void> {
  const classSpec = {
    vSwitchTags: { role: 'pods' },
    securityGroupTags: { role: 'pods' },
    preAllocate: o.preAllocate,
    maxBatch: o.maxBatch,
    ...(o.mode === 'prefix' ? { ipv4Mode: 'Prefix' as const } : {}),
  };
  const c = await BenchCluster.realTime({ nodes: o.nodes, classSpec, typeOf: () => 'ecs.c7.2xlarge' });
  try {
    await c.startOperator();
    await c.addNodes();
    await c.startAgents();
    if (!(await c.waitAllReady(300_000))) throw new Error('the pools did not all turn Ready');
    await c.waitQuiet(3000, 60_000);
    const before = new Map(
      c.poolList().map((p) => [p.spec.nodeName, (p.status?.enis ?? []).map((e) => e.ips?.length ?? 0)]),
    );
    c.ecs.resetStats();
    const started = Date.now();
    const waits: Array<{ at: number; waitMs: number; empty: boolean }> = [];
    const perNode = Math.floor(o.seconds / o.everySeconds);
    const grow = async (a: BenchAgent, offsetMs: number) => {
      for (let k = 0; k < perNode; k++) {
        const due = started + offsetMs + k * o.everySeconds * 1000;
        await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));
        const at = Date.now() - started;
        const r = await c.allocate(a, `grow-${a.node}-${k}`);
        waits.push({ at, waitMs: r.waitMs, empty: r.emptyPoolRetries > 0 });
      }
    };
    // Nodes start at spread offsets within one interval, so the arrivals are steady cluster-wide.
    await Promise.all(c.agents.map((a, i) => grow(a, ((i * o.everySeconds * 1000) / c.agents.length) | 0)));
    const elapsedS = (Date.now() - started) / 1000;
    await c.waitQuiet(3000, 60_000);
    const calls = c.ecs.mutatingCalls();
    // Real time, the default quotas (the world's and the operator's).
    const callsOverTime = bucketCalls(c.ecs.calls({ since: started }), {
      t0: started,
      endMs: Date.now() - started,
      actions: Object.keys(calls),
      quotaPerSecond: perSecond(DEFAULT_API_LIMITS, 1),
    });
    const total = Object.values(calls).reduce((a, b) => a + b, 0);
    const pools = c.poolList();
    const prefix = o.mode === 'prefix';
    let floor = 0;
    // What single secondary IPs would need at the least for the same growth (from one ENI of preAllocate).
    let secondaryFloor = 0;
    const idle: number[] = [];
    for (const p of pools) {
      const ips = before.get(p.spec.nodeName) ?? [];
      const used = Object.keys(p.status?.used ?? {}).length;
      const need = Math.max(0, used + o.preAllocate - ips.reduce((a, b) => a + b, 0));
      floor += floorCalls(ips, need, 5 - ips.length, prefix);
      secondaryFloor += floorCalls([o.preAllocate], used, 4);
      idle.push((p.status?.summary?.available ?? 0) - used);
    }
    const late = waits.filter((w) => w.at >= 60_000);
    const emptyLate = late.filter((w) => w.empty).length;
    const emptyAll = waits.filter((w) => w.empty).length;
    const sorted = waits.map((w) => w.waitMs).sort((a, b) => a - b);
    // A prefix pool holds whole /28s: idle addresses may round up to the next one.
    const bound = o.preAllocate + o.maxBatch + (prefix ? 15 : 0);
    const maxIdle = Math.max(...idle);
    const ratio = total / floor;
    const added = waits.length;
    const perAddress = total / added;
    const vsSecondary = total / secondaryFloor;
    const met = prefix
      ? vsSecondary <= 0.25 && emptyLate === 0 && maxIdle <= bound
      : ratio <= 1.3 && emptyLate === 0 && maxIdle <= bound;
    const fmt = (x: number) => `${x.toFixed(2)}x`;
    const batchSuffix = o.maxBatch === 0 ? '-unbatched' : o.maxBatch === 16 ? '' : `-batch${o.maxBatch}`;
    const scenario = `growth-${o.rate}${prefix ? '-prefix' : ''}${batchSuffix}`;
    const chart = drawGrowth(scenario, { options: o, callsOverTime });
    writeResults(
      {
        scenario,
        command: `npm run bench -- growth --rate ${o.rate} --mode ${o.mode} --nodes ${o.nodes} --every ${o.everySeconds} --seconds ${o.seconds} --pre-allocate ${o.preAllocate} --max-batch ${o.maxBatch}`,
        summary: {
          'nodes × pods': `${o.nodes} × ${perNode} (one per ${o.everySeconds} s, real time${prefix ? ', ipv4Mode Prefix' : ''})`,
          'mutating calls / floor': `${fmt(ratio)} (${total} / ${floor})`,
          'calls per address': perAddress.toFixed(3),
          ...(prefix ? { 'calls / secondary-IP floor': `${fmt(vsSecondary)} (${total} / ${secondaryFloor})` } : {}),
          'by action': Object.entries(calls)
            .map(([a, n]) => `${a.replace('NetworkInterface', 'ENI').replace('PrivateIpAddresses', 'IPs')} ${n}`)
            .join(', '),
          'waits on an empty pool (after 1st min / all)': `${emptyLate} / ${emptyAll}`,
          'allocation wait p99': `${percentile(sorted, 99).toFixed(1)} ms`,
          'idle per node at the end, max / bound': `${maxIdle} / ${bound}`,
        },
        target:
          o.maxBatch === 0
            ? 'none: growth without batches, for comparison with the batched row'
            : prefix
              ? 'calls at most a quarter of the fewest single secondary IPs allow for the same growth, no wait on an empty pool after the first minute, idle addresses within preAllocate + maxBatch + 15 (a /28 rounds up)'
              : 'within 1.3x the floor, no wait on an empty pool after the first minute, idle addresses within preAllocate + maxBatch',
        met: o.maxBatch === 0 ? undefined : met,
        note:
          'The floor is the fewest calls that world allows for the same growth: each ENI\u2019s room filled with assigns of at most 10, then new ENIs carrying all their addresses at creation (create + attach)' +
          (prefix
            ? '; in prefix mode a slot holds a /28 and a call at most 10 of them, and the secondary-IP floor is that of the same pods on single IPs (one ENI of preAllocate to start). '
            : '. ') +
          'Real time (no time scaling), the default world\u2019s quotas; the agents share the benchmark process. ' +
          `Chart: results/${scenario}-calls.svg (mutating calls per action over time, against each action\u2019s quota).`,
      },
      {
        options: o,
        elapsedSeconds: elapsedS,
        callsByAction: calls,
        floor,
        secondaryFloor,
        addresses: added,
        idle,
        waits: { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) },
        emptyLate,
        emptyAll,
        chart: chart.replace(/.*\/bench\//, 'bench/'),
        callsOverTime,
      },
    );
    console.log(
      `${scenario}: ${total} mutating calls for ${added} pods, floor ${floor} (${fmt(ratio)}); empty-pool waits ${emptyLate} after the first minute, ${emptyAll} in all; idle max ${maxIdle} (bound ${bound})`,
    );
  } finally {
    await c.stop();
  }
}
