import { parseArgs } from 'node:util';
import { churn } from './churn.js';
import { cniPlugin } from './cni-plugin.js';
import { datapathBench } from './datapath.js';
import { footprint } from './footprint.js';
import { GROWTH_RATES, growth } from './growth.js';
import { kubeWatch } from './kube-watch.js';
import { redraw } from './redraw.js';
import { scaleDown } from './scale-down.js';
import { scaleUp } from './scale-up.js';

type Flags = Record<string, string | undefined>;

/** A number flag, or its default; anything else stops the run with a clear message. */
function num(f: Flags, name: string, dflt: number): number {
  const v = f[name] === undefined ? dflt : Number(f[name]);
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`--${name} must be a positive number, got ${JSON.stringify(f[name])}`);
    process.exit(2);
  }
  return v;
}

/** `npm run bench -- <scenario> [options]` */
const SCENARIOS: Record<string, { help: string; flags: string[]; run: (f: Flags) => Promise<void> }> = {
  'kube-watch': {
    help: 'watch fan-out and write throughput of the Kubernetes emulator [--objects 5000] [--watchers 50] [--updates 5000] [--concurrency 16]',
    flags: ['objects', 'watchers', 'updates', 'concurrency'],
    run: (f) =>
      kubeWatch({
        objects: num(f, 'objects', 5000),
        watchers: num(f, 'watchers', 50),
        updates: num(f, 'updates', 5000),
        concurrency: num(f, 'concurrency', 16),
      }),
  },
  'scale-up': {
    help: 'N nodes join at once; time to all Ready against the quota bound [--nodes 100] [--time-scale 5] [--pre-allocate 8] [--mode secondary|primary-eni|prefix|cilium] [--quota-scale 1]',
    flags: ['nodes', 'time-scale', 'pre-allocate', 'mode', 'quota-scale'],
    run: (f) => {
      const mode = f.mode ?? 'secondary';
      if (mode !== 'secondary' && mode !== 'primary-eni' && mode !== 'prefix' && mode !== 'cilium') {
        console.error(`--mode must be secondary, primary-eni, prefix or cilium, got ${JSON.stringify(mode)}`);
        process.exit(2);
      }
      return scaleUp({
        nodes: num(f, 'nodes', 100),
        timeScale: num(f, 'time-scale', 5),
        preAllocate: num(f, 'pre-allocate', 8),
        mode,
        quotaScale: num(f, 'quota-scale', 1),
      });
    },
  },
  churn: {
    help: 'steady pod starts and stops; CNI allocation wait and API calls [--nodes 100] [--seconds 180] [--rate 50] [--pods-per-node 10] [--pre-allocate 8]',
    flags: ['nodes', 'seconds', 'rate', 'pods-per-node', 'pre-allocate'],
    run: (f) =>
      churn({
        nodes: num(f, 'nodes', 100),
        seconds: num(f, 'seconds', 180),
        rate: num(f, 'rate', 50),
        podsPerNode: num(f, 'pods-per-node', 10),
        preAllocate: num(f, 'pre-allocate', 8),
      }),
  },
  growth: {
    help: 'pods arriving steadily on every node; mutating calls against the floor [--rate slow|fast] [--mode secondary|prefix] [--nodes 100] [--pre-allocate 8] [--max-batch 16] [--every S] [--seconds S]',
    flags: ['rate', 'mode', 'nodes', 'pre-allocate', 'max-batch', 'every', 'seconds'],
    run: (f) => {
      const rate = f.rate ?? 'slow';
      if (rate !== 'slow' && rate !== 'fast') {
        console.error(`--rate must be slow or fast, got ${JSON.stringify(rate)}`);
        process.exit(2);
      }
      const mode = f.mode ?? 'secondary';
      if (mode !== 'secondary' && mode !== 'prefix') {
        console.error(`--mode must be secondary or prefix, got ${JSON.stringify(mode)}`);
        process.exit(2);
      }
      const maxBatch = f['max-batch'] === '0' ? 0 : num(f, 'max-batch', 16);
      return growth({
        rate,
        mode,
        nodes: num(f, 'nodes', 100),
        preAllocate: num(f, 'pre-allocate', 8),
        maxBatch,
        everySeconds: num(f, 'every', GROWTH_RATES[rate].everySeconds),
        seconds: num(f, 'seconds', GROWTH_RATES[rate].seconds),
      });
    },
  },
  'scale-down': {
    help: 'most pods go away; what is released and that nothing in use is [--nodes 50] [--pods-per-node 20] [--keep 2] [--time-scale 10]',
    flags: ['nodes', 'pods-per-node', 'keep', 'time-scale'],
    run: (f) =>
      scaleDown({
        nodes: num(f, 'nodes', 50),
        podsPerNode: num(f, 'pods-per-node', 20),
        keep: num(f, 'keep', 2),
        timeScale: num(f, 'time-scale', 10),
      }),
  },
  'cni-plugin': {
    help: 'the CNI plugin per call, Node.js before and static binary after; bursts of ADDs through it [--runs 50] [--parallel 50] [--rounds 5]',
    flags: ['runs', 'parallel', 'rounds'],
    run: (f) => cniPlugin({ runs: num(f, 'runs', 50), parallel: num(f, 'parallel', 50), rounds: num(f, 'rounds', 5) }),
  },
  datapath: {
    help: 'exclusive ENI against the shared path and host to host, on the strict VPC emulation (root) [--rounds 3] [--seconds 5] [--pings 200]',
    flags: ['rounds', 'seconds', 'pings'],
    run: (f) =>
      datapathBench({ rounds: num(f, 'rounds', 3), seconds: num(f, 'seconds', 5), pings: num(f, 'pings', 200) }),
  },
  footprint: {
    help: 'operator RSS, heap and full-resync cost at scale [--nodes 1000,5000] [--ips-per-node 20] [--time-scale 20]',
    flags: ['nodes', 'ips-per-node', 'time-scale'],
    run: (f) =>
      footprint({
        nodes: (f.nodes ?? '1000,5000').split(',').map(Number),
        ipsPerNode: num(f, 'ips-per-node', 20),
        timeScale: num(f, 'time-scale', 20),
      }),
  },
  redraw: {
    help: 'no run: redraws the charts from results/*.json where they hold the chart’s data',
    flags: [],
    run: async () => redraw(),
  },
};

const usage = `usage: npm run bench -- <scenario> [options]\n${Object.entries(SCENARIOS)
  .map(([n, s]) => `  ${n}: ${s.help}`)
  .join('\n')}`;
const [scenario, ...rest] = process.argv.slice(2);
const entry = scenario ? SCENARIOS[scenario] : undefined;
if (!entry) {
  console.error(scenario ? `unknown scenario ${scenario}\n${usage}` : usage);
  process.exit(2);
}
let values: Flags;
try {
  values = parseArgs({
    args: rest,
    options: Object.fromEntries(entry.flags.map((k) => [k, { type: 'string' as const }])),
    strict: true,
  }).values as Flags;
} catch (e) {
  console.error(`${(e as Error).message}\n${usage}`);
  process.exit(2);
}
await entry.run(values);
process.exit(0);
