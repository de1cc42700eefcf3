import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  ApiextensionsV1Api,
  KubeConfig,
  V1MicroTime,
} from '@kubernetes/client-node';
import { CRDS } from '../src/api/crds.js';
import { API_VERSION, GROUP, VERSION, type ENIPool, type ENIPoolClass } from '../src/api/types.js';
import { TAGS } from '../src/operator/eni/cloud-state.js';
import { standInFor, type CiliumAgentStandIn } from '../testbed/cilium/agent.js';
import { ciliumNodeCrd } from '../testbed/cilium/index.js';
import { nodeObject, startEcsEmulator, type EcsEmulator, type Fixture } from '../testbed/ecs/index.js';
import { agentRequest } from '../src/agent/client.js';
import { kubeconfigFor } from '../testbed/kube/auth/kubeconfig.js';
import { startKubeEmulator, type KubeEmulator } from '../testbed/kube/index.js';
import { startMetadataRelay, type MetadataRelay } from '../testbed/ecs/metadata-relay.js';
import { startFaultProxy, type FaultProxy } from '../testbed/harness/netfault.js';
import { ClusterNetwork } from '../testbed/cluster/runtime/network.js';
import { startVpc, type Vpc } from '../testbed/vpc/index.js';
import { operatorArgs, untilServing } from '../testbed/harness/process.js';
import { benchWorld } from '../testbed/harness/world.js';
import { startRequestLog, type RequestLog } from './request-log.js';

// From the sources (tests) or from dist-chaos/chaos (npm run chaos).
const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = basename(dirname(HERE)) === 'dist-chaos' ? join(HERE, '..', '..') : join(HERE, '..');
export const BIN = join(ROOT, 'bin', 'eni-ipam');
export const CLUSTER_ID = 'chaos';
/** The operators' Lease (the CLI's defaults for its name, the suite's namespace). */
export const LEASE = { name: 'eni-ipam-operator', namespace: 'kube-system' };
/** The RAM role the operators use with `ramRole`. */
export const OPERATOR_ROLE = 'chaos-operator';

/** Per-action quotas (calls per minute and burst) that both the operator and the emulated cloud use. */
export const CHAOS_LIMITS: Record<string, { perMinute: number; burst: number }> = {
  CreateNetworkInterface: { perMinute: 120, burst: 20 },
  AttachNetworkInterface: { perMinute: 120, burst: 20 },
  DetachNetworkInterface: { perMinute: 120, burst: 20 },
  DeleteNetworkInterface: { perMinute: 120, burst: 20 },
  AssignPrivateIpAddresses: { perMinute: 240, burst: 40 },
  UnassignPrivateIpAddresses: { perMinute: 240, burst: 40 },
  DescribeNetworkInterfaces: { perMinute: 600, burst: 60 },
};

export interface ClusterOptions {
  nodes: number;
  /** Operator replicas (leader election when more than one). */
  replicas: number;
  limits?: Record<string, { perMinute: number; burst: number }>;
  classSpec?: Partial<ENIPoolClass['spec']>;
  /** Changes to the emulated world (delays, quotas) before it starts. */
  world?: (f: Fixture) => void;
  /** Start the agents and the operators (false: the scenario starts them). */
  start?: { operators?: boolean; agents?: boolean };
  operatorArgs?: string[];
  /** Nodes (of `nodes`) that join later (addHeldBackNodes). */
  heldBack?: number;
  /**
   * The operators use an ECS RAM role (credentials this long-lived) through a metadata
   * service of their own (a relay to the emulator's, with settable latency), not an AccessKey.
   */
  ramRole?: { credentialTtlSeconds: number };
  /** Each agent reaches the API server through a proxy of its own that records its requests. */
  agentRequestLogs?: boolean;
  /**
   * Nodes are network namespaces on the strict VPC emulation (needs root, iproute2, iptables): each
   * agent runs in its node's namespace with its node routing on, and an ENI's device appears there
   * `deviceDelayMs` after the ENI is InUse.
   */
  vpc?: { deviceDelayMs: number };
  /**
   * `ciliumnode`: the operators run with --pool-api ciliumnode and each node runs a stand-in
   * cilium-agent (testbed/cilium/agent.ts, in this process) instead of eni-ipam's agent.
   */
  poolApi?: 'enipool' | 'ciliumnode';
}

