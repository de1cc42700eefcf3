import { BenchCluster, metric } from './harness.js';
import { writeResults } from './report.js';
import { writeChart } from './svg.js';

export interface FootprintOptions {
  nodes: number[];
  ipsPerNode: number;
  timeScale: number;
}

const MiB = 1024 * 1024;
const RSS_TARGET_MIB = 300;
const RESYNC_SECONDS = 20;

/** Writes results/footprint.svg from the run's rows (its JSON's `details.rows`); answers its path. */
export function drawFootprint(rows: ReadonlyArray<Record<string, number>>): string {
  return writeChart('footprint', {
    title: 'footprint: the operator process after convergence',
    xLabel: 'nodes',
    yLabel: 'MiB',
    series: [
      { label: 'RSS', color: '#1f77b4', points: rows.map((r) => [r.nodes!, r.rssMiB!]) },
      { label: 'V8 heap used', color: '#2ca02c', points: rows.map((r) => [r.nodes!, r.heapMiB!]) },
      {
        label: `RSS target (${RSS_TARGET_MIB} MiB)`,
        color: '#d62728',
        dashed: true,
        points: [
          [0, RSS_TARGET_MIB],
          [Math.max(...rows.map((r) => r.nodes!)), RSS_TARGET_MIB],
        ],
      },
    ],
  });
}

/**
 * The operator process at scale: N nodes of ecs.g7.xlarge holding `ipsPerNode` IPs each
 * (5,000 x 20 = 100,000 IPs). After convergence: its RSS (from /proc) and V8 heap (its own
 * metrics), the CPU seconds and DescribeNetworkInterfaces pages of one periodic full resync.
 * No agents run: they would not change what the operator holds, and 5,000 of them in the
 * benchmark's process would only slow the emulators it shares.
 */
export async function footprint(o: FootprintOptions): Promise<void> {
  const rows: Array<Record<string, number>> = [];
  for (const nodes of o.nodes) rows.push(await measure(nodes, o));
  const big = rows.at(-1)!;
  drawFootprint(rows);
  const met = Boolean(big.rssMiB! <= RSS_TARGET_MIB && big.pages! <= big.pagesBound!);
  writeResults(
    {
      scenario: 'footprint',
      command: `npm run bench -- footprint --nodes ${o.nodes.join(',')} --ips-per-node ${o.ipsPerNode} --time-scale ${o.timeScale}`,
      summary: Object.fromEntries(
        rows.map((r) => [
          `${r.nodes} nodes (${r.ips} IPs, ${r.enis} ENIs)`,
          `RSS ${Number(r.rssMiB).toFixed(0)} MiB, heap ${Number(r.heapMiB).toFixed(0)} MiB, resync ${Number(r.resyncCpuSeconds).toFixed(2)} CPU s in ${r.pages} pages (bound ${r.pagesBound})`,
        ]),
      ),
      target: `at ${o.nodes.at(-1)} nodes, operator RSS at most ${RSS_TARGET_MIB} MiB and a full resync in at most ceil(ENIs / 500) pages`,
      met,
      note: 'RSS from /proc, heap from the operator\u2019s own metrics; the resync is a periodic one after convergence. No agents run (they would not change what the operator holds). Chart: results/footprint.svg.',
    },
    { options: o, rows },
  );
}

async function measure(nodes: number, o: FootprintOptions): Promise<Record<string, number>> {
  const classSpec = { vSwitchTags: { role: 'pods' }, securityGroupTags: { role: 'pods' }, preAllocate: o.ipsPerNode };
  const c = await BenchCluster.start({
    nodes,
    timeScale: o.timeScale,
    classSpec,
    agents: false,
    typeOf: () => 'ecs.g7.xlarge',
    operatorArgs: ['--resync-interval', String(RESYNC_SECONDS)],
  });
  try {
    await c.startOperator();
    await c.addNodes();
    if (!(await c.waitAllReady(1_800_000))) throw new Error(`the pools of ${nodes} nodes did not all turn Ready`);
    await c.waitQuiet(5000, 120_000);
    // One periodic resync after convergence: its cost alone, with the emulator's count of pages beside the operator's.
    const resyncs = metric(await c.scrape(), 'eni_ipam_resyncs_total');
    const describesBefore = c.ecs.stats().calls.DescribeNetworkInterfaces?.OK ?? 0;
    let scrape = await c.scrape();
    while (metric(scrape, 'eni_ipam_resyncs_total') === resyncs) {
      await new Promise((r) => setTimeout(r, 200));
      scrape = await c.scrape();
    }
    const describes = (c.ecs.stats().calls.DescribeNetworkInterfaces?.OK ?? 0) - describesBefore;
    const enis = c.ecs.world.enis.size;
    const ips = c.poolList().reduce((n, p) => n + (p.status?.summary?.available ?? 0), 0);
    const row = {
      nodes,
      ips,
      enis,
      rssMiB: c.operatorRssBytes() / MiB,
      heapMiB: metric(scrape, 'nodejs_heap_size_used_bytes') / MiB,
      resyncCpuSeconds: metric(scrape, 'eni_ipam_resync_cpu_seconds'),
      resyncWallSeconds: metric(scrape, 'eni_ipam_resync_duration_seconds'),
      pages: metric(scrape, 'eni_ipam_resync_pages'),
      describeCallsDuringResync: describes,
      pagesBound: Math.ceil(enis / 500),
    };
    console.log(`footprint ${nodes} nodes: ${JSON.stringify(row)}`);
    return row;
  } finally {
    await c.stop();
  }
}
