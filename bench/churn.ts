import { BenchCluster, type BenchAgent } from './harness.js';
import { percentile, writeResults } from './report.js';
import { writeChart } from './svg.js';

export interface ChurnOptions {
  nodes: number;
  seconds: number;
  /** Pod starts and stops per second across the cluster. */
  rate: number;
  podsPerNode: number;
  preAllocate: number;
}

/**
 * Steady pod starts and stops across the cluster, each through the node agent's socket API
 * as the CNI plugin makes it, in real time (time scale 1, so calls per hour are real). A start
 * that finds the pool empty retries every 20 ms, as a runtime retries a failed CNI ADD; its
 * wait is the whole time until it got an address.
 */
export async function churn(o: ChurnOptions): Promise<void> {
  const classSpec = { vSwitchTags: { role: 'pods' }, securityGroupTags: { role: 'pods' }, preAllocate: o.preAllocate };
  // Instance types with room for the pods, preAllocate and the IPs cooling down (30 s, the agent's default).
  const c = await BenchCluster.realTime({
    nodes: o.nodes,
    classSpec,
    typeOf: (n) => (n % 2 ? 'ecs.g7.xlarge' : 'ecs.c7.2xlarge'),
  });
  try {
    await c.startOperator();
    await c.addNodes();
    await c.startAgents();
    if (!(await c.waitAllReady(300_000))) throw new Error('the pools did not all turn Ready');
    c.ecs.resetStats();
    const running = new Map<BenchAgent, string[]>(c.agents.map((a) => [a, []]));
    const waits: number[] = [];
    const timeline: Array<[number, number]> = [];
    let emptyPoolWaits = 0;
    let stops = 0;
    let seq = 0;
    const inflight = new Set<Promise<void>>();
    const started = Date.now();
    const step = async () => {
      const a = c.agents[Math.floor(Math.random() * c.agents.length)]!;
      const pods = running.get(a)!;
      if (pods.length < o.podsPerNode && (pods.length === 0 || Math.random() < 0.5)) {
        const id = `churn-${++seq}`;
        pods.push(id);
        const r = await c.allocate(a, id);
        waits.push(r.waitMs);
        timeline.push([(Date.now() - started) / 1000, r.waitMs]);
        if (r.emptyPoolRetries > 0) emptyPoolWaits++;
      } else if (pods.length) {
        const id = pods.splice(Math.floor(Math.random() * pods.length), 1)[0]!;
        stops++;
        await c.release(a, id);
      }
    };
    const interval = 1000 / o.rate;
    for (let k = 0; Date.now() - started < o.seconds * 1000; k++) {
      const p = step().finally(() => inflight.delete(p));
      inflight.add(p);
      const next = started + (k + 1) * interval;
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
    await Promise.all(inflight);
    const elapsedH = (Date.now() - started) / 3_600_000;
    const agentSide = await agentSideLatency(await Promise.all(c.agents.map((a) => a.metrics())));
    const calls = c.ecs.stats().calls;
    const total = Object.values(calls).reduce((n, byCode) => n + Object.values(byCode).reduce((a, b) => a + b, 0), 0);
    const perHourPerNode = total / elapsedH / o.nodes;
    const sorted = [...waits].sort((a, b) => a - b);
    const p99 = percentile(sorted, 99);
    const met = emptyPoolWaits === 0 && p99 < 10;
    writeChart('churn', {
      title: `churn: ${o.rate} pod starts and stops per second over ${o.nodes} nodes`,
      xLabel: 'seconds',
      yLabel: 'CNI allocation wait (ms)',
      series: [
        { label: 'max per 5 s', color: '#d62728', points: bucketed(timeline, 5, (v) => v.at(-1)!) },
        { label: 'p50 per 5 s', color: '#1f77b4', points: bucketed(timeline, 5, (v) => percentile(v, 50)) },
      ],
    });
    writeResults(
      {
        scenario: 'churn',
        command: `npm run bench -- churn --nodes ${o.nodes} --seconds ${o.seconds} --rate ${o.rate} --pods-per-node ${o.podsPerNode} --pre-allocate ${o.preAllocate}`,
        summary: {
          nodes: String(o.nodes),
          'pod starts / stops': `${waits.length} / ${stops}`,
          'allocation wait p50 / p99 / max': `${percentile(sorted, 50).toFixed(2)} / ${p99.toFixed(2)} / ${sorted.at(-1)!.toFixed(2)} ms`,
          'starts that waited on an empty pool': String(emptyPoolWaits),
          'API calls per hour per node': perHourPerNode.toFixed(1),
          'inside the agent: under 1 ms / 5 ms / 10 ms': agentSide.shares
            .map((x) => `${(x * 100).toFixed(1)}%`)
            .join(' / '),
        },
        target: `no start waits on an empty pool when preAllocate (${o.preAllocate}) covers the per-node burst; p99 allocation wait under 10 ms`,
        met,
        note: 'The 100 agents share the benchmark process (one event loop) with both emulators and the client; as 100 processes they overloaded this 2-core machine (p99 2.9 s). So a wait includes other agents\u2019 state-file fsyncs; the last column is the agents\u2019 own allocation histogram. Chart: results/churn.svg.',
      },
      {
        options: o,
        agentSide,
        waits: {
          p50: percentile(sorted, 50),
          p90: percentile(sorted, 90),
          p99,
          max: sorted.at(-1),
          count: sorted.length,
        },
        emptyPoolWaits,
        stops,
        callsByAction: calls,
        perHourPerNode,
      },
    );
    console.log(
      `churn: ${waits.length} starts, wait p50 ${percentile(sorted, 50).toFixed(2)} ms p99 ${p99.toFixed(2)} ms max ${sorted.at(-1)!.toFixed(2)} ms; empty-pool waits ${emptyPoolWaits}; ${perHourPerNode.toFixed(1)} API calls/hour/node`,
    );
  } finally {
    await c.stop();
  }
}

/** Groups (t, value) points into windows of `seconds` and reduces each window's sorted values. */
function bucketed(
  points: Array<[number, number]>,
  seconds: number,
  reduce: (sorted: number[]) => number,
): Array<[number, number]> {
  const windows = new Map<number, number[]>();
  for (const [t, v] of points) {
    const w = Math.floor(t / seconds) * seconds;
    windows.set(w, [...(windows.get(w) ?? []), v]);
  }
  return [...windows].sort((a, b) => a[0] - b[0]).map(([w, vs]) => [w + seconds / 2, reduce(vs.sort((a, b) => a - b))]);
}

/** The agents' own allocation-duration histograms, summed: the share answered within 1, 5 and 10 ms. */
async function agentSideLatency(scrapes: string[]): Promise<{ count: number; shares: number[] }> {
  const buckets = new Map<string, number>();
  for (const text of scrapes) {
    for (const m of text.matchAll(/^eni_ipam_agent_allocation_duration_seconds_bucket\{le="([^"]+)"\} (\d+)/gm))
      buckets.set(m[1]!, (buckets.get(m[1]!) ?? 0) + Number(m[2]));
  }
  const count = buckets.get('+Inf') ?? 0;
  return { count, shares: ['0.001', '0.005', '0.01'].map((le) => (count ? (buckets.get(le) ?? 0) / count : NaN)) };
}
