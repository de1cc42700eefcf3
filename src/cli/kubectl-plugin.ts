import { parseArgs } from 'node:util';
import { systemClock } from '../clock.js';
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import YAML from 'yaml';
import { GROUP, VERSION, type ENIPool, type ENIPoolClass } from '../api/types.js';
import { resolveLimits } from '../cloud/limits.js';
import { apiErrorMessage, ignoreNotFound } from '../kube/errors.js';
import { PlanInputError, planInput, planText, type PlanRequest } from '../inspect/plan-view.js';
import { whatIf } from '../inspect/plan.js';
import { clusterStatus, statusText, type ClusterStatus } from '../inspect/status.js';
import { podWhy, podWhyText, type EventFact } from '../inspect/why.js';
import { UsageError } from './args.js';
import { parseApiLimits } from './api-limits.js';

const HELP = `Usage: kubectl eni-ipam <command> [flags]

What eni-ipam knows of this cluster, from the objects it publishes.

Commands:
  status                       the cluster at a glance: per zone and vSwitch the free addresses, what the
                               pools hold and use, nodes Ready or not and why, per class the nodes it selects
  why POD [-n NS]              the pod's address, its ENI and vSwitch, or why it has none yet
  plan --class NAME --nodes N  what N new nodes of the class would take: ENIs and IPs per node, calls per
                               action, the time to all pools Ready at the operator's API quotas, and each
                               vSwitch's free addresses afterwards (the real planner, nothing is changed)
       [--instance-type T] [--pods-per-node P] [--zone Z] [--api-limits Action=perMinute[:burst],...]

Flags:
  -o, --output table|json|yaml output format (default table)
  --kubeconfig FILE            the kubeconfig (default: $KUBECONFIG, then ~/.kube/config)
  --context NAME               the kubeconfig context (default: its current one)
  -n, --namespace NS           the pod's namespace (why; default: the context's, else default)
  -h, --help                   show this help

kubectl hands a plugin none of its own flags: put --kubeconfig and --context after eni-ipam.
`;

const OPTIONS = {
  output: { type: 'string', short: 'o', default: 'table' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  class: { type: 'string' },
  nodes: { type: 'string' },
  'instance-type': { type: 'string' },
  'pods-per-node': { type: 'string' },
  zone: { type: 'string' },
  'api-limits': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Flags = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** The cluster the plugin reads, as kubectl finds it: --kubeconfig, else $KUBECONFIG or ~/.kube/config; --context. */
function kubeconfig(f: Flags): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (f.kubeconfig) kc.loadFromFile(f.kubeconfig);
    else kc.loadFromDefault();
  } catch (e) {
    throw new UsageError(
      `cannot read the kubeconfig ${f.kubeconfig ?? process.env.KUBECONFIG ?? '~/.kube/config'}: ${(e as Error).message}`,
    );
  }
  if (f.context) {
    if (!kc.getContexts().some((c) => c.name === f.context))
      throw new UsageError(
        `context "${f.context}" is not in the kubeconfig (contexts: ${
          kc
            .getContexts()
            .map((c) => c.name)
            .join(', ') || 'none'
        })`,
      );
    kc.setCurrentContext(f.context);
  }
  if (!kc.getCurrentCluster())
    throw new UsageError('the kubeconfig has no current cluster: pass --kubeconfig or --context, as to kubectl');
  return kc;
}

/** A read that names what it read when it fails (a 403 names the missing permission). */
async function read<T>(what: string, p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw new Error(`cannot read ${what}: ${apiErrorMessage(e)}`);
  }
}

const items = <T>(list: unknown) => ((list as { items?: T[] }).items ?? []) as T[];

function print(f: Flags, data: unknown, text: () => string): void {
  if (f.output === 'json') process.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
  else if (f.output === 'yaml') process.stdout.write(YAML.stringify(data));
  else process.stdout.write(text());
}

