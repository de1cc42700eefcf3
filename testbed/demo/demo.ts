import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type CoreV1Event } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { Server } from 'node:http';
import { Agent } from '../../src/agent/agent.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { agentClient } from '../../src/agent/client.js';
import { CRDS } from '../../src/api/crds.js';
import { API_VERSION, GROUP, VERSION, type ENIPool, type ENIPoolClass } from '../../src/api/types.js';
import { readClusterStatus } from '../../src/cli/kubectl-plugin.js';
import { statusText } from '../../src/inspect/status.js';
import { addCalls, fewestScaleUpCalls, quotaTime, scaleUpWant } from '../../src/ipam/quota-time.js';
import { CHECKOUT } from '../checkout.js';
import { createCloudClient, staticCredentials } from '../../src/cloud/index.js';
import { DEFAULT_OPERATOR_CONFIG } from '../../src/operator/config.js';
import { Operator } from '../../src/operator/operator.js';
import { serveObservability, type ListenAddress } from '../../src/observability/http.js';
import { silentLogger } from '../../src/observability/logger.js';
import { lockWorkDir } from '../cluster/work-dir-lock.js';
import { nodeObject, startEcsEmulator, type Fixture } from '../ecs/index.js';
import { startControlPlane } from '../control-plane/index.js';
import { KUBERNETES_VERSION } from '../control-plane/upstream.js';
import { MUTATING_SHOWN, renderLine, renderScreen, type DemoView } from './view.js';

export interface DemoOptions {
  nodes: number;
  podsPerNode: number;
  /** Pod starts and stops per second across the cluster. */
  churn: number;
  durationSeconds?: number;
  workDir: string;
  /** The operator's metrics; listened on first, so that a busy address fails before anything starts. */
  metricsAddr: ListenAddress;
  /** Where progress goes. */
  out: (text: string) => void;
  /** Redraw a live view in place (a terminal this wide) instead of printing a line per change. */
  screen?: { columns: number };
  stop: Promise<unknown>;
}

export interface DemoSummary {
  nodes: number;
  readyAfterSeconds?: number;
  /** The quota bound for these pools: the fewest mutating calls at the world's API quotas, plus one attach. */
  boundSeconds: number;
  /** What `kubectl eni-ipam status` said of the cluster at the end of the run. */
  status?: string;
  /** Where to look further while a demo runs. */
  lookFurther: string[];
  calls: Record<string, number>;
  allocations: number;
  emptyPoolWaits: number;
}

/**
 * The whole product on one machine: the ECS and Kubernetes emulators, the CRDs and a class,
 * simulated nodes backed by emulated instances, the operator (with leader election) and one
 * agent per node, and pods that come and go through the agents' real socket API.
 */