/** When and why an operator stopped leading, from its log line. */
export interface SteppedDown {
  /** The log line's time (epoch ms). */
  at: number;
  /** other-holder, conflict or renew-deadline. */
  reason: string;
  /** The holder it read in the Lease (other-holder). */
  holder?: string;
}

export interface OperatorProcess {
  index: number;
  /** The AccessKey it signs with; for a RAM-role operator a label (its keys are in accessKeyIds). */
  accessKeyId: string;
  /** The POD_NAME it runs as: its Lease identity is this, a dash and random characters. */
  podName: string;
  /** Every AccessKeyId its calls may carry: its AccessKey, or the RAM-role keys its metadata service handed it. */
  accessKeyIds: Set<string>;
  /** Its metadata service (with `ramRole`). */
  metadata?: MetadataRelay;
  /** Set once it logged that it stopped leading. */
  steppedDown?: SteppedDown;
  /** Its Lease identity, as its serving line says. */
  identity: string;
  child: ChildProcess;
  /** The operator's own path to the API server. */
  proxy: FaultProxy;
  healthUrl: string;
  exited: boolean;
}

export interface AddNodesOptions {
  /** Runs once the new nodes' agents serve, before their Nodes are registered. */
  whenAgentsServe?: (agents: AgentProcess[]) => Promise<void>;
}

export interface AgentProcess {
  node: string;
  /** Its node's network namespace (with `vpc`), where it runs. */
  netns?: string;
  socket: string;
  stateDir: string;
  child?: ChildProcess;
  /** Its requests to the API server (with agentRequestLogs). */
  requests?: RequestLog;
  kubeconfig?: string;
  /** With poolApi ciliumnode: the node's stand-in cilium-agent (no process, no socket). */
  cilium?: CiliumAgentStandIn;
}

/**
 * Emulated ECS and Kubernetes in this process, the operator replicas and one agent per node
 * as processes of their own (as in a cluster), each operator with its own AccessKey and its
 * own TCP path to the API server (so one path can fail alone).
 */
export class ChaosCluster {
  readonly operators: OperatorProcess[] = [];
  readonly agents: AgentProcess[] = [];
  readonly nodes: string[] = [];
  readonly limits: Record<string, { perMinute: number; burst: number }>;
  readonly dir = join(tmpdir(), `eni-ipam-chaos-${process.pid}-${Date.now()}`);
  private operatorCount = 0;
  private metadataLatencyMs = 0;
  /** Instances whose Node is not registered yet. */
  private waiting: string[] = [];
  /** With `vpc`: the bridge that joins the nodes' namespaces to this machine (the API server), and the VPC. */
  network?: ClusterNetwork;
  vpc?: Vpc;
  /** With `vpc`: each node's (instance's) network namespace. */
  private readonly netnsOf = new Map<string, string>();

  private constructor(
    readonly o: ClusterOptions,
    readonly ecs: EcsEmulator,
    readonly kube: KubeEmulator,
    readonly kc: KubeConfig,
  ) {
    this.limits = o.limits ?? CHAOS_LIMITS;
  }

