import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Agent } from '../src/agent/agent.js';
import { serveAgentApi } from '../src/agent/api.js';
import { agentClient } from '../src/agent/client.js';
import { CRDS } from '../src/api/crds.js';
import { DEFAULT_API_LIMITS } from '../src/cloud/limits.js';
import { API_VERSION, GROUP, VERSION, type ENIPool, type ENIPoolClass } from '../src/api/types.js';
import { Informer } from '../src/kube/informer.js';
import { silentLogger } from '../src/observability/logger.js';
import { standInFor, type CiliumAgentStandIn } from '../testbed/cilium/agent.js';
import { ciliumNodeCrd } from '../testbed/cilium/index.js';
import { nodeObject, startEcsEmulator, type EcsEmulator } from '../testbed/ecs/index.js';
import { startKubeEmulator, type KubeEmulator } from '../testbed/kube/index.js';
import YAML from 'yaml';
import { operatorArgs, untilServing } from '../testbed/harness/process.js';
import { BENCH_DIR } from './report.js';
import { benchWorld, type BenchWorldOptions } from '../testbed/harness/world.js';

const BIN = fileURLToPath(new URL('../../bin/eni-ipam', import.meta.url));
/** The operator's V8 heap settings, as the chart's defaults set them. */
const OPERATOR_HEAP = (
  YAML.parse(readFileSync(join(BENCH_DIR, '..', 'charts', 'eni-ipam', 'values.yaml'), 'utf8')) as {
    operator: { maxHeapMiB: number; semiSpaceMiB: number };
  }
).operator;

export interface BenchClusterOptions extends BenchWorldOptions {
  classSpec: ENIPoolClass['spec'];
  /** `ciliumnode`: the operator serves stand-in cilium-agents through CiliumNodes (startCiliumAgents). */
  poolApi?: 'enipool' | 'ciliumnode';
  /** One agent per node with its unix socket API: in this process, or each in its own process as on a node. */
  agents: boolean | 'processes';
  agentCooldownSeconds?: number;
  operatorArgs?: string[];
}

export interface BenchAgent {
  node: string;
  socket: string;
  /** The agent's metrics, in the Prometheus text format. */
  metrics(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * The emulators and agents in this process, the operator as its own process (so that its
 * CPU and memory are its own, as in a cluster), and a watch that notes when each pool first
 * turns Ready.
 */
export class BenchCluster {
  readonly readyAt = new Map<string, number>();
  readonly agents: BenchAgent[] = [];
  readonly nodes: string[] = [];
  /** `ciliumnode`: the stand-in agents, and when each first served a full pool. */
  readonly ciliumAgents: CiliumAgentStandIn[] = [];
  readonly servingAt = new Map<string, number>();
  private readonly stopWatches: Array<() => void> = [];
  operator?: { child: ChildProcess; metricsUrl: string };
  private pools?: Informer<ENIPool>;
  private readonly dir = join(tmpdir(), `eni-ipam-bench-${process.pid}`);

  private constructor(
    readonly o: BenchClusterOptions,
    readonly ecs: EcsEmulator,
    readonly kube: KubeEmulator,
    readonly kc: KubeConfig,
  ) {}

  static async start(o: BenchClusterOptions): Promise<BenchCluster> {
    const ecs = await startEcsEmulator({ fixture: benchWorld(o) });
    const kube = await startKubeEmulator({});
    const kc = new KubeConfig();
    kc.loadFromString(kube.kubeconfig);
    const c = new BenchCluster(o, ecs, kube, kc);
    mkdirSync(c.dir, { recursive: true });
    const custom = kc.makeApiClient(CustomObjectsApi);
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    for (const crd of Object.values(CRDS)) await ext.createCustomResourceDefinition({ body: crd as never });
    if (o.poolApi === 'ciliumnode') await ext.createCustomResourceDefinition({ body: ciliumNodeCrd() as never });
    await custom.createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: 'enipoolclasses',
      body: { apiVersion: API_VERSION, kind: 'ENIPoolClass', metadata: { name: 'bench' }, spec: o.classSpec },
    });
    c.pools = new Informer<ENIPool>({
      kc,
      path: `/apis/${GROUP}/${VERSION}/enipools`,
      list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools' }),
      logger: silentLogger(),
      onChange: (_t, p) => {
        if (
          !c.readyAt.has(p.metadata.name) &&
          p.status?.conditions?.some((k) => k.type === 'Ready' && k.status === 'True')
        )
          c.readyAt.set(p.metadata.name, Date.now());
      },
    });
    await c.pools.start();
    return c;
  }

