import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { systemClock, type Cancel, type Clock } from '../clock.js';
import { GROUP, VERSION, type ENIPool, type ENIPoolClass } from '../api/types.js';
import type { EcsApi } from '../cloud/index.js';
import { apiErrorMessage, ignoreNotFound } from '../kube/errors.js';
import { IndexBy } from '../kube/index-by.js';
import { Informer } from '../kube/informer.js';
import { LeaderElector } from '../kube/leader-election.js';
import { WorkQueue, runWorkers, type ReconcileOutcome } from '../kube/workqueue.js';
import type { Logger } from '../observability/logger.js';
import { ClassReconciler } from './class/reconciler.js';
import { CloudState } from './eni/cloud-state.js';
import type { OperatorConfig } from './config.js';
import { EventRecorder } from '../kube/events.js';
import { collectLeakedEnis } from './eni/gc.js';
import { OperatorMetrics } from './metrics.js';
import { fleetView, type FleetView } from './fleet.js';
import { CloudFailures, isShutdown } from './failures.js';
import { EniLedger } from './eni/ledger.js';
import { EniLifecycle } from './eni/lifecycle.js';
import { NodeMemories } from './pool/node-memory.js';
import { PoolReconciler } from './pool/reconciler.js';
import { RequestStamps } from './pool/status.js';
import { KubePoolStore, poolEvents } from './pool/store.js';
import { StatePoller } from './eni/poller.js';
import { NodePlacement } from './class/node-placement.js';
import { KubePlacementStore, objectEvents } from './class/store.js';
import { CloudHealth } from './cloud-health.js';
import { CiliumReconciler } from './cilium/reconciler.js';
import { ciliumSpecFields } from './cilium/node-spec.js';
import { publishedAddresses, unservableByCilium } from './cilium/publication.js';
import { KubeCiliumNodeStore } from './cilium/store.js';
import { CILIUM_API_VERSION, CILIUM_GROUP, CILIUM_NODES, CILIUM_VERSION, type CiliumNode } from './cilium/types.js';

/** Node's timers take at most 2^31-1 ms; a longer delay would fire at once, over and over. */
const MAX_TIMER_MS = 2_147_483_647;
const timerMs = (ms: number) => Math.min(ms, MAX_TIMER_MS);
/** While the cloud answers, a fleet-wide read at least this often, so a cloud that breaks shows within a minute. */
const PROBE_MS = 30_000;
/** After pools change, classes publish the room their vSwitches have left this much later, at most this often. */
const CLASS_REFRESH_MS = 5_000;

/** The work queue's keys: a pool (named after its node), a class, or a node to place, as `kind/name`. */
export type QueueKey = `pool/${string}` | `class/${string}` | `node/${string}` | `cilium/${string}`;
type KeyKind = 'pool' | 'class' | 'node' | 'cilium';
export const poolKey = (name: string): QueueKey => `pool/${name}`;
/** `--pool-api ciliumnode`: the node's CiliumNode, published from its pool. */
export const ciliumKey = (name: string): QueueKey => `cilium/${name}`;
export const classKey = (name: string): QueueKey => `class/${name}`;
export const nodeKey = (name: string): QueueKey => `node/${name}`;
export function parseKey(key: string): { kind: KeyKind; name: string } {
  const slash = key.indexOf('/');
  const kind = key.slice(0, slash);
  if (kind !== 'pool' && kind !== 'class' && kind !== 'node' && kind !== 'cilium')
    throw new Error(`not a work queue key: "${key}"`);
  return { kind, name: key.slice(slash + 1) };
}

export interface LeaderElectionConfig {
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
}

export interface OperatorOptions {
  kc: KubeConfig;
  api: EcsApi;
  config: OperatorConfig;
  logger: Logger;
  registry?: Registry;
  /** Absent: this instance leads at once (one replica, or tests). */
  leaderElection?: LeaderElectionConfig;
  /** Where the cloud credentials come from, for the fix a Degraded condition names (never their values). */
  credentialsSource?: string;
  /** The system's clock unless a test gives another. */
  clock?: Clock;
}

/**
 * The operator: informers keep warm caches on every replica; the leader resyncs the cloud
 * state, then runs workers over one keyed queue (`pool/<node>`, `class/<name>`) and the
 * periodic resync and garbage collection.
 */
