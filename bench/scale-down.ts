import { BenchCluster } from './harness.js';
import { writeResults } from './report.js';
import { writeChart } from './svg.js';

export interface ScaleDownOptions {
  nodes: number;
  podsPerNode: number;
  /** Pods left on each node after the scale-down. */
  keep: number;
  timeScale: number;
}

const RELEASE_DELAY_SECONDS = 10;
const ours = (e: { tags: Array<{ key: string; value: string }> }) =>
  e.tags.some((t) => t.key === 'eni-ipam.io/cluster' && t.value === 'bench');
const COOLDOWN_SECONDS = 5;

/**
 * Pods fill every node, then most go away. The operator releases the excess through the
 * agents' handshake (releaseDelaySeconds, cool-down) and deletes ENIs left empty. Reports
 * what was released and the calls it took, and checks every IP still in use against the
 * emulated cloud: none may have been released.
 */
export async function scaleDown(o: ScaleDownOptions): Promise<void> {
  const classSpec = {
    vSwitchTags: { role: 'pods' },
    securityGroupTags: { role: 'pods' },
    preAllocate: 4,
    releaseDelaySeconds: RELEASE_DELAY_SECONDS,
    deleteEmptyENIs: true,
  };
  // Large instance types only, so that every node can hold the pods.
  const c = await BenchCluster.start({
    nodes: o.nodes,
    timeScale: o.timeScale,
    classSpec,
    agents: 'processes',
    agentCooldownSeconds: COOLDOWN_SECONDS,
    typeOf: (n) => (n % 2 ? 'ecs.g7.xlarge' : 'ecs.c7.2xlarge'),
  });
  try {
    await c.startOperator();
    await c.addNodes();
    await c.startAgents();
    if (!(await c.waitAllReady(300_000))) throw new Error('the pools did not all turn Ready');
    const pods = new Map(c.agents.map((a) => [a, [] as Array<{ id: string; ip: string }>]));
    await Promise.all(
      c.agents.map(async (a) => {
        for (let k = 0; k < o.podsPerNode; k++) {
          const id = `${a.node}-pod-${k}`;
          pods.get(a)!.push({ id, ip: (await c.allocate(a, id)).ip });
        }
      }),
    );
    await c.waitQuiet(3000, 120_000);
    const before = c.ecs.state();
    const enisBefore = before.enis.filter(ours).length;
    const ipsBefore = c.poolList().reduce((n, p) => n + (p.status?.summary?.available ?? 0), 0);
    c.ecs.resetStats();
    const startedAt = Date.now();
    // The pools' totals every half second, for the chart.
    const timeline: Array<[number, number, number]> = [];
    const sample = () => {
      const pools = c.poolList();
      timeline.push([
        (Date.now() - startedAt) / 1000,
        pools.reduce((n, p) => n + (p.status?.summary?.available ?? 0), 0),
        pools.reduce((n, p) => n + (p.status?.summary?.used ?? 0), 0),
      ]);
    };
    sample();
    const sampler = setInterval(sample, 500);
    const kept = new Map<string, string>();
    for (const [a, list] of pods) {
      for (const p of list.splice(o.keep)) await c.release(a, p.id);
      for (const p of list) kept.set(p.ip, a.node);
    }
    // Releases wait out the delay and the cool-down; then the pools hold still.
    await new Promise((r) => setTimeout(r, (RELEASE_DELAY_SECONDS + COOLDOWN_SECONDS) * 1000));
    await c.waitQuiet(5000, 300_000);
    const doneMs = Date.now() - startedAt;
    clearInterval(sampler);
    sample();
    writeChart('scale-down', {
      title: `scale-down: ${o.nodes} nodes go from ${o.podsPerNode} to ${o.keep} pods each`,
      xLabel: 'seconds since the pods went away',
      yLabel: 'IPs over all pools',
      series: [
        {
          label: 'available (on attached ENIs)',
          color: '#1f77b4',
          step: true,
          points: timeline.map(([t, a]) => [t, a]),
        },
        { label: 'used by pods', color: '#ff7f0e', step: true, points: timeline.map(([t, , u]) => [t, u]) },
      ],
      markers: [{ x: RELEASE_DELAY_SECONDS, label: 'releaseDelaySeconds', color: '#888' }],
    });
    const after = c.ecs.state();
    const enisAfter = after.enis.filter(ours).length;
    const ipsAfter = c.poolList().reduce((n, p) => n + (p.status?.summary?.available ?? 0), 0);
    const onCloud = new Map<string, string | undefined>();
    for (const e of after.enis) for (const ip of [e.primaryIp, ...e.secondaryIps]) onCloud.set(ip, e.instanceId);
    const instanceOf = new Map([...c.ecs.world.instances.values()].map((i) => [i.hostName, i.id]));
    const lostInUse = [...kept].filter(([ip, node]) => onCloud.get(ip) !== instanceOf.get(node));
    const calls = c.ecs.mutatingCalls();
    const used = Object.values(calls).reduce((a, b) => a + b, 0);
    writeResults(
      {
        scenario: 'scale-down',
        command: `npm run bench -- scale-down --nodes ${o.nodes} --pods-per-node ${o.podsPerNode} --keep ${o.keep} --time-scale ${o.timeScale}`,
        summary: {
          nodes: String(o.nodes),
          pods: `${o.podsPerNode} → ${o.keep} per node`,
          'IPs released': `${ipsBefore - ipsAfter} (${ipsBefore} → ${ipsAfter})`,
          'ENIs deleted': `${enisBefore - enisAfter} (${enisBefore} → ${enisAfter})`,
          'mutating calls': `${used} (${Object.entries(calls)
            .filter(([, n]) => n)
            .map(([a, n]) => `${a} ${n}`)
            .join(', ')})`,
          'IPs in use released': String(lostInUse.length),
        },
        target: 'no IP in use is released',
        met: lostInUse.length === 0,
        note: `Chart: results/scale-down.svg. releaseDelaySeconds ${RELEASE_DELAY_SECONDS}, agent cool-down ${COOLDOWN_SECONDS} s, deleteEmptyENIs true, preAllocate 4; the pools held still ${(doneMs / 1000).toFixed(0)} s after the pods went away.`,
      },
      { options: o, ipsBefore, ipsAfter, enisBefore, enisAfter, calls, lostInUse, settledAfterMs: doneMs },
    );
    console.log(
      `scale-down: released ${ipsBefore - ipsAfter} IPs and ${enisBefore - enisAfter} ENIs with ${used} calls; IPs in use released: ${lostInUse.length}`,
    );
  } finally {
    await c.stop();
  }
}
