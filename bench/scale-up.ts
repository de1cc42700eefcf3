import { DEFAULT_API_LIMITS } from '../src/cloud/index.js';
import { benchWorld } from '../testbed/harness/world.js';
import { primaryEniMinimumCalls, scaleUpBound } from './bound.js';
import { bucketCalls, callsChart, perSecond, type CallsOverTime } from './calls.js';
import { ciliumScaleUp } from './cilium-model.js';
import { BenchCluster, metric } from './harness.js';
import { percentile, writeResults } from './report.js';
import { writeChart } from './svg.js';

export interface ScaleUpOptions {
  nodes: number;
  timeScale: number;
  preAllocate: number;
  /**
   * secondary: addresses on new ENIs only; primary-eni: the class sets usePrimaryENI; prefix:
   * ipv4Mode Prefix; cilium: secondary, served to stand-in cilium-agents through CiliumNodes
   * (--pool-api ciliumnode), beside Cilium's own operator computed on the same world.
   */
  mode: 'secondary' | 'primary-eni' | 'prefix' | 'cilium';
  /** The API quotas as a share of the defaults (1: the defaults); lowered, a real-time run's queue lasts minutes. */
  quotaScale: number;
}

const ratio = (a: number, b: number) => (b ? a / b : NaN);
const MODE_LABEL: Record<ScaleUpOptions['mode'], string> = {
  secondary: '',
  'primary-eni': 'usePrimaryENI',
  prefix: 'ipv4Mode Prefix',
  cilium: 'cilium-agents through CiliumNodes',
};
const x = (v: number) => `${v.toFixed(2)}x`;

/** What a scale-up run's JSON keeps for its charts (`details`). */
export interface ScaleUpChartData {
  options: ScaleUpOptions;
  bound: { realMs: number };
  /** Each pool's time to Ready since the nodes joined, in real ms, sorted. */
  readyMs: number[];
  callsOverTime: CallsOverTime;
}

/**
 * Writes a run's charts: results/<scenario>.svg, the pools Ready over time against the quota
 * bound, and results/<scenario>-calls.svg, the mutating calls per action over time against
 * their quotas. Answers their paths.
 */
export function drawScaleUp(scenario: string, d: ScaleUpChartData): string[] {
  const o = d.options;
  const label = MODE_LABEL[o.mode] ? `, ${MODE_LABEL[o.mode]}` : '';
  // Older runs' options have no quotaScale (their quotas were the defaults).
  const how = `(time scale ${o.timeScale}${label}${(o.quotaScale ?? 1) === 1 ? '' : `, quotas ${o.quotaScale}x`})`;
  const xLabel = 'seconds (real) since the nodes joined';
  const ready = o.mode === 'cilium' ? 'cilium-agents serving' : 'pools Ready';
  return [
    writeChart(scenario, {
      title: `scale-up: ${o.nodes} nodes join at once ${how}`,
      xLabel,
      yLabel: ready,
      series: [
        {
          label: ready,
          color: '#1f77b4',
          step: true,
          points: [[0, 0], ...d.readyMs.map((t, i) => [t / 1000, i + 1] as [number, number])],
        },
      ],
      markers: [
        { x: d.bound.realMs / 1000, label: `quota bound ${(d.bound.realMs / 1000).toFixed(1)} s`, color: '#d62728' },
      ],
    }),
    writeChart(
      `${scenario}-calls`,
      callsChart(`scale-up: mutating calls per action, ${o.nodes} nodes ${how}`, xLabel, d.callsOverTime),
    ),
  ];
}

/**
 * N nodes join at once; the operator fills every pool. Compares the time until every pool is
 * Ready with the quota-bound limit of the same world (scaleUpBound), and the mutating calls
 * with their minimum.
 */