export class Operator {
  readonly metrics: OperatorMetrics;
  readonly registry: Registry;
  readonly cloud: CloudState;
  readonly health: CloudHealth;
  readonly queue: WorkQueue;
  private readonly poller: StatePoller;
  private readonly clock: Clock;
  private readonly pools: Informer<ENIPool>;
  private readonly classes: Informer<ENIPoolClass>;
  private readonly nodes: Informer<V1Node>;
  private readonly pendingPods: Informer<V1Pod>;
  /** `--pool-api ciliumnode` only. */
  private readonly ciliumNodes?: Informer<CiliumNode>;
  private readonly ciliumReconciler?: CiliumReconciler;
  /** Nodes whose cilium-agent waits on the operator (see noteAgentWaits): their cilium key goes first. */
  private readonly agentWaits = new Set<string>();
  private readonly poolReconciler: PoolReconciler;
  private readonly enis: EniLifecycle;
  private readonly classReconciler: ClassReconciler;
  private readonly placement: NodePlacement;
  private elector?: LeaderElector;
  private workers?: Promise<void>;
  private timers: NodeJS.Timeout[] = [];
  private resyncTimer?: NodeJS.Timeout;
  private probeTimer?: NodeJS.Timeout;
  private campaignTimer?: NodeJS.Timeout;
  private cancelClassRefresh?: Cancel;
  /** Cancels the check, `deferMs` after it began leading, that a leader which never read the cloud steps aside. */
  private cancelStepAside?: Cancel;
  /** When this replica last read the cloud fleet-wide (a full resync or a probe), whatever the answer. */
  private lastFleetRead = 0;
  /** When it began leading. */
  private ledSince = 0;
  /** How long a replica that cannot read the cloud waits before it campaigns, or leads before it steps aside. */
  private deferMs = 0;
  private leading = false;
  private stopping = false;
  /** Resolves when leadership is lost (the process should exit). */
  readonly lostLeadership: Promise<void>;
  private onLost!: () => void;