export async function runDemo(o: DemoOptions): Promise<DemoSummary> {
  const registry = new Registry();
  let operator: Operator | undefined = undefined;
  const metrics = await serveObservability(o.metricsAddr, registry, {
    live: () => true,
    ready: () => !!operator?.ready,
  });
  mkdirSync(o.workDir, { recursive: true });
  // One demo per directory; each run is a new emulated world, so what agents recorded in an
  // earlier one (addresses of ENIs that no longer exist) would be taken for pods still running.
  let unlock: () => void;
  try {
    unlock = lockWorkDir(o.workDir, 'demo');
  } catch (e) {
    metrics.server.close();
    throw e;
  }
  rmSync(join(o.workDir, 'nodes'), { recursive: true, force: true });
  const ecs = await startEcsEmulator();
  const kubeconfigPath = join(o.workDir, 'kubeconfig');
  const controlPlaneDir = join(o.workDir, 'control-plane');
  rmSync(controlPlaneDir, { recursive: true, force: true });
  const kube = await startControlPlane({ workDir: controlPlaneDir, controllers: ['serviceaccount', 'namespace'] });
  writeFileSync(kubeconfigPath, kube.kubeconfig, { mode: 0o600 });
  const kc = new KubeConfig();
  kc.loadFromString(kube.kubeconfig);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  o.out(`ECS emulator ${ecs.url} (region cn-hangzhou, AccessKeyId demo)`);
  const kubectl = `kubectl --kubeconfig ${kubeconfigPath} get enipools`;
  o.out(`Kubernetes ${KUBERNETES_VERSION} (kube-apiserver and etcd) ${kube.url}; try: ${kubectl}`);

  await kube.createCrds(Object.values(CRDS));
  const spec = {
    vSwitchTags: { role: 'pods' },
    securityGroupTags: { role: 'pods' },
    preAllocate: o.podsPerNode + 2,
    releaseDelaySeconds: 30,
  };
  await custom.createClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: 'enipoolclasses',
    body: { apiVersion: API_VERSION, kind: 'ENIPoolClass', metadata: { name: 'default' }, spec },
  });
  const instances = [...ecs.world.instances.values()].slice(0, o.nodes);
  const boundSeconds = quotaBoundSeconds(ecs.fixture, spec, instances);
  const lookFurther = [
    `kubectl --kubeconfig ${kubeconfigPath} get enipools`,
    `PATH=${join(CHECKOUT, 'bin')}:$PATH kubectl eni-ipam status --kubeconfig ${kubeconfigPath}`,
    `curl -s ${metrics.url}/metrics | grep ^eni_ipam_`,
  ];
  if (instances.length < o.nodes)
    o.out(`the default world has ${instances.length} instances; running ${instances.length} nodes`);
  for (const i of instances) {
    await core.createNode({ body: nodeObject(ecs.world, i.id) });
  }

  const client = createCloudClient({
    region: 'cn-hangzhou',
    ecsEndpoint: ecs.url,
    vpcEndpoint: ecs.url,
    credentials: staticCredentials({ accessKeyId: 'demo', accessKeySecret: 'demo-secret' }),
    registry,
    mayMutate: () => operator?.mayMutate() ?? false,
  });
  operator = new Operator({
    kc,
    api: client.api,
    logger: silentLogger(),
    registry,
    config: { ...DEFAULT_OPERATOR_CONFIG, clusterId: 'demo', vpcId: 'vpc-demo' },
    leaderElection: {
      namespace: 'kube-system',
      name: 'eni-ipam-operator',
      identity: 'demo-operator',
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
    },
  });
  o.out(`operator metrics ${metrics.url}/metrics`);
  await operator.start();

  const agents: Array<{ agent: Agent; server: Server; node: string; socket: string }> = [];
  for (const i of instances) {
    const dir = join(o.workDir, 'nodes', i.hostName);
    const agent = new Agent({
      kc,
      node: i.hostName,
      stateDir: dir,
      cooldownMs: 5000,
      statusIntervalMs: 500,
      logger: silentLogger(),
      registry: new Registry(),
    });
    await agent.start();
    const socket = join(dir, 'agent.sock');
    agents.push({ agent, server: await serveAgentApi(agent, socket), node: i.hostName, socket });
  }

  const started = Date.now();
  let readyAt: number | undefined;
  let allocations = 0;
  let emptyPoolWaits = 0;
  let podSeq = 0;
  const running = new Map<string, string[]>(agents.map((a) => [a.node, []]));
  const quotas = ecs.fixture.quotas?.api ?? {};
  // Call totals a minute back, for the per-minute use of each action's quota.
  const history: Array<{ at: number; totals: Record<string, number> }> = [{ at: started, totals: {} }];
  let last = '';
  const tick = async () => {
    const pools = (
      (await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools' })) as {
        items: ENIPool[];
      }
    ).items;
    const ready = pools.filter((p) =>
      p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    ).length;
    if (ready === instances.length && readyAt === undefined) {
      readyAt = Date.now();
      const after = (readyAt - started) / 1000;
      if (!o.screen)
        o.out(
          `all ${instances.length} pools Ready after ${after.toFixed(1)} s; the quota bound for them is ` +
            `${boundSeconds.toFixed(1)} s. Look further: ${lookFurther.join('  |  ')}`,
        );
    }
    const calls = ecs.stats().calls;
    const totals = Object.fromEntries(Object.entries(calls).map(([a, c]) => [a, c.OK ?? 0]));
    const now = Date.now();
    history.push({ at: now, totals });
    while (history.length > 1 && history[0]!.at < now - 60_000) history.shift();
    const events = o.screen ? await recentEvents(core) : [];
    const view: DemoView = {
      nodes: instances.length,
      ready,
      available: pools.reduce((n, p) => n + (p.status?.summary?.available ?? 0), 0),
      used: pools.reduce((n, p) => n + (p.status?.summary?.used ?? 0), 0),
      actions: [...new Set([...MUTATING_SHOWN, ...Object.keys(totals)])].sort().map((action) => ({
        action,
        total: totals[action] ?? 0,
        lastMinute: (totals[action] ?? 0) - (history[0]!.totals[action] ?? 0),
        quotaPerMinute: quotas[action]?.perMinute,
      })),
      throttled: Object.values(calls).reduce((n, c) => n + (c['Throttling.User'] ?? 0), 0),
      allocations,
      emptyPoolWaits,
      events,
      elapsedSeconds: (now - started) / 1000,
      metricsUrl: `${metrics.url}/metrics`,
      kubectl,
    };
    if (o.screen) {
      o.out(`\x1b[H\x1b[2J${renderScreen(view, o.screen.columns).join('\n')}`);
      return;
    }
    const line = renderLine(view);
    if (line !== last) o.out(line);
    last = line;
  };
  // Pods come and go through the agents' socket API, as the CNI plugin would call it.
  const churn = async () => {
    // Pods are scheduled once the pools are ready, as a cluster's pods start after its nodes.
    if (readyAt === undefined) return;
    const a = agents[Math.floor(Math.random() * agents.length)]!;
    const pods = running.get(a.node)!;
    // About podsPerNode on each node: below it a pod starts, above it one stops, at it either (a
    // walk left free above it would outgrow any pool in a long run).
    if (pods.length < o.podsPerNode || (pods.length === o.podsPerNode && Math.random() < 0.5)) {
      const id = `pod-${++podSeq}`;
      pods.push(id);
      const lease = await agentClient.allocate(a.socket, { containerId: id, ifName: 'eth0', pod: `default/${id}` });
      if (lease !== 'pool-empty') allocations++;
      else {
        emptyPoolWaits++;
        pods.splice(pods.indexOf(id), 1);
      }
    } else {
      const id = pods.splice(Math.floor(Math.random() * pods.length), 1)[0]!;
      await agentClient.release(a.socket, id, 'eth0');
    }
  };
  const timers = [
    setInterval(() => void tick().catch(() => undefined), 1000),
    setInterval(() => void churn().catch(() => undefined), Math.max(10, 1000 / Math.max(0.1, o.churn))),
  ];
  const deadline = o.durationSeconds
    ? new Promise((r) => setTimeout(r, o.durationSeconds! * 1000))
    : new Promise(() => undefined);
  await Promise.race([o.stop, deadline]);
  timers.forEach(clearInterval);
  await tick().catch(() => undefined);

  const status = await readClusterStatus(kc)
    .then(statusText)
    .catch((e: unknown) => `(kubectl eni-ipam status failed: ${(e as Error).message})`);
  const summary: DemoSummary = {
    nodes: instances.length,
    readyAfterSeconds: readyAt ? Math.round((readyAt - started) / 100) / 10 : undefined,
    boundSeconds: Math.round(boundSeconds * 10) / 10,
    status,
    lookFurther,
    calls: Object.fromEntries(Object.entries(ecs.stats().calls).map(([a, c]) => [a, c.OK ?? 0])),
    allocations,
    emptyPoolWaits,
  };
  for (const a of agents) {
    a.server.close();
    await a.agent.stop();
  }
  await operator.stop();
  await client.close();
  metrics.server.close();
  await kube.close();
  await ecs.close();
  writeFileSync(join(o.workDir, 'summary.json'), JSON.stringify(summary, null, 2));
  unlock();
  return summary;
}