  static async start(o: ClusterOptions): Promise<ChaosCluster> {
    const limits = o.limits ?? CHAOS_LIMITS;
    const fixture = benchWorld({ nodes: o.nodes, timeScale: 1 });
    fixture.credentials = [
      ...fixture.credentials,
      ...Array.from({ length: 8 }, (_, i) => ({
        accessKeyId: `operator-${i}`,
        accessKeySecret: `operator-${i}-secret`,
      })),
    ];
    fixture.quotas = { ...fixture.quotas, api: { ...fixture.quotas!.api, ...limits } };
    fixture.delays = { attachMs: 1000, detachMs: 1000, deleteMs: 300 };
    if (o.ramRole)
      fixture.ramRoles = [
        ...(fixture.ramRoles ?? []),
        { name: OPERATOR_ROLE, credentialTtlSeconds: o.ramRole.credentialTtlSeconds },
      ];
    o.world?.(fixture);
    if (o.vpc && o.agentRequestLogs) throw new Error('the chaos cluster: vpc and agentRequestLogs do not go together');
    const network = o.vpc ? await ClusterNetwork.create() : undefined;
    const ecs = await startEcsEmulator({ fixture });
    // With namespaces the agents reach the API server at the bridge's address.
    const kube = await startKubeEmulator(network ? { host: '0.0.0.0' } : {});
    const kc = new KubeConfig();
    kc.loadFromString(kube.kubeconfig);
    const c = new ChaosCluster(o, ecs, kube, kc);
    mkdirSync(c.dir, { recursive: true });
    writeFileSync(join(c.dir, 'kubeconfig'), kube.kubeconfig);
    if (network) {
      c.network = network;
      try {
        await c.startVpc(network, o.vpc!.deviceDelayMs);
      } catch (e) {
        await c.stop();
        throw e;
      }
    }
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    for (const crd of Object.values(CRDS)) await ext.createCustomResourceDefinition({ body: crd as never });
    if (o.poolApi === 'ciliumnode') await ext.createCustomResourceDefinition({ body: ciliumNodeCrd() as never });
    const spec = {
      vSwitchTags: { role: 'pods' },
      securityGroupTags: { role: 'pods' },
      preAllocate: 4,
      releaseDelaySeconds: 3,
      deleteEmptyENIs: true,
      ...o.classSpec,
    };
    await kc.makeApiClient(CustomObjectsApi).createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: 'enipoolclasses',
      body: { apiVersion: API_VERSION, kind: 'ENIPoolClass', metadata: { name: 'chaos' }, spec },
    });
    c.waiting = [...ecs.world.instances.values()].filter((i) => i.hostName.startsWith('node-')).map((i) => i.id);
    await c.registerNodes(c.waiting.length - (o.heldBack ?? 0), o.start?.agents !== false);
    if (o.start?.operators !== false) for (let i = 0; i < o.replicas; i++) await c.startOperator();
    return c;
  }

  /** A namespace per node (held-back ones too) on the bridge, then the VPC over them all. */
  private async startVpc(network: ClusterNetwork, deviceDelayMs: number): Promise<void> {
    const instances = [...this.ecs.world.instances.values()].filter((i) => i.hostName.startsWith('node-'));
    for (const [k, inst] of instances.entries()) this.netnsOf.set(inst.id, (await network.addNode(k)).netns);
    const agentKubeconfig = join(this.dir, 'kubeconfig-nodes');
    writeFileSync(agentKubeconfig, kubeconfigFor(`http://${network.hostAddress}:${new URL(this.kube.url).port}`));
    // The nodes' eth0 stays on the bridge: the VPC brings only the secondary ENIs' devices.
    this.vpc = await startVpc({
      world: this.ecs.world,
      nodes: instances.map((i) => ({ instanceId: i.id, netns: this.netnsOf.get(i.id)!, primaryDevice: null })),
      prefix: `ecv${network.id}-`,
      deviceDelayMs,
    });
  }

  /**
   * Registers the next `n` held-back nodes (all at once) and starts their agents. With
   * `whenAgentsServe`, the agents start first and the Nodes are registered once it has run: a test
   * can then start a pod before the operator has made anything for its node, whatever the load.
   */
  async addHeldBackNodes(n: number, opts: AddNodesOptions = {}): Promise<void> {
    await this.registerNodes(n, this.o.start?.agents !== false, opts.whenAgentsServe);
  }

  private async registerNodes(
    n: number,
    agents: boolean,
    whenAgentsServe?: AddNodesOptions['whenAgentsServe'],
  ): Promise<void> {
    const core = this.kc.makeApiClient(CoreV1Api);
    const ids = this.waiting.splice(0, n);
    const added: AgentProcess[] = [];
    await Promise.all(
      ids.map(async (id) => {
        const node = this.ecs.world.instances.get(id)!.hostName;
        const a: AgentProcess = {
          node,
          socket: join(this.dir, 'nodes', node, 'run', 'agent.sock'),
          stateDir: join(this.dir, 'nodes', node, 'state'),
          ...(this.netnsOf.has(id)
            ? { netns: this.netnsOf.get(id), kubeconfig: join(this.dir, 'kubeconfig-nodes') }
            : {}),
        };
        if (this.o.agentRequestLogs) {
          a.requests = await startRequestLog(this.kube.url);
          a.kubeconfig = join(this.dir, `kubeconfig-agent-${node}`);
          writeFileSync(a.kubeconfig, kubeconfigFor(a.requests.url));
        }
        added.push(a);
      }),
    );
    const first = agents && whenAgentsServe !== undefined;
    if (first) {
      await this.startAgents(added);
      await whenAgentsServe(added);
    }
    await Promise.all(ids.map((id) => core.createNode({ body: nodeObject(this.ecs.world, id) })));
    this.nodes.push(...ids.map((id) => this.ecs.world.instances.get(id)!.hostName));
    this.agents.push(...added);
    if (agents && !first) await this.startAgents(added);
  }

  /** Starts one more operator replica, with the next AccessKey and a path of its own. */
  async startOperator(extraArgs: string[] = []): Promise<OperatorProcess> {
    const index = this.operatorCount++;
    const u = new URL(this.kube.url);
    const proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port) });
    const kubeconfig = join(this.dir, `kubeconfig-operator-${index}`);
    writeFileSync(kubeconfig, kubeconfigFor(proxy.url));
    const metadata = this.o.ramRole
      ? await startMetadataRelay(this.ecs.metadataUrl, { latencyMs: this.metadataLatencyMs })
      : undefined;
    const accessKeyId = metadata ? `ram-role-${index}` : `operator-${index % 8}`;
    const credentials = metadata
      ? { args: ['--ram-role', OPERATOR_ROLE, '--metadata-endpoint', metadata.url], env: {} }
      : {
          args: [],
          env: { ALIBABA_CLOUD_ACCESS_KEY_ID: accessKeyId, ALIBABA_CLOUD_ACCESS_KEY_SECRET: `${accessKeyId}-secret` },
        };
    const args = [
      BIN,
      ...operatorArgs({ kubeconfig, vpcId: 'vpc-bench', clusterId: CLUSTER_ID, ecs: this.ecs.url }),
      ...(this.o.poolApi === 'ciliumnode' ? ['--pool-api', 'ciliumnode'] : []),
      '--api-limits',
      Object.entries(this.limits)
        .map(([a, l]) => `${a}=${l.perMinute}:${l.burst}`)
        .join(','),
      '--resync-interval',
      '30',
      '--gc-interval',
      '10',
      '--gc-min-age',
      '10',
      '--log-level',
      process.env.CHAOS_LOG_LEVEL ?? 'warn',
      ...(this.o.replicas > 1 ? ['--leader-elect-namespace', LEASE.namespace] : ['--no-leader-elect']),
      ...credentials.args,
      ...(this.o.operatorArgs ?? []),
      ...extraArgs,
    ];
    const podName = `operator-${index}`;
    const child = spawn(process.execPath, ['--max-old-space-size=256', ...args], {
      stdio: ['ignore', 'pipe', process.env.CHAOS_LOGS ? 'inherit' : 'ignore'],
      env: { ...process.env, POD_NAME: podName, ...credentials.env },
    });
    const stepDowns = watchStepDown(child);
    const serving = await untilServing(child, 'operator');
    const op: OperatorProcess = {
      index,
      accessKeyId,
      podName,
      accessKeyIds: metadata?.accessKeyIds ?? new Set([accessKeyId]),
      metadata,
      identity: serving.identity ?? podName,
      child,
      proxy,
      healthUrl: serving.health,
      exited: false,
    };
    stepDowns((s) => (op.steppedDown ??= s));
    child.on('exit', () => (op.exited = true));
    this.operators.push(op);
    return op;
  }

  /** Every operator's metadata service (with `ramRole`) answers after this long, from now on. */
  setMetadataLatency(ms: number): void {
    this.metadataLatencyMs = ms;
    for (const op of this.operators) if (op.metadata) op.metadata.latencyMs = ms;
  }

  /** The operator whose calls carry this AccessKeyId. */
  operatorOf(accessKeyId: string | undefined): OperatorProcess | undefined {
    return accessKeyId === undefined ? undefined : this.operators.find((op) => op.accessKeyIds.has(accessKeyId));
  }

  /**
   * Writes `holder` into the operators' Lease with a fresh renewTime, over the suite's own path
   * (what a replica's acquisition after `kubectl delete lease` looks like); answers when it was written.
   */
  async rewriteLease(holder: string): Promise<number> {
    const api = this.kc.makeApiClient(CoordinationV1Api);
    for (;;) {
      const current = await api.readNamespacedLease(LEASE);
      try {
        await api.replaceNamespacedLease({
          ...LEASE,
          body: {
            ...current,
            spec: { ...current.spec, holderIdentity: holder, renewTime: new V1MicroTime(Date.now()) },
          },
        });
        return Date.now();
      } catch (e) {
        // The leader renewed between our read and our write: read again.
        if ((e as { code?: number }).code !== 409) throw e;
      }
    }
  }

  async startAgents(agents: AgentProcess[], opts: { wipeState?: boolean } = {}): Promise<void> {
    if (this.o.poolApi === 'ciliumnode') return this.startCiliumAgents(agents);
    const queue = [...agents];
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let a = queue.shift(); a; a = queue.shift()) {
          if (opts.wipeState) rmSync(a.stateDir, { recursive: true, force: true });
          a.child = this.spawnAgent(a, a.stateDir, ['ignore', 'pipe', process.env.CHAOS_LOGS ? 'inherit' : 'ignore']);
          await untilServing(a.child, 'agent');
        }
      }),
    );
  }

  /** A stand-in cilium-agent per node: it creates its CiliumNode (so its Node must be registered). */
  private async startCiliumAgents(agents: AgentProcess[]): Promise<void> {
    const core = this.kc.makeApiClient(CoreV1Api);
    await Promise.all(
      agents.map(async (a) => {
        const agent = standInFor(this.ecs.world, {
          kc: this.kc,
          node: a.node,
          nodeUid: (await core.readNode({ name: a.node })).metadata!.uid!,
          updateRateMs: 1000,
        });
        await agent.start();
        a.cilium = agent;
      }),
    );
  }

  /**
   * The node's agent, in its node's namespace with `vpc` (its datapath on), else in the machine's
   * (where there is no node's datapath to set up); `stateDir` instead of its own (a stray run elsewhere).
   */
  private spawnAgent(a: AgentProcess, stateDir: string, stdio: Array<'ignore' | 'pipe' | 'inherit'>): ChildProcess {
    const argv = [
      '--max-old-space-size=96',
      BIN,
      'agent',
      ...['--kubeconfig', a.kubeconfig ?? join(this.dir, 'kubeconfig'), '--node', a.node],
      ...['--state-dir', stateDir, '--socket', a.socket, '--cooldown', '3'],
      ...(a.netns ? [] : ['--node-routing=false']),
      ...['--metrics-addr', '127.0.0.1:0', '--health-addr', '127.0.0.1:0', '--log-level', 'warn'],
    ];
    // `ip netns exec` execs the program: the child is the agent itself.
    return a.netns
      ? spawn('ip', ['netns', 'exec', a.netns, process.execPath, ...argv], { stdio })
      : spawn(process.execPath, argv, { stdio });
  }

  /**
   * Starts one more agent for the node of `a` (a DaemonSet surge, a stray manual run) while `a`
   * runs, and waits for it to exit: its code and what it printed.
   */
  async runSecondAgent(
    a: AgentProcess,
    o: { stateDir?: string; timeoutMs?: number } = {},
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = this.spawnAgent(a, o.stateDir ?? a.stateDir, ['ignore', 'pipe', 'pipe']);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 20_000);
    const [code] = (await once(child, 'exit')) as [number | null];
    clearTimeout(timer);
    return { code, stdout, stderr };
  }

  /**
   * A node leaves as a cloud scale-in does it: its agent stops, its Node is deleted and its
   * instance released (its secondary ENIs fall back to Available).
   */
  async removeNode(node: string): Promise<void> {
    const a = this.agents.find((x) => x.node === node);
    if (a) await this.killAgent(a, 'SIGTERM');
    this.agents.splice(this.agents.indexOf(a!), a ? 1 : 0);
    this.nodes.splice(this.nodes.indexOf(node), 1);
    const instance = [...this.ecs.world.instances.values()].find((i) => i.hostName === node);
    await this.kc.makeApiClient(CoreV1Api).deleteNode({ name: node });
    if (instance) this.ecs.world.releaseInstance(instance.id);
  }

  /** A second Node object for an instance that has one already (a duplicated providerID); answers its name. */
  async duplicateNode(of: string): Promise<string> {
    const instance = [...this.ecs.world.instances.values()].find((i) => i.hostName === of)!;
    const name = `${of}-dup`;
    const node = nodeObject(this.ecs.world, instance.id);
    await this.kc.makeApiClient(CoreV1Api).createNode({ body: { ...node, metadata: { ...node.metadata, name } } });
    return name;
  }

  async deleteNodeObject(name: string): Promise<void> {
    await this.kc.makeApiClient(CoreV1Api).deleteNode({ name });
  }

  async killAgent(a: AgentProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await a.cilium?.stop();
    if (!a.child || a.child.exitCode !== null || a.child.signalCode) return;
    a.child.kill(signal);
    await once(a.child, 'exit');
  }

  async killOperator(op: OperatorProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (op.exited) return;
    op.child.kill(signal);
    await once(op.child, 'exit').catch(() => undefined);
  }

  /**
   * A pod of the workload as the scheduler and the kubelet record it: placed on its node before
   * its sandbox is set up, given its IP after, deleted when it stops. Written to the emulator's
   * store directly: those components are not under test, and their writes must not be hit by
   * the operator's Kubernetes faults.
   */
  recordPod(
    node: string,
    name: string,
    ip: string | undefined | 'gone',
    /** Its container's resource limits (eniipam.io/eni, say). */
    limits?: Record<string, string>,
  ): void {
    const store = this.kube.store;
    const t = store.types.get('pods')!;
    const previous = store.get(t, 'default', name);
    if (ip === 'gone') {
      if (previous)
        store.remove(t, { ...previous, metadata: { ...previous.metadata, resourceVersion: store.nextRv() } });
      return;
    }
    const metadata = {
      name,
      namespace: 'default',
      uid: previous?.metadata.uid ?? crypto.randomUUID(),
      creationTimestamp: previous?.metadata.creationTimestamp ?? new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      resourceVersion: store.nextRv(),
    };
    const status = ip ? { phase: 'Running', podIP: ip, podIPs: [{ ip }] } : { phase: 'Pending' };
    store.put(
      t,
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata,
        spec: {
          nodeName: node,
          containers: [
            { name: 'app', image: 'registry.k8s.io/pause:3.10', ...(limits ? { resources: { limits } } : {}) },
          ],
        },
        status,
      },
      previous,
    );
  }

  /** The identity on the operator's Lease, if it is current. */
  leaseHolder(): string | undefined {
    const t = this.kube.store.types.get('leases.coordination.k8s.io');
    const lease = t && this.kube.store.list(t, LEASE.namespace).find((l) => l.metadata.name === LEASE.name);
    const spec = lease?.spec as
      { holderIdentity?: string; renewTime?: string; leaseDurationSeconds?: number } | undefined;
    if (!spec?.holderIdentity || !spec.renewTime) return undefined;
    const fresh = Date.now() - Date.parse(spec.renewTime) < (spec.leaseDurationSeconds ?? 15) * 1000;
    return fresh ? spec.holderIdentity : undefined;
  }

  /** The operator that leads now (the only one, without leader election), if it is running. */
  leader(): OperatorProcess | undefined {
    if (this.o.replicas <= 1) return this.operators.find((o) => !o.exited);
    const id = this.leaseHolder();
    return this.operators.find((o) => id?.startsWith(`${o.podName}-`) && !o.exited);
  }

  async operatorReady(op: OperatorProcess | undefined): Promise<boolean> {
    if (!op || op.exited) return false;
    try {
      const r = await fetch(op.healthUrl.replace(/\/healthz$/, '/readyz'), { signal: AbortSignal.timeout(1000) });
      return r.status === 200;
    } catch {
      return false;
    }
  }

  pools(): ENIPool[] {
    const t = this.kube.store.types.get(`enipools.${GROUP}`);
    if (!t) return [];
    return this.kube.store.list(t) as unknown as ENIPool[];
  }

  readyPools(): number {
    return this.pools().filter((p) => p.status?.conditions?.some((k) => k.type === 'Ready' && k.status === 'True'))
      .length;
  }

  /** Secondary ENIs in the cloud that carry this cluster's tag. */
  clusterEnis(): Array<{ id: string; node?: string; status: string; creationTime: number }> {
    return [...this.ecs.world.enis.values()]
      .filter((e) => e.type === 'Secondary' && e.tags.some((t) => t.key === TAGS.cluster && t.value === CLUSTER_ID))
      .map((e) => ({
        id: e.id,
        node: e.tags.find((t) => t.key === TAGS.node)?.value,
        status: e.status,
        creationTime: e.creationTime,
      }));
  }

  async stop(): Promise<void> {
    await Promise.all(this.agents.map((a) => this.killAgent(a, 'SIGTERM')));
    await Promise.all(this.operators.map((o) => this.killOperator(o, 'SIGTERM')));
    await Promise.all(this.operators.map((o) => o.proxy.close()));
    await Promise.all(this.operators.map((o) => o.metadata?.close()));
    await Promise.all(this.agents.map((a) => a.requests?.close()));
    await this.vpc?.stop();
    await this.network?.destroy();
    await this.kube.close();
    await this.ecs.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Calls back with the first "lost leadership" line an operator logs (a warn line, so it is
 * printed at the suite's log level): when it stopped leading and why.
 */
function watchStepDown(child: ChildProcess): (cb: (s: SteppedDown) => void) => void {
  let seen: SteppedDown | undefined;
  let listener: ((s: SteppedDown) => void) | undefined;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (seen || !line.includes('lost leadership:')) return;
    try {
      const l = JSON.parse(line) as { time?: string; reason?: string; holder?: string; msg?: string };
      if (!l.msg?.startsWith('lost leadership:') || !l.time) return;
      seen = { at: Date.parse(l.time), reason: l.reason ?? 'unknown', holder: l.holder };
      listener?.(seen);
    } catch {
      // Not a log line.
    }
  });
  return (cb) => {
    listener = cb;
    if (seen) cb(seen);
  };
}

/** What the agent says it holds now (GET /v1/allocations), container -> IP; undefined when it does not answer. */
export async function agentHolds(a: AgentProcess): Promise<Map<string, string> | undefined> {
  try {
    const r = await agentRequest(a.socket, 'GET', '/v1/allocations', undefined, 2000);
    if (r.status !== 200) return undefined;
    const list = (JSON.parse(r.text) as { allocations: Array<{ containerId: string; ip: string }> }).allocations;
    return new Map(list.map((x) => [x.containerId, x.ip]));
  } catch {
    return undefined;
  }
}