  constructor(private readonly options: OperatorOptions) {
    const { kc, api, config, logger } = options;
    this.lostLeadership = new Promise((r) => (this.onLost = r));
    this.registry = options.registry ?? new Registry();
    this.metrics = new OperatorMetrics(this.registry);
    // Classes first (their verdicts place nodes); then a pool just made, before the nodes still
    // to be placed (its first cloud calls go out at once: when many nodes join, a queue of
    // placements would hold back the creations that take longest); then nodes (they create
    // pools); then pools with the largest deficit.
    const clock = options.clock ?? systemClock;
    this.clock = clock;
    const now = () => clock.now();
    this.queue = new WorkQueue({
      observer: {
        depth: (n) => this.metrics.queueDepth.set(n),
        waited: (ms) => this.metrics.queueWait.observe(ms / 1000),
      },
      priority: (key) => {
        const k = parseKey(key);
        if (k.kind === 'class') return Number.MAX_SAFE_INTEGER;
        if (k.kind === 'pool' && this.pools.get(k.name)?.status === undefined) return Number.MAX_SAFE_INTEGER - 1;
        if (k.kind === 'node') return Number.MAX_SAFE_INTEGER - 2;
        // What a cilium-agent waits for (addresses to use, its pods counted) costs no cloud call: next.
        if (k.kind === 'cilium' && this.agentWaits.has(k.name)) return Number.MAX_SAFE_INTEGER - 3;
        return this.poolDeficit(k.name);
      },
      clock,
    });
    this.cloud = new CloudState(api, config.vpcId, config.clusterId, logger, undefined, now);
    this.health = new CloudHealth(this.registry, options.credentialsSource ?? 'the configured credentials', now);
    this.poller = new StatePoller({
      api,
      logger,
      clock,
      minIntervalMs: config.pollMinIntervalMs,
      maxIntervalMs: config.pollMaxIntervalMs,
    });
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const cilium = config.poolApi === 'ciliumnode';
    const enqueuePool = (name: string, afterMs?: number) =>
      afterMs ? this.queue.addAfter(poolKey(name), afterMs) : this.queue.add(poolKey(name));
    const enqueueNodes = () => this.nodes.list().forEach((n) => this.queue.add(nodeKey(n.metadata!.name!)));
    const poolsByInstance = new IndexBy<ENIPool>((p) => p.spec.instanceID);
    const pendingByNode = new IndexBy<V1Pod>((p) => p.spec?.nodeName);
    this.pools = new Informer<ENIPool>({
      clock,
      kc,
      path: `/apis/${GROUP}/${VERSION}/enipools`,
      list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools' }),
      logger,
      onChange: (type, p) => {
        poolsByInstance.onChange(type, p);
        enqueuePool(p.metadata.name);
        if (cilium) {
          this.noteAgentWaits(p.metadata.name);
          this.queue.add(ciliumKey(p.metadata.name));
        }
        // A pool deleted while its node stays is made again at once.
        if (type === 'delete') this.queue.add(nodeKey(p.metadata.name));
      },
    });
    // A class that comes, goes or changes is judged again; its verdict places the nodes.
    this.classes = new Informer<ENIPoolClass>({
      clock,
      kc,
      path: `/apis/${GROUP}/${VERSION}/enipoolclasses`,
      list: () => custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipoolclasses' }),
      logger,
      onChange: (_, c) => {
        this.queue.add(classKey(c.metadata.name));
        // Another class may win the nodes this one selected (a priority or selector changed).
        this.classes.list().forEach((other) => this.queue.add(classKey(other.metadata.name)));
      },
    });
    this.nodes = new Informer<V1Node>({
      clock,
      kc,
      path: '/api/v1/nodes',
      list: () => core.listNode(),
      logger,
      onChange: (_, n) => {
        this.queue.add(nodeKey(n.metadata!.name!));
        enqueuePool(n.metadata!.name!);
      },
    });
    // Only pods waiting for an IP matter (the surge): Pending ones.
    this.pendingPods = new Informer<V1Pod>({
      clock,
      kc,
      path: '/api/v1/pods',
      list: () => core.listPodForAllNamespaces({ fieldSelector: 'status.phase=Pending' }),
      fieldSelector: 'status.phase=Pending',
      logger,
      onChange: (type, p) => {
        pendingByNode.onChange(type, p);
        if (p.spec?.nodeName) enqueuePool(p.spec.nodeName);
      },
    });
    // The agent writes its CiliumNode often (each LocalNode change, its used addresses): each
    // write is published onto (an address it used may end a handshake). The node is placed
    // again only when what it says of the pool's spec changed: most writes (its used
    // addresses, the operator's own) do not, and node keys go before every pool's.
    const specSaid = new Map<string, string>();
    if (cilium)
      this.ciliumNodes = new Informer<CiliumNode>({
        clock,
        kc,
        path: `/apis/${CILIUM_GROUP}/${CILIUM_VERSION}/ciliumnodes`,
        list: () => custom.listClusterCustomObject(CILIUM_NODES),
        logger,
        onChange: (type, n) => {
          const name = n.metadata.name;
          this.noteAgentWaits(name);
          this.queue.add(ciliumKey(name));
          const said = type === 'delete' ? '' : JSON.stringify(ciliumSpecFields(n));
          if (specSaid.get(name) === said) return;
          if (type === 'delete') specSaid.delete(name);
          else specSaid.set(name, said);
          this.queue.add(nodeKey(name));
        },
      });
    const events = new EventRecorder(kc, 'eni-ipam-operator', logger, { clock });
    // The pool side: one memory per node, shared by the reconciler and the background ENI work;
    // the ENI work in flight is the lifecycle's ledger, which the reconciler reads through it.
    const memory = new NodeMemories();
    // Events about a node's pool go where its users look: the CiliumNode, in that mode.
    const onCiliumNode = (name: string) => {
      const n = this.ciliumNodes?.get(name);
      return n && { apiVersion: CILIUM_API_VERSION, kind: 'CiliumNode', name, uid: n.metadata.uid };
    };
    const pool = {
      events: poolEvents(events, onCiliumNode),
      health: this.health,
      memory,
      logger,
      now,
      enqueue: enqueuePool,
    };
    const failures = new CloudFailures({ ...pool, cloud: this.cloud });
    this.enis = new EniLifecycle({
      ...pool,
      clock,
      api,
      cloud: this.cloud,
      poller: this.poller,
      metrics: this.metrics,
      config,
      failures,
      ledger: new EniLedger(),
    });
    this.poolReconciler = new PoolReconciler({
      ...pool,
      cache: {
        pool: (name) => this.pools.get(name),
        pools: () => this.pools.list(),
        node: (name) => this.nodes.get(name),
        pendingPodsOn: (node) => pendingByNode.get(node),
        poolsNaming: (instanceId) => poolsByInstance.get(instanceId),
      },
      store: new KubePoolStore(kc),
      cloud: this.cloud,
      ecs: api,
      enis: this.enis,
      failures,
      metrics: this.metrics,
      config,
      mayWrite: () => this.mayMutate(),
      stamps: new RequestStamps(),
    });
    const poolStore = new KubePoolStore(kc);
    if (cilium)
      this.ciliumReconciler = new CiliumReconciler({
        cache: { pool: (name) => this.pools.get(name), ciliumNode: (name) => this.ciliumNodes?.get(name) },
        store: new KubeCiliumNodeStore(kc),
        patchPoolStatus: (name, patch) => poolStore.patchStatus(name, undefined, patch),
        cloud: this.cloud,
        mayWrite: () => this.mayMutate(),
        cloudSynced: () => this.health.resynced,
        warn: (n, reason, message) => {
          logger.warn({ node: n.metadata.name, reason }, message);
          if (this.mayMutate())
            void events.record(
              { apiVersion: CILIUM_API_VERSION, kind: 'CiliumNode', name: n.metadata.name, uid: n.metadata.uid },
              'Warning',
              reason,
              message,
            );
        },
        logger,
      });
    this.metrics.fleet = () => this.fleet();
    const placement = {
      cache: {
        classes: () => this.classes.list(),
        class: (name: string) => this.classes.get(name),
        nodes: () => this.nodes.list(),
        node: (name: string) => this.nodes.get(name),
        pool: (name: string) => this.pools.get(name),
        ciliumNode: (name: string) => this.ciliumNodes?.get(name),
      },
      store: new KubePlacementStore(kc),
      events: objectEvents(events),
      logger,
      now,
      mayWrite: () => this.mayMutate(),
    };
    this.classReconciler = new ClassReconciler({
      ...placement,
      cloud: this.cloud,
      health: this.health,
      config,
      enqueueNodes,
    });
    this.placement = new NodePlacement({
      ...placement,
      instances: api,
      verdict: (name) => this.classReconciler.verdict(name),
      config,
      enqueueClass: (name) => this.queue.add(classKey(name)),
      registry: this.registry,
    });
  }