/**
 * The quota bound of the demo's scale-up (as the benchmarks count it): each node's pool filled with
 * the fewest mutating calls, all of them at the world's per-action quotas, plus one attach delay.
 */
function quotaBoundSeconds(
  world: Fixture,
  spec: ENIPoolClass['spec'],
  instances: Array<{ instanceType: string }>,
): number {
  const calls: Record<string, number> = {};
  for (const i of instances) {
    const t = world.instanceTypes.find((x) => x.id === i.instanceType)!;
    const limits = {
      eniQuantity: t.eniQuantity,
      ipv4PerEni: t.eniPrivateIpAddressQuantity,
      ipv6PerEni: t.eniIpv6AddressQuantity,
    };
    addCalls(calls, fewestScaleUpCalls(limits, spec, scaleUpWant(limits, spec), world.limits?.createSecondaryIpsMax));
  }
  return quotaTime(calls, world.quotas?.api ?? {}, world.delays?.attachMs ?? 0).ms / 1000;
}

/** The newest Events of the demo's namespace, one line each, oldest first. */
async function recentEvents(core: CoreV1Api): Promise<string[]> {
  const list = await core.listNamespacedEvent({ namespace: 'default' });
  const at = (e: CoreV1Event) =>
    new Date(e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? 0).getTime();
  return list.items
    .sort((a, b) => at(a) - at(b))
    .slice(-5)
    .map(
      (e) =>
        `${e.type === 'Warning' ? '!' : ' '} ${e.reason} ` +
        `${e.involvedObject.kind}/${e.involvedObject.name}: ${e.message}`,
    );
}
