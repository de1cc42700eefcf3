import { KUBERNETES_VERSION } from '../control-plane/upstream.js';
import { formatTaint, parseTaint, type TaintSpec } from '../../src/kube/taint.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import YAML from 'yaml';
import { delimiter } from 'node:path';
import {
  CHECKOUT,
  STARTUP_TAINT,
  ClusterOptionError,
  WorkDirInUse,
  chartValues,
  createAccessKeySecret,
  runtimeUnavailable,
  startCluster,
  type EmulatedCluster,
} from '../cluster/index.js';
import { loadFixtureFile } from '../ecs/index.js';
import { createLogger } from '../../src/observability/logger.js';
import { UsageError, untilSignal, type CommandSpec } from '../../src/cli/args.js';

/** `a.b=c` settings (as `helm --set` takes them) as a values file. */
function valuesYaml(settings: string[]): string {
  const root: Record<string, unknown> = {};
  for (const s of settings) {
    const eq = s.indexOf('=');
    const path = s.slice(0, eq).split('.');
    const raw = s.slice(eq + 1);
    let at = root;
    for (const k of path.slice(0, -1)) at = (at[k] ??= {}) as Record<string, unknown>;
    at[path.at(-1)!] = raw === 'true' ? true : raw === 'false' ? false : /^\d+$/.test(raw) ? Number(raw) : raw;
  }
  return YAML.stringify(root);
}

/** `helm` if it is on the PATH, else the one `npm run tools` put in this checkout's .tools/. */
function helmCommand(): string {
  const onPath = (process.env.PATH ?? '').split(delimiter).some((d) => d && existsSync(join(d, 'helm')));
  const local = join(CHECKOUT, '.tools', 'helm');
  return onPath || !existsSync(local) ? 'helm' : local;
}

/** A comma-separated list of taints, as kubelet's --register-with-taints takes it. */
const taintsOf = (text: string): TaintSpec[] => (text ? text.split(',').map((t) => parseTaint(t.trim())) : []);

/** Where the host outside the cluster is, and what it serves. */
function vpcHostLine(cluster: EmulatedCluster): string {
  const h = cluster.vpc.vpcHost!;
  const serves = [`ping`, `TCP echo :${h.ports.echo}`, `HTTP :${h.ports.http}`];
  if (h.ports.iperf3) serves.push(`iperf3 -s :${h.ports.iperf3}`);
  return `VPC host ${h.ip} (vSwitch ${h.vSwitchId}, namespace ${h.netns}) serves ${serves.join(', ')}; nodes' ENIs appear in their namespaces`;
}

export const emulateCluster: CommandSpec = {
  name: 'emulate cluster',
  summary:
    'Run a local cluster to install the chart into: ' +
    'both emulators and N nodes that run eni-ipam’s pods (needs root).',
  description: [
    'Starts the ECS emulator and the Kubernetes API (TLS, RBAC) on a bridge, the workload controllers',
    '(Deployments, DaemonSets, scheduling, garbage collection) and N nodes, one per emulated ECS instance.',
    'Each node is a network namespace whose kubelet runs the pods of eni-ipam’s image (ghcr.io/eni-ipam/eni-ipam,',
    'any tag) as local processes with this checkout at /app (run `npm run build` first), and of the toolbox',
    '(eni-ipam/toolbox: the machine’s own tools, for kubectl exec); pods outside the host network go through',
    'the node’s CNI configuration (the chart installs it); other images stay Pending.',
    'Prints the kubeconfig and the helm install line, then serves until SIGINT or SIGTERM.',
  ].join('\n'),
  flags: [
    {
      name: 'nodes',
      type: 'number',
      value: 'N',
      default: 3,
      help: 'emulated nodes (at most the ECS world’s instances)',
      check: (v) => (Number.isInteger(v) && Number(v) >= 1 ? undefined : 'must be a whole number, 1 or more'),
    },
    {
      name: 'work-dir',
      type: 'string',
      value: 'DIR',
      default: join(tmpdir(), 'eni-ipam-cluster'),
      help: 'kubeconfig, ca.crt and the nodes’ files (hostPath volumes, pod volumes) go here',
    },
    { name: 'fixture', type: 'string', value: 'FILE', help: 'the ECS world (default: the one `emulate ecs` serves)' },
    {
      name: 'register-with-taints',
      type: 'string',
      value: 'KEY[=VALUE]:EFFECT,...',
      default: formatTaint(STARTUP_TAINT),
      help:
        'the taints each node registers with, as kubelet’s flag (the chart’s operator removes eni-ipam’s ' +
        'once the node’s pool is Ready); "" for none',
      check: (v) => {
        try {
          taintsOf(String(v));
          return undefined;
        } catch (e) {
          return (e as Error).message;
        }
      },
    },
    {
      name: 'log-level',
      type: 'string',
      value: 'LEVEL',
      default: 'warn',
      choices: ['debug', 'info', 'warn', 'error'],
      help: 'log level of the controllers and kubelets',
    },
  ],
  async run(f) {
    const why = runtimeUnavailable();
    if (why) {
      process.stderr.write(`eni-ipam emulate cluster: ${why}\n`);
      return 1;
    }
    const workDir = String(f['work-dir']);
    let cluster: EmulatedCluster;
    try {
      cluster = await startCluster({
        nodes: f.nodes as number,
        workDir,
        fixture: f.fixture ? loadFixtureFile(String(f.fixture)) : undefined,
        registerWithTaints: taintsOf(String(f['register-with-taints'])),
        logger: createLogger({ level: String(f['log-level']), name: 'eni-ipam-cluster' }),
      });
    } catch (e) {
      if (e instanceof WorkDirInUse || e instanceof ClusterOptionError) throw new UsageError(e.message);
      throw e;
    }
    await createAccessKeySecret(cluster);
    const kc = cluster.kubeconfigPath;
    const chart = join(CHECKOUT, 'charts', 'eni-ipam');
    // The values that point the chart at this cluster's emulators, so the install line is always the same.
    const valuesFile = join(workDir, 'values.yaml');
    writeFileSync(valuesFile, valuesYaml(chartValues(cluster)));
    const out = [
      `ECS emulator ${cluster.ecs.url} (region ${cluster.ecs.world.region})`,
      `Kubernetes API ${cluster.kube.url} (kube-apiserver ${KUBERNETES_VERSION}: TLS, Node authorizer and RBAC); nodes: ${cluster.nodes.join(' ')}`,
      `kubeconfig written to ${kc}`,
      vpcHostLine(cluster),
      `Secret kube-system/eni-ipam-access-key holds the emulator's AccessKey.`,
      `Install the chart (${valuesFile} points it at this cluster's emulators):`,
      `  ${helmCommand()} install eni-ipam ${chart} --kubeconfig ${kc} --namespace kube-system --wait -f ${valuesFile}`,
      `Then: kubectl --kubeconfig ${kc} get pods -n kube-system -o wide; kubectl --kubeconfig ${kc} get enipools`,
      '',
    ];
    process.stdout.write(out.join('\n'));
    await untilSignal();
    await cluster.close();
    return 0;
  },
};