  /** What a pool lacks, from its last published status (a new pool: its preAllocate). */
  /**
   * `--pool-api ciliumnode`: notes whether the node's agent waits on its cilium key, as either
   * object changes (the queue asks of every key at every turn: a lookup): addresses the pool
   * got that its CiliumNode does not offer yet (none asked back, none released), or the agent's
   * used addresses not yet in the pool, which the planner sizes by.
   */
  private noteAgentWaits(name: string): void {
    const node = this.ciliumNodes?.get(name);
    const pool = this.pools.get(name);
    const offered = node?.spec.ipam?.pool ?? {};
    const states = node?.status?.ipam?.['release-ips'] ?? {};
    const requested = pool?.status?.releaseRequests ?? {};
    const unoffered =
      !!pool &&
      !unservableByCilium(pool.spec) &&
      [...publishedAddresses(pool).keys()].some((ip) => !(ip in offered) && !(ip in requested) && !states[ip]);
    const used = Object.keys(node?.status?.ipam?.used ?? {});
    const usedStale =
      !!pool &&
      (used.length !== Object.keys(pool.status?.used ?? {}).length || used.some((ip) => !pool.status?.used?.[ip]));
    if (unoffered || usedStale) this.agentWaits.add(name);
    else this.agentWaits.delete(name);
  }

  private poolDeficit(name: string): number {
    const p = this.pools?.get(name);
    if (!p) return 0;
    return p.status?.summary?.needed ?? Math.max(p.spec.preAllocate ?? 8, p.spec.minAllocate ?? 0);
  }

  private fleet(): FleetView {
    return fleetView({
      pools: this.pools.list(),
      ownedEnis: this.cloud.owned(),
      // A standby's vSwitch list is what it knew when it last led: stale, and its forecast would
      // count down from there (alerts take the least across replicas). Only the leader says.
      vSwitches: this.leading ? this.cloud.knownVSwitches : [],
      freeHistoryOf: (id) => this.cloud.freeHistoryOf(id),
      now: this.clock.now(),
    });
  }