  /**
   * A cluster that runs in real time (time scale 1, so calls per hour are real), with an agent
   * per node in this process whose released addresses cool down for 30 s (the agent's default).
   */
  static realTime(o: Pick<BenchClusterOptions, 'nodes' | 'classSpec' | 'typeOf'>): Promise<BenchCluster> {
    return BenchCluster.start({ ...o, timeScale: 1, agents: true, agentCooldownSeconds: 30 });
  }

  /** Starts the operator process and waits until it serves metrics. */
  async startOperator(): Promise<void> {
    const kubeconfig = this.kubeconfigPath();
    const child = spawn(
      process.execPath,
      [
        // As the chart runs it (operator.maxHeapMiB, operator.semiSpaceMiB).
        `--max-old-space-size=${OPERATOR_HEAP.maxHeapMiB}`,
        `--max-semi-space-size=${OPERATOR_HEAP.semiSpaceMiB}`,
        ...(process.env.BENCH_HEAPSNAPSHOT
          ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${process.env.BENCH_HEAPSNAPSHOT}`]
          : []),
        BIN,
        ...operatorArgs({ kubeconfig, vpcId: 'vpc-bench', clusterId: 'bench', ecs: this.ecs.url }),
        // Rates run k times faster with the emulator's clock; a burst is a count of calls, not a time, so it stays.
        '--api-limits',
        Object.entries(this.o.quotas ?? DEFAULT_API_LIMITS)
          .map(([a, perMinute]) => `${a}=${perMinute * this.o.timeScale}:${perMinute}`)
          .join(','),
        '--no-leader-elect',
        ...(this.o.poolApi === 'ciliumnode' ? ['--pool-api', 'ciliumnode'] : []),
        '--log-level',
        'warn',
        ...(this.o.operatorArgs ?? []),
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, ALIBABA_CLOUD_ACCESS_KEY_ID: 'demo', ALIBABA_CLOUD_ACCESS_KEY_SECRET: 'demo-secret' },
      },
    );
    this.operator = { child, metricsUrl: (await untilServing(child, 'operator')).metrics };
  }

  /** Registers N nodes backed by the world's instances, all at once; answers when the first was sent. */
  async addNodes(): Promise<number> {
    const core = this.kc.makeApiClient(CoreV1Api);
    const instances = [...this.ecs.world.instances.values()];
    const t0 = Date.now();
    const queue = [...instances];
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let i = queue.shift(); i; i = queue.shift()) {
          await core.createNode({ body: nodeObject(this.ecs.world, i.id) });
          this.nodes.push(i.hostName);
        }
      }),
    );
    return t0;
  }

  async startAgents(): Promise<void> {
    const cooldown = this.o.agentCooldownSeconds ?? 5;
    const start = async (node: string): Promise<BenchAgent> => {
      const dir = join(this.dir, 'nodes', node);
      const socket = join(dir, 'agent.sock');
      if (this.o.agents === 'processes') {
        const args = [
          'agent',
          // The agents share the machine's network namespace: no node's datapath to set up.
          '--node-routing=false',
          '--kubeconfig',
          this.kubeconfigPath(),
          '--node',
          node,
          '--state-dir',
          dir,
          '--socket',
          socket,
          '--cooldown',
          String(cooldown),
          '--metrics-addr',
          '127.0.0.1:0',
          '--health-addr',
          '127.0.0.1:0',
          '--log-level',
          'warn',
        ];
        const child = spawn(process.execPath, ['--max-old-space-size=128', BIN, ...args], {
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        const metricsUrl = (await untilServing(child, 'agent')).metrics;
        return {
          node,
          socket,
          metrics: async () => (await fetch(metricsUrl)).text(),
          stop: async () => void (child.exitCode === null && (child.kill('SIGTERM'), await once(child, 'exit'))),
        };
      }
      const registry = new Registry();
      const agent = new Agent({
        kc: this.kc,
        node,
        stateDir: dir,
        cooldownMs: cooldown * 1000,
        statusIntervalMs: 1000,
        logger: silentLogger(),
        registry,
      });
      await agent.start();
      const server = await serveAgentApi(agent, socket);
      return {
        node,
        socket,
        metrics: () => registry.metrics(),
        stop: async () => (server.close(), await agent.stop()),
      };
    };
    // A few at a time: each agent process takes a moment of CPU to start.
    const queue = [...this.nodes];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let n = queue.shift(); n; n = queue.shift()) this.agents.push(await start(n));
      }),
    );
  }

  /**
   * A stand-in cilium-agent per node (in this process, as each agent's CiliumNode writes are
   * what matters here), each creating its CiliumNode with `pre-allocate` set, as a Cilium
   * user's agent flags would; `servingAt` notes when each first serves a full pool.
   */
  async startCiliumAgents(preAllocate: number): Promise<void> {
    const core = this.kc.makeApiClient(CoreV1Api);
    const queue = [...this.nodes];
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        for (let node = queue.shift(); node; node = queue.shift()) {
          const agent = standInFor(this.ecs.world, {
            kc: this.kc,
            node,
            nodeUid: (await core.readNode({ name: node })).metadata!.uid!,
            flags: { preAllocate },
            updateRateMs: 15_000 / this.o.timeScale,
          });
          await agent.start();
          this.ciliumAgents.push(agent);
        }
      }),
    );
    const watch = setInterval(() => {
      for (const a of this.ciliumAgents)
        if (!this.servingAt.has(a.name) && a.serving()) this.servingAt.set(a.name, Date.now());
      if (this.servingAt.size === this.nodes.length) clearInterval(watch);
    }, 50);
    this.stopWatches.push(() => clearInterval(watch));
  }

  waitAllServing(timeoutMs: number): Promise<boolean> {
    return this.waitForEveryNode(this.servingAt, timeoutMs);
  }

  /** The kubeconfig file the operator and agent processes read (written once). */
  private kubeconfigPath(): string {
    const path = join(this.dir, 'kubeconfig');
    if (!existsSync(path)) writeFileSync(path, this.kube.kubeconfig);
    return path;
  }

  /** One allocation through the agent's socket, retried every 20 ms while the pool is empty. */
  async allocate(
    a: BenchAgent,
    containerId: string,
  ): Promise<{ ip: string; waitMs: number; emptyPoolRetries: number }> {
    const started = performance.now();
    for (let retries = 0; ; retries++) {
      const lease = await agentClient.allocate(a.socket, { containerId, ifName: 'eth0', pod: `bench/${containerId}` });
      if (lease !== 'pool-empty')
        return { ip: lease.ip, waitMs: performance.now() - started, emptyPoolRetries: retries };
      await new Promise((res) => setTimeout(res, 20));
    }
  }

  release(a: BenchAgent, containerId: string): Promise<void> {
    return agentClient.release(a.socket, containerId, 'eth0');
  }

  poolList(): readonly ENIPool[] {
    return this.pools!.list();
  }

  waitAllReady(timeoutMs: number): Promise<boolean> {
    return this.waitForEveryNode(this.readyAt, timeoutMs);
  }

  /** Waits until `seen` has a time for every node; false at the timeout. */
  private async waitForEveryNode(seen: ReadonlyMap<string, number>, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (seen.size < this.nodes.length) {
      if (Date.now() > deadline) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
    return true;
  }

  /** Waits until the pools hold still (no pool changed for `quietMs`). */
  async waitQuiet(quietMs: number, timeoutMs: number): Promise<void> {
    const sig = () =>
      this.poolList()
        .map((p) => `${p.metadata.name}:${p.status?.summary?.available}:${p.status?.summary?.releasing ?? 0}`)
        .join();
    const deadline = Date.now() + timeoutMs;
    let last = sig();
    let since = Date.now();
    while (Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      const now = sig();
      if (now !== last) [last, since] = [now, Date.now()];
      else if (Date.now() - since >= quietMs) return;
    }
  }

  throttled(): number {
    return Object.values(this.ecs.stats().calls).reduce((n, c) => n + (c['Throttling.User'] ?? 0), 0);
  }

  async scrape(): Promise<string> {
    const r = await fetch(`${this.operator!.metricsUrl}`);
    return r.text();
  }

  /** The operator's resident set, from /proc. */
  operatorRssBytes(): number {
    const status = readFileSync(`/proc/${this.operator!.child.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
  }

  async stop(): Promise<void> {
    this.stopWatches.forEach((stop) => stop());
    await Promise.all([...this.agents, ...this.ciliumAgents].map((a) => a.stop()));
    if (this.operator && this.operator.child.exitCode === null) {
      this.operator.child.kill('SIGTERM');
      await once(this.operator.child, 'exit');
    }
    await this.pools?.stop();
    await this.kube.close();
    await this.ecs.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A metric's value (summed over its series) in a Prometheus text scrape. */
export function metric(text: string, name: string, labels = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      if (line.includes(labels)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}