export async function scaleUp(o: ScaleUpOptions): Promise<void> {
  const secondary = { vSwitchTags: { role: 'pods' }, securityGroupTags: { role: 'pods' }, preAllocate: o.preAllocate };
  const classSpec =
    o.mode === 'primary-eni'
      ? { ...secondary, usePrimaryENI: true }
      : o.mode === 'prefix'
        ? { ...secondary, ipv4Mode: 'Prefix' as const }
        : secondary;
  const quotas = Object.fromEntries(
    Object.entries(DEFAULT_API_LIMITS).map(([a, perMinute]) => [a, Math.max(1, Math.round(perMinute * o.quotaScale))]),
  );
  // Every mode is measured against the secondary-IP mode's bound: the same nodes, the same need.
  const bound = scaleUpBound(benchWorld({ nodes: o.nodes, timeScale: o.timeScale, quotas }), secondary);
  const cilium = o.mode === 'cilium';
  const c = await BenchCluster.start({
    nodes: o.nodes,
    timeScale: o.timeScale,
    classSpec,
    agents: !cilium,
    quotas,
    ...(cilium ? { poolApi: 'ciliumnode' as const } : {}),
  });
  try {
    await c.startOperator();
    const t0 = await c.addNodes();
    // Ready: the pool Ready (our agent), or the cilium-agent serving its full pre-allocate.
    if (cilium) await c.startCiliumAgents(o.preAllocate);
    else await c.startAgents();
    const timeoutMs = Math.max(120_000, bound.realMs * 10);
    const ok = cilium ? await c.waitAllServing(timeoutMs) : await c.waitAllReady(timeoutMs);
    const readyAt = cilium ? c.servingAt : c.readyAt;
    const allReadyMs = Math.max(...readyAt.values()) - t0;
    const perNode = [...readyAt.values()].map((t) => t - t0).sort((a, b) => a - b);
    const calls = c.ecs.mutatingCalls();
    const minimum = Object.values(bound.calls).reduce((a, b) => a + b, 0);
    const made = Object.values(calls).reduce((a, b) => a + b, 0);
    const scrape = await c.scrape();
    const reconcileErrors = metric(scrape, 'eni_ipam_reconcile_errors_total');
    const throttled = c.throttled();
    const timeRatio = ratio(allReadyMs, bound.realMs);
    const callRatio = ratio(made, minimum);
    const big = o.nodes >= 1000;
    const primaryMode = o.mode === 'primary-eni';
    const prefixMode = o.mode === 'prefix';
    const world = benchWorld({ nodes: o.nodes, timeScale: o.timeScale, quotas });
    const primaryMinimum = primaryMode ? primaryEniMinimumCalls(world, classSpec) : minimum;
    // Addresses made ready: what the pools publish (a /28 rounds a prefix pool up).
    const addresses = c.poolList().reduce((n, p) => n + (p.status?.summary?.available ?? 0), 0);
    const perAddress = made / addresses;
    const secondaryPerAddress = minimum / bound.addresses;
    // With the primary ENI: its own fewest calls (an assign per node, ENIs only for what it cannot hold).
    // With prefixes: at most half the secondary-IP minimum's calls per address, and 0.6x its bound.
    const met = prefixMode
      ? ok && timeRatio <= 0.6 && perAddress <= 0.5 * secondaryPerAddress && reconcileErrors === 0
      : ok && timeRatio <= 1.2 && made <= 1.05 * primaryMinimum && reconcileErrors === 0;
    const suffix = o.mode === 'secondary' ? '' : `-${o.mode}`;
    // Cilium's operator on the same world, at the same time scale as the bound.
    const peer = cilium ? ciliumScaleUp(world, o.preAllocate) : undefined;
    const peerRealMs = peer ? peer.ms / o.timeScale : 0;
    const peerMutating = peer
      ? Object.entries(peer.calls)
          .filter(([a]) => !a.startsWith('Describe'))
          .reduce((n, [, k]) => n + k, 0)
      : 0;
    // A row per size, mode, and what differs from the defaults: preAllocate, real time with lowered quotas.
    const realTime = o.timeScale === 1;
    const scenario =
      `scale-up-${o.nodes}${suffix}${o.preAllocate === 8 ? '' : `-pre${o.preAllocate}`}` +
      (o.quotaScale === 1 ? '' : `-quota${o.quotaScale}`);
    const clock = realTime ? 'real time' : `time-scaled ${o.timeScale}x`;
    const callsOverTime = bucketCalls(c.ecs.calls({ since: t0 }), {
      t0,
      endMs: allReadyMs,
      actions: Object.keys(calls),
      quotaPerSecond: perSecond(quotas, o.timeScale),
    });
    const charts = drawScaleUp(scenario, { options: o, bound, readyMs: perNode, callsOverTime });
    writeResults(
      {
        scenario,
        command: `npm run bench -- scale-up --nodes ${o.nodes} --time-scale ${o.timeScale} --pre-allocate ${o.preAllocate} --mode ${o.mode}${o.quotaScale === 1 ? '' : ` --quota-scale ${o.quotaScale}`}`,
        summary: {
          nodes: `${o.nodes}${MODE_LABEL[o.mode] ? ` (${MODE_LABEL[o.mode]})` : ''}`,
          clock: o.quotaScale === 1 ? clock : `${clock}, quotas ${o.quotaScale}x`,
          'all Ready / bound': ok ? x(timeRatio) : 'not all Ready',
          'mutating calls / secondary-IP minimum': `${x(callRatio)} (${made} / ${minimum})`,
          'calls per pod address': `${perAddress.toFixed(3)} (${addresses} ready)`,
          ...(prefixMode ? { 'calls per address / secondary-IP minimum’s': x(perAddress / secondaryPerAddress) } : {}),
          ...(primaryMode
            ? { 'calls / usePrimaryENI minimum': `${x(made / primaryMinimum)} (${primaryMinimum})` }
            : {}),
          ...(peer
            ? {
                'Cilium’s operator, computed: all Ready / bound': `${x(peerRealMs / bound.realMs)} (${x(peerRealMs / allReadyMs)} eni-ipam’s time)`,
                'Cilium’s mutating calls': `${peerMutating} (${x(peerMutating / made)} eni-ipam’s), ${peer.bucketCalls} through its 4 QPS bucket`,
              }
            : {}),
          'throttled responses': String(throttled),
          'reconcile failures': String(reconcileErrors),
          'time-to-ready p50 / p99 (x bound)': `${x(percentile(perNode, 50) / bound.realMs)} / ${x(percentile(perNode, 99) / bound.realMs)}`,
        },
        target: big
          ? primaryMode
            ? 'all Ready within 1.2x the secondary-IP bound, mutating calls within 1.05x the fewest usePrimaryENI allows (one assign per node, ENIs only for what the primary cannot hold), no reconcile failing'
            : prefixMode
              ? 'all Ready within 0.6x the secondary-IP bound, at most half the secondary-IP minimum’s calls per pod address, no reconcile failing'
              : 'all Ready within 1.2x the bound, mutating calls within 1.05x the minimum, no throttled response failing a reconcile'
          : undefined,
        met: big ? met : undefined,
        note: `${peer ? 'Ready: each stand-in cilium-agent (testbed/cilium/agent.ts) serves its full pre-allocate from its CiliumNode. Cilium’s operator is computed, not run (bench/cilium-model.ts): one cloud change per node per pass, the next after a resync of the instance; Create, Attach and that resync through one bucket of 4 QPS, burst 20; at most 10 addresses per new ENI, its own primary among them; 6 polls 2.5 s apart for InUse (their calls bypass the bucket). Its full resyncs every minute, syncs of instances it does not know yet, worker limit and call latencies are left out, so its figures are a floor. ' : ''}${bound.realMs < 5000 ? 'At this size the bound is little more than one attach delay, so the ratio shows the fixed latencies (registration, watches, status writes, polling) rather than the quota. ' : ''}${realTime ? 'Real time (no time scaling)' : `Time-scaled (--time-scale ${o.timeScale}): quotas and delays run ${o.timeScale} times faster, bursts stay counts`}${o.quotaScale === 1 ? '' : `; every API quota at ${o.quotaScale}x its default (bursts too), so the queue lasts minutes`}. Charts: results/${scenario}.svg (${cilium ? 'cilium-agents serving' : 'pools Ready'}), results/${scenario}-calls.svg (mutating calls per action over time, against each action’s quota).`,
      },
      {
        options: o,
        bound,
        ...(peer ? { cilium: { ...peer, realMs: peerRealMs, readyMs: undefined } } : {}),
        allReadyMs,
        perNodeReadyMs: { p50: percentile(perNode, 50), p99: percentile(perNode, 99), max: perNode.at(-1) },
        calls,
        throttled,
        reconcileErrors,
        charts: charts.map((p) => p.replace(/.*\/bench\//, 'bench/')),
        readyMs: perNode,
        callsOverTime,
      },
    );
    console.log(
      `${scenario}: all Ready after ${(allReadyMs / 1000).toFixed(1)} s = ${x(timeRatio)} the bound (${(bound.realMs / 1000).toFixed(1)} s); calls ${made} = ${x(callRatio)} the minimum; throttled ${throttled}; reconcile failures ${reconcileErrors}`,
    );
  } finally {
    await c.stop();
  }
}
