import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkDirInUse } from '../cluster/work-dir-lock.js';
import { runDemo } from '../demo/demo.js';
import { addressFlag, addressOf, listenFailure } from '../../src/cli/addresses.js';
import { UsageError, positive, untilSignal, type CommandSpec } from '../../src/cli/args.js';

export const demoCommand: CommandSpec = {
  name: 'demo',
  summary:
    'Run the whole product on this machine: emulated ECS and Kubernetes, the operator, an agent per node, ' +
    'and pods coming and going.',
  description:
    'Runs until Ctrl-C or --duration, then prints a summary. ' +
    'In a terminal it shows a live view; otherwise one line per change. ' +
    'kubectl works against the emulated cluster (the command is printed).',
  flags: [
    {
      name: 'nodes',
      type: 'number',
      value: 'N',
      default: 12,
      help: 'simulated nodes (the default world has 24 instances)',
      check: positive,
    },
    {
      name: 'pods-per-node',
      type: 'number',
      value: 'N',
      default: 6,
      help: 'pods kept on each node, roughly',
      check: positive,
    },
    {
      name: 'churn',
      type: 'number',
      value: 'PODS_PER_SECOND',
      default: 5,
      help: 'pod starts and stops per second across the cluster',
      check: positive,
    },
    {
      name: 'duration',
      type: 'number',
      value: 'SECONDS',
      help: 'stop after this long (default: run until Ctrl-C)',
      check: positive,
    },
    {
      name: 'work-dir',
      type: 'string',
      value: 'DIR',
      default: join(tmpdir(), 'eni-ipam-demo'),
      help: 'kubeconfig, agent state and summary go here',
    },
    addressFlag('metrics-addr', '127.0.0.1:9090', 'operator metrics'),
  ],
  async run(f) {
    const stop = untilSignal();
    const summary = await runDemo({
      nodes: f.nodes as number,
      podsPerNode: f['pods-per-node'] as number,
      churn: f.churn as number,
      durationSeconds: f.duration as number | undefined,
      workDir: String(f['work-dir']),
      metricsAddr: addressOf(f['metrics-addr']),
      out: (text) => process.stdout.write(`${text}\n`),
      screen: process.stdout.isTTY ? { columns: process.stdout.columns || 100 } : undefined,
      stop,
    }).catch((e: unknown) => {
      if (e instanceof WorkDirInUse) throw new UsageError(e.message);
      throw listenFailure('metrics-addr', String(f['metrics-addr']), e) ?? e;
    });
    process.stdout.write(
      [
        '',
        'summary',
        `  nodes: ${summary.nodes}; all pools Ready after ${summary.readyAfterSeconds ?? 'never'} s; ` +
          `the quota bound for them: ${summary.boundSeconds} s` +
          (summary.readyAfterSeconds && summary.boundSeconds > 0
            ? ` (${(summary.readyAfterSeconds / summary.boundSeconds).toFixed(1)}x the bound)`
            : ''),
        `  OpenAPI calls: ${Object.entries(summary.calls)
          .map(([a, n]) => `${a} ${n}`)
          .join(', ')}`,
        `  pod IPs handed out: ${summary.allocations}; waits on an empty pool: ${summary.emptyPoolWaits}`,
        '',
        'kubectl eni-ipam status, at the end of the run:',
        ...(summary.status ?? '')
          .trimEnd()
          .split('\n')
          .map((l) => `  ${l}`),
        '',
        'look further (while a demo runs, from another terminal):',
        ...summary.lookFurther.map((c) => `  ${c}`),
        '',
      ].join('\n'),
    );
    return 0;
  },
};
