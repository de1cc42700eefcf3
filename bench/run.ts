import { parseArgs } from 'node:util';
import { kubeWatch } from './kube-watch.js';

/** `npm run bench -- <scenario> [options]` */
const SCENARIOS: Record<string, { help: string; run: (flags: Record<string, string | undefined>) => Promise<void> }> = {
  'kube-watch': {
    help: 'watch fan-out and write throughput of the Kubernetes emulator [--objects 5000] [--watchers 50] [--updates 5000] [--concurrency 16]',
    run: (f) =>
      kubeWatch({
        objects: Number(f.objects ?? 5000),
        watchers: Number(f.watchers ?? 50),
        updates: Number(f.updates ?? 5000),
        concurrency: Number(f.concurrency ?? 16),
      }),
  },
};

const [scenario, ...rest] = process.argv.slice(2);
const entry = scenario ? SCENARIOS[scenario] : undefined;
if (!entry) {
  console.error(`usage: npm run bench -- <scenario> [options]\n${Object.entries(SCENARIOS).map(([n, s]) => `  ${n}: ${s.help}`).join('\n')}`);
  process.exit(2);
}
const { values } = parseArgs({ args: rest, options: Object.fromEntries(['objects', 'watchers', 'updates', 'concurrency'].map((k) => [k, { type: 'string' as const }])), strict: true });
await entry.run(values);