  get synced(): boolean {
    return Object.values(this.informers).every((i) => i.synced);
  }

  /**
   * Ready to serve: every cache listed and the cloud answered a fleet-wide read (the leader: a full
   * resync; a follower: its probe). A replica with wrong credentials never becomes ready, so a
   * rollout (`helm upgrade --wait`) stops instead of replacing working replicas.
   */
  get ready(): boolean {
    return this.synced && this.health.verified;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /**
   * Whether a mutating cloud call may be sent now: this instance leads and, with leader
   * election, its last renew is fresh enough that no other replica can have taken over.
   */
  mayMutate(): boolean {
    if (!this.leading || this.stopping) return false;
    return this.elector ? this.elector.holdsFreshLease() : true;
  }

  private get informers() {
    return {
      enipools: this.pools,
      enipoolclasses: this.classes,
      nodes: this.nodes,
      pods: this.pendingPods,
      ...(this.ciliumNodes ? { ciliumnodes: this.ciliumNodes } : {}),
    };
  }

  /**
   * Starts the caches, waits until every one has listed successfully (an empty cache left by a
   * failed LIST is no picture of the cluster), then campaigns for leadership.
   */
  async start(): Promise<void> {
    await Promise.all(Object.values(this.informers).map((i) => i.start()));
    const waiting = setInterval(() => {
      const unsynced = Object.entries(this.informers)
        .filter(([, i]) => !i.synced)
        .map(([k]) => k);
      this.options.logger.warn({ unsynced }, 'waiting for caches to list before leading or reporting ready');
    }, 10_000);
    waiting.unref();
    try {
      await Promise.all(Object.values(this.informers).map((i) => i.untilSynced()));
    } finally {
      clearInterval(waiting);
    }
    if (this.stopping) return;
    const le = this.options.leaderElection;
    if (!le) return this.lead();
    void this.probeAndReschedule();
    this.elector = new LeaderElector({
      kc: this.options.kc,
      ...le,
      logger: this.options.logger,
      onStartedLeading: () => void this.lead(),
      onStoppedLeading: () => {
        const lost = this.leading && !this.stopping;
        this.leading = false;
        this.cancelStepAside?.();
        this.metrics.leader.set(0);
        if (lost) {
          // Another replica may lead now: drop the queued work and stop background changes at
          // once (mutating calls already check the lease before they are sent), then exit.
          this.options.logger.error({ identity: le.identity }, 'leadership lost; dropping queued work and stopping');
          this.timers.forEach(clearInterval);
          clearTimeout(this.resyncTimer);
          this.enis.stop();
          void this.queue.shutdown();
          void this.elector?.stop({ release: false }); // no campaign during the last seconds
          this.onLost();
        }
      },
    });
    this.deferMs = le.leaseDurationSeconds * 2000;
    this.campaignOnceVerified(this.deferMs);
  }

  /**
   * A replica campaigns once its cloud reads work, so that one with wrong credentials (a rollout
   * of a broken Secret) never takes the Lease from one that can serve. Should none of them read
   * the cloud, each campaigns after `deferMs` anyway: the one that leads then says why in every
   * pool's Degraded condition.
   */
  private campaignOnceVerified(deferMs: number): void {
    const started = this.clock.now();
    const check = () => {
      if (this.stopping) return;
      const deferred = this.clock.now() - started >= deferMs;
      if (!this.health.verified && !deferred) {
        this.campaignTimer = setTimeout(check, 250);
        this.campaignTimer.unref();
        return;
      }
      if (!this.health.verified)
        this.options.logger.warn(
          { waitedMs: this.clock.now() - started },
          'campaigning for leadership although the cloud cannot be read (no replica seems able to)',
        );
      this.elector?.start();
    };
    check();
  }

  /**
   * A new leader works at once, but plans nothing before a full resync of the cloud has
   * succeeded: until then its reconciles only say why the cloud cannot be read.
   */
  private async lead(): Promise<void> {
    if (this.stopping) return;
    this.leading = true;
    this.ledSince = this.clock.now();
    this.metrics.leader.set(1);
    // On time, whatever its resync back-off (grown while it followed): a replica that can read the
    // cloud may stand by.
    if (this.elector)
      this.cancelStepAside = this.clock.after(this.deferMs, () => this.stepAsideIfBlind('step-aside check'));
    this.workers = runWorkers(
      this.queue,
      this.options.config.workers,
      (key) => this.reconcile(key),
      (key, err) => {
        this.metrics.reconcileErrors.inc({ kind: parseKey(key).kind });
        this.options.logger.warn({ key, err: apiErrorMessage(err) }, 'reconcile failed');
      },
    );
    await this.resyncAndReschedule();
    if (!this.probeTimer) void this.probeAndReschedule();
    const t = setInterval(
      () =>
        void this.gc().catch((e) => this.options.logger.warn({ err: apiErrorMessage(e) }, 'garbage collection failed')),
      timerMs(this.options.config.gcIntervalMs),
    );
    t.unref();
    this.timers.push(t);
  }

  /** One full resync, then the next: after the resync interval, or sooner (backing off) while they fail. */
  private async resyncAndReschedule(): Promise<void> {
    if (!this.leading || this.stopping) return;
    await this.resync().catch(() => undefined); // said by cloudFailed
    if (!this.leading || this.stopping) return;
    const next = this.health.current ? this.health.retryDelayMs() : this.options.config.resyncIntervalMs;
    clearTimeout(this.resyncTimer);
    this.resyncTimer = setTimeout(() => void this.resyncAndReschedule(), timerMs(next));
    this.resyncTimer.unref();
  }

  /**
   * Every replica reads the cloud at least every PROBE_MS (one small page), so that a cloud that
   * breaks while nothing else calls it shows within a minute (readiness, `eni_ipam_cloud_up`,
   * Degraded). A follower is not ready before its first probe succeeds. A leader probes only while
   * its reads work and its full resyncs are not recent: while they fail, its resyncs retry.
   */
  private async probeAndReschedule(): Promise<void> {
    if (this.stopping) return;
    const due = this.clock.now() - this.lastFleetRead >= PROBE_MS;
    const mine = !this.leading || (this.health.resynced && !this.health.current);
    if (due && mine) {
      this.lastFleetRead = this.clock.now();
      try {
        await this.options.api.describeNetworkInterfacesPage({ vpcId: this.options.config.vpcId }, { maxResults: 10 });
        if (this.health.succeeded({ resync: false })) {
          this.options.logger.info({ credentials: this.options.credentialsSource }, 'cloud reads work');
          if (this.leading) this.enqueueAll();
        }
      } catch (e) {
        this.cloudFailed(e, 'cloud probe');
      }
    }
    if (this.stopping) return;
    const next = this.health.current && !this.leading ? this.health.retryDelayMs() : PROBE_MS;
    this.probeTimer = setTimeout(() => void this.probeAndReschedule(), next);
    this.probeTimer.unref();
  }

  /** A fleet-wide read failed: said once per cause (a log line, and every pool and class in Degraded), then retried. */
  private cloudFailed(e: unknown, what: string): void {
    if (isShutdown(e)) return;
    const before = this.health.current;
    const outage = this.health.failed(e);
    const fields = {
      reason: outage.reason,
      code: outage.code,
      failures: outage.failures,
      retryInMs: this.health.retryDelayMs(),
    };
    if (before?.message === outage.message) this.options.logger.warn(fields, `${what} failed again: ${outage.message}`);
    else {
      this.options.logger.error(fields, `${what} failed: ${outage.message}`);
      if (this.leading) this.enqueueAll();
    }
    this.stepAsideIfBlind(outage.reason);
  }

  /**
   * A leader that has never read the cloud hands the Lease on once it has led `deferMs`: a replica
   * that can may stand by (the deferral keeps this one from taking the Lease back at once).
   */
  private stepAsideIfBlind(reason: string): void {
    if (!this.leading || !this.elector || this.health.verified || this.clock.now() - this.ledSince < this.deferMs)
      return;
    this.options.logger.warn(
      { reason, ledMs: this.clock.now() - this.ledSince },
      'stepping down: this replica has not read the cloud since it began leading; a replica that can may lead',
    );
    void this.elector.stop({ release: true });
  }

  /** A full resync of the cloud state, then every pool and class again (what the periodic resync does). */
  async resync(): Promise<void> {
    await this.fullResync();
    this.enqueueAll();
  }

  private async fullResync(): Promise<void> {
    const cpu = process.cpuUsage();
    const started = this.clock.now();
    this.lastFleetRead = started;
    let read: { enis: number; pages: number };
    try {
      read = await this.cloud.fullResync();
    } catch (e) {
      this.cloudFailed(e, 'ENI resync');
      throw e;
    }
    const used = process.cpuUsage(cpu);
    this.metrics.resyncs.inc();
    this.metrics.resyncPages.set(read.pages);
    this.metrics.resyncEnis.set(read.enis);
    this.metrics.resyncCpu.set((used.user + used.system) / 1e6);
    this.metrics.resyncDuration.set((this.clock.now() - started) / 1000);
    if (this.health.succeeded({ resync: true })) {
      this.options.logger.info(
        { enis: read.enis, credentials: this.options.credentialsSource },
        'cloud reads work; planning',
      );
      this.enqueueAll();
    }
  }

  /** Deletes leaked ENIs (after a fresh resync); returns their ids. */
  async gc(): Promise<string[]> {
    if (this.options.config.mode !== 'normal') return [];
    await this.fullResync();
    const custom = this.options.kc.makeApiClient(CustomObjectsApi);
    const poolExists = async (name: string) =>
      Boolean(name) &&
      (await ignoreNotFound(
        custom.getClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools', name }),
      )) !== undefined;
    return collectLeakedEnis({
      api: this.options.api,
      cloud: this.cloud,
      pools: this.pools,
      poolExists,
      poller: this.poller,
      metrics: this.metrics,
      logger: this.options.logger,
      minAgeMs: this.options.config.gcMinAgeMs,
      now: this.clock.now(),
    });
  }

  private enqueueAll(): void {
    this.classes.list().forEach((c) => this.queue.add(classKey(c.metadata.name)));
    this.nodes.list().forEach((n) => this.queue.add(nodeKey(n.metadata!.name!)));
    this.pools.list().forEach((p) => this.queue.add(poolKey(p.metadata.name)));
    this.ciliumNodes?.list().forEach((n) => this.queue.add(ciliumKey(n.metadata.name)));
  }

  private async reconcile(key: string): Promise<ReconcileOutcome> {
    const { kind, name } = parseKey(key);
    const end = this.metrics.reconcileDuration.startTimer({ kind });
    try {
      if (kind === 'class') return await this.classReconciler.reconcile(name);
      if (kind === 'node') return await this.placement.reconcile(name);
      if (kind === 'cilium') return (await this.ciliumReconciler?.reconcile(name)) ?? {};
      const outcome = await this.poolReconciler.reconcile(name);
      this.refreshClassesSoon();
      return outcome;
    } finally {
      end();
    }
  }

  /**
   * Pools take and give back vSwitch addresses: the classes publish the room left (status.vSwitches,
   * what `kubectl eni-ipam status` and `plan` read), judged again a few seconds after pools change,
   * at most that often (the reads are cached: no cloud call, and a class that did not change writes
   * nothing).
   */
  private refreshClassesSoon(): void {
    if (this.cancelClassRefresh || this.stopping) return;
    this.cancelClassRefresh = this.clock.after(CLASS_REFRESH_MS, () => {
      this.cancelClassRefresh = undefined;
      if (this.leading) this.classes.list().forEach((c) => this.queue.add(classKey(c.metadata.name)));
    });
  }

  /** Drains the work in progress, stops polling, gives up the lease, stops the informers. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.timers.forEach(clearInterval);
    clearTimeout(this.resyncTimer);
    clearTimeout(this.probeTimer);
    clearTimeout(this.campaignTimer);
    this.cancelClassRefresh?.();
    this.cancelStepAside?.();
    this.enis.stop();
    await this.queue.shutdown();
    await this.workers;
    this.poller.stop();
    // A call already sent may still land: the lease is handed over only once none is out, or
    // left to expire, so that the next leader never plans on a cloud about to change under it.
    const deadline = this.clock.now() + 10_000;
    while (this.options.api.mutationsInFlight > 0 && this.clock.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    await this.elector?.stop({ release: this.options.api.mutationsInFlight === 0 });
    this.leading = false;
    await Promise.all(Object.values(this.informers).map((i) => i.stop()));
  }
}