/** The cluster at a glance, read as `kubectl eni-ipam status` reads it (the demo prints it too). */
export async function readClusterStatus(kc: KubeConfig): Promise<ClusterStatus> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const [pools, classes, nodes] = await Promise.all([
    read('enipools', custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools' })),
    read(
      'enipoolclasses',
      custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipoolclasses' }),
    ),
    read('nodes', kc.makeApiClient(CoreV1Api).listNode()),
  ]);
  return clusterStatus(
    items<ENIPool>(pools),
    items<ENIPoolClass>(classes),
    nodes.items.map((n) => ({ name: n.metadata!.name!, zone: n.metadata?.labels?.['topology.kubernetes.io/zone'] })),
  );
}

async function status(kc: KubeConfig, f: Flags): Promise<void> {
  const view = await readClusterStatus(kc);
  print(f, view, () => statusText(view));
}

async function why(kc: KubeConfig, f: Flags, name: string | undefined): Promise<void> {
  if (!name) throw new UsageError('why needs the pod: kubectl eni-ipam why POD [-n NAMESPACE]');
  const namespace = f.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
  const core = kc.makeApiClient(CoreV1Api);
  const pod: V1Pod | undefined = await read(
    `pod ${namespace}/${name}`,
    ignoreNotFound(core.readNamespacedPod({ namespace, name })),
  );
  if (!pod) throw new Error(`pod ${namespace}/${name} not found`);
  const node = pod.spec?.nodeName;
  const custom = kc.makeApiClient(CustomObjectsApi);
  const [pool, events] = await Promise.all([
    node
      ? read(
          `enipool ${node}`,
          ignoreNotFound(
            custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools', name: node }),
          ),
        )
      : undefined,
    read(
      `the events of pod ${namespace}/${name}`,
      core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` }),
    ),
  ]);
  const ips = (pod.status?.podIPs ?? []).map((a) => a.ip).filter((ip): ip is string => !!ip);
  const facts: EventFact[] = events.items
    .filter((e) => !e.involvedObject.uid || e.involvedObject.uid === pod.metadata?.uid)
    .map((e) => ({
      type: e.type ?? '',
      reason: e.reason ?? '',
      message: e.message ?? '',
      from: e.source?.component ?? e.reportingComponent ?? '',
      count: e.count ?? 1,
      last: new Date(e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? 0).getTime(),
    }));
  const view = podWhy(
    {
      namespace,
      name,
      uid: pod.metadata?.uid,
      node,
      hostNetwork: pod.spec?.hostNetwork ?? false,
      phase: pod.status?.phase,
      ips: ips.length ? ips : pod.status?.podIP ? [pod.status.podIP] : [],
      unscheduled: pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status !== 'True')?.message,
    },
    pool as ENIPool | undefined,
    facts,
  );
  print(f, view, () => podWhyText(view, systemClock.now()));
}

/** The operator's API quotas: its Deployment's --api-limits and --api-limit-scale, else Terway's defaults. */
async function operatorQuotas(
  kc: KubeConfig,
  f: Flags,
): Promise<{ quotas: ReturnType<typeof resolveLimits>; source: string }> {
  if (f['api-limits'] !== undefined)
    return { quotas: resolveLimits(parseApiLimits(f['api-limits'])), source: '--api-limits' };
  let refused: string | undefined;
  const deployments = await kc
    .makeApiClient(AppsV1Api)
    .listDeploymentForAllNamespaces({ labelSelector: 'app.kubernetes.io/name=eni-ipam' })
    .catch((e: unknown) => {
      refused = apiErrorMessage(e);
      return undefined;
    });
  for (const d of deployments?.items ?? []) {
    const args = d.spec?.template.spec?.containers.find((c) => c.args?.[0] === 'operator')?.args;
    if (!args) continue;
    const value = (flag: string) => args.find((a) => a.startsWith(`--${flag}=`))?.slice(flag.length + 3);
    const scale = Number(value('api-limit-scale') ?? 1);
    return {
      quotas: resolveLimits(parseApiLimits(value('api-limits')), Number.isFinite(scale) && scale > 0 ? scale : 1),
      source: `the operator's Deployment ${d.metadata?.namespace}/${d.metadata?.name}`,
    };
  }
  return {
    quotas: resolveLimits({}),
    source: refused
      ? `Terway's defaults (the operator's Deployment could not be read: ${refused}; --api-limits says them)`
      : "Terway's defaults (no operator Deployment found; --api-limits says them)",
  };
}

async function plan(kc: KubeConfig, f: Flags): Promise<void> {
  if (!f.class) throw new UsageError('plan needs --class NAME (an ENIPoolClass)');
  const nodes = Number(f.nodes);
  if (!f.nodes || !Number.isInteger(nodes) || nodes < 1 || nodes > 5000)
    throw new UsageError(`plan needs --nodes N, a whole number from 1 to 5000${f.nodes ? `, not "${f.nodes}"` : ''}`);
  const podsPerNode = f['pods-per-node'] === undefined ? 0 : Number(f['pods-per-node']);
  // A node holds some hundreds of pods at most; the planner counts each one.
  if (!Number.isInteger(podsPerNode) || podsPerNode < 0 || podsPerNode > 1000)
    throw new UsageError(`--pods-per-node takes a whole number from 0 to 1000, not "${f['pods-per-node']}"`);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const [cls, classes] = await Promise.all([
    read(
      `enipoolclass ${f.class}`,
      ignoreNotFound(
        custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipoolclasses', name: f.class }),
      ),
    ),
    read(
      'enipoolclasses',
      custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipoolclasses' }),
    ),
  ]);
  if (!cls) throw new Error(`enipoolclass ${f.class} not found (kubectl get enipoolclasses lists them)`);
  const { quotas, source } = await operatorQuotas(kc, f);
  const request: PlanRequest = {
    nodes,
    podsPerNode,
    ...(f['instance-type'] ? { instanceType: f['instance-type'] } : {}),
    ...(f.zone ? { zone: f.zone } : {}),
  };
  let input;
  try {
    input = planInput(cls as ENIPoolClass, items<ENIPoolClass>(classes), request, quotas);
  } catch (e) {
    // What was asked does not fit what the class has (an instance type, a zone): the user's to change.
    if (e instanceof PlanInputError && (request.instanceType || request.zone)) throw new UsageError(e.message);
    throw e;
  }
  const result = whatIf(input);
  const view = {
    class: input.className,
    instanceType: input.instanceType,
    zone: input.zone,
    nodes,
    podsPerNode,
    quotas: source,
    ...result,
  };
  print(f, view, () => planText(view));
}

/** Runs the plugin; answers the exit code (2: a usage error, 1: the cluster could not answer). */
export async function runPlugin(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    // Node's messages go on to explain `--`; the first sentence says what is wrong.
    const first = (e as Error).message.split(/\.\s/)[0];
    process.stderr.write(`kubectl eni-ipam: ${first} (see kubectl eni-ipam --help)\n`);
    return 2;
  }
  const f = parsed.values;
  const [command, ...rest] = parsed.positionals;
  if (f.help || !command || command === 'help') {
    process.stdout.write(HELP);
    return command || f.help ? 0 : 2;
  }
  try {
    if (!['table', 'json', 'yaml'].includes(f.output))
      throw new UsageError(`-o takes table, json or yaml, not "${f.output}"`);
    const extra = command === 'why' ? rest.slice(1) : rest;
    if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
    if (!['status', 'why', 'plan'].includes(command))
      throw new UsageError(`unknown command "${command}" (commands: status, why, plan)`);
    const kc = kubeconfig(f);
    if (command === 'status') await status(kc, f);
    else if (command === 'why') await why(kc, f, rest[0]);
    else await plan(kc, f);
    return 0;
  } catch (e) {
    process.stderr.write(
      `kubectl eni-ipam ${command}: ${(e as Error).message}${e instanceof UsageError ? ' (see kubectl eni-ipam --help)' : ''}\n`,
    );
    return e instanceof UsageError ? 2 : 1;
  }
}
