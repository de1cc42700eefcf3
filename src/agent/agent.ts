import { sameJson } from '../kube/same-json.js';
import { systemClock, type Cancel, type Clock } from '../clock.js';
import {
  CoreV1Api,
  CustomObjectsApi,
  Observable,
  PatchStrategy,
  setHeaderOptions,
  type ConfigurationOptions,
  type KubeConfig,
  type ObservableMiddleware,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { GROUP, VERSION, type ENIPool } from '../api/types.js';
import { EventRecorder } from '../kube/events.js';
import { Informer } from '../kube/informer.js';
import type { Logger } from '../observability/logger.js';
import {
  agentStatus,
  allocationKey,
  allocate,
  departedRecoveries,
  emptyPoolReason,
  freeAddresses,
  holdsNoAddress,
  podInterfaces,
  recoverAllocations,
  release,
  strayAllocations,
  type AgentState,
  type Lease,
  type NodePod,
} from './allocator.js';
import { DatapathMetrics } from './datapath/metrics.js';
import type { KernelPort } from './datapath/kernel.js';
import type { DatapathConfig, PodAddress, PoolEni } from './datapath/model.js';
import { ExclusiveDatapath, exclusiveUnavailable } from './datapath/exclusive.js';
import { DatapathError, NodeRouting } from './datapath/node-routing.js';
import { exclusiveMode } from '../ipam/exclusive.js';
import { type ConflistByMode } from './conflist.js';
import { AgentMetrics } from './metrics.js';
import { DEFAULT_POD_EVENT_POLICY, PodEvents, type PodEventPolicy, type PodRef } from './pod-events.js';
import { StateFile, type JournalOps } from './state-file.js';
import { DEFAULT_STATUS_BACKOFF } from './status-outage.js';
import { StatusWriter, type PlannedStatus } from './status-writer.js';

export interface AgentOptions {
  kc: KubeConfig;
  node: string;
  stateDir: string;
  cooldownMs: number;
  /** Status writes are coalesced: at most one per this interval. */
  statusIntervalMs: number;
  /** Refused status writes are retried with jittered back-off up to this (default 30 s). */
  statusBackoffMaxMs?: number;
  /** Unsent this long, the status is stale: a Warning Event and the StatusReported condition (default 30 s). */
  statusStaleAfterMs?: number;
  /** A status write the server has not answered by then is given up and retried (default 10 s). */
  statusWriteTimeoutMs?: number;
  /** Jitter source, uniform in [0, 1) (tests pass a fixed one). */
  random?: () => number;
  /** The state journal's file operations (tests pass failing ones). */
  journalOps?: Partial<JournalOps>;
  logger: Logger;
  registry: Registry;
  /** The node's datapath (ENI devices, per-ENI tables, per-pod rules); none when absent (tests, --node-routing=false). */
  datapath?: DatapathOptions;
  /** The system's clock unless a test gives another. */
  clock?: Clock;
  /** How often a waiting pod's Event is written again (DEFAULT_POD_EVENT_POLICY unless given). */
  podEvents?: PodEventPolicy;
  /** The node's CNI configuration, kept to the pool's eniMode (none: the agent leaves it alone). */
  cniConf?: ConflistByMode;
}

export interface DatapathOptions {
  config: DatapathConfig;
  kernel: KernelPort;
  /** How long an ADD waits for its ENI's device (default 5 s: below the plugin's 10 s timeout). */
  deviceTimeoutMs?: number;
  /** A full reconcile at least this often (default 60 s). */
  resyncMs?: number;
  /** The node's network namespace as a path, where exclusive ENI devices return (default: the agent's own). */
  nodeNetns?: string;
  /** Why exclusive ENIs cannot be moved into pods here (default: exclusiveUnavailable(), the agent's capabilities). */
  exclusiveUnavailable?: string;
}

/** The extended resource a pod requests to get a whole ENI (eniMode Exclusive). */
export const ENI_RESOURCE = 'eniipam.io/eni';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** A merge patch given up after `ms`: a black-holed path to the API server must not hold every later write. */
function mergeWithin(ms: number): ConfigurationOptions {
  // The object API runs its middleware as client-node's Observables.
  const deadline: ObservableMiddleware = {
    pre: (ctx: RequestContext) => {
      ctx.setSignal(AbortSignal.timeout(ms));
      return new Observable(Promise.resolve(ctx));
    },
    post: (r: ResponseContext) => new Observable(Promise.resolve(r)),
  };
  return { ...merge, middleware: [...(merge.middleware ?? []), deadline] };
}

/** A pod interface's ADD: the pod (and its UID) it is for, and the network of the call. */
export interface AddRequest extends PodRef {
  containerId: string;
  ifName: string;
  network?: string;
  /** The pod's network namespace (CNI_NETNS), where an exclusive ENI's device goes. */
  netns?: string;
  /** The runtime's bandwidth capability (bits per second and bits), for an exclusive ENI's device. */
  bandwidth?: { ingressRate?: number; ingressBurst?: number; egressRate?: number; egressBurst?: number };
}

/** The answer to an ADD whose address a DEL released while it waited for the datapath. */
function released(lease: Lease): DatapathError {
  return new DatapathError(
    lease.eniId,
    'released',
    `${lease.ip} (ENI ${lease.eniId}) was released by a DEL of the pod while its ADD waited`,
    true,
  );
}

/**
 * The node agent: watches its own ENIPool, hands its IPs to pods (persisting every change
 * before answering), writes `status.used` and `status.releaseAcks` (its fields only, merge
 * patches, coalesced), and answers release requests.
 */
export class Agent {
  private state: AgentState;
  private readonly file: StateFile;
  private readonly pool: Informer<ENIPool>;
  private readonly custom: CustomObjectsApi;
  private readonly status: StatusWriter;
  private queued?: { done: Promise<void>; resolve: () => void; reject: (e: Error) => void };
  private flushing?: Promise<void>;
  private covering?: Promise<void>;
  /** The last save failed: what it carried is on disk only once a later save succeeds. */
  private unsaved = false;
  private cancelCooling?: Cancel;
  private cancelAdvertise?: Cancel;
  /** The exclusive ADD or DEL under way per container (see serially). */
  private readonly inProgress = new Map<string, Promise<void>>();
  /** What the Node's status says of eniipam.io/eni, as last written (null: nothing); undefined before the first write. */
  private advertised?: string | null;
  private lastWritten = '';
  private readonly flagged = new Set<string>();
  private readonly core: CoreV1Api;
  private recovering = true;
  private cancelDepartures?: Cancel;
  private cancelRecoveryRetry?: Cancel;
  private readonly clock: Clock;
  private stopped = false;
  readonly metrics: AgentMetrics;
  private readonly events: EventRecorder;
  private readonly podEvents: PodEvents;
  /** The node's datapath, when the agent sets it up. */
  readonly routing?: NodeRouting;
  /** Moves exclusive ENIs' devices into pods and back (with the node's datapath). */
  private readonly exclusive?: ExclusiveDatapath;
  /** Why this agent cannot give a pod a whole ENI (its capabilities, its flags), if it cannot. */
  private readonly cannotPlug?: string;
  private toldCannotPlug = false;
  /** Whether the node's CNI configuration is its pool's mode's (true when the agent does not keep it). */
  private conflistFollows = true;

  constructor(private readonly options: AgentOptions) {
    this.clock = options.clock ?? systemClock;
    this.file = StateFile.in(options.stateDir, options.journalOps);
    this.state = this.file.load();
    this.custom = options.kc.makeApiClient(CustomObjectsApi);
    this.core = options.kc.makeApiClient(CoreV1Api);
    this.pool = new Informer<ENIPool>({
      kc: options.kc,
      path: `/apis/${GROUP}/${VERSION}/enipools`,
      list: () =>
        this.custom.listClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: 'enipools',
          fieldSelector: `metadata.name=${options.node}`,
        }),
      fieldSelector: `metadata.name=${options.node}`,
      logger: options.logger,
      onChange: () => this.onPoolChange(),
      clock: this.clock,
    });
    // Each of its Events says one episode (a recovery, a stray address, a status outage): none repeats.
    this.events = new EventRecorder(options.kc, 'eni-ipam-agent', options.logger, {
      fold: false,
      clock: this.clock,
    });
    this.podEvents = new PodEvents(options.kc, {
      node: options.node,
      clock: this.clock,
      logger: options.logger,
      policy: options.podEvents ?? DEFAULT_POD_EVENT_POLICY,
    });
    this.metrics = new AgentMetrics(options.registry, {
      free: () => this.free().length,
      inUse: () => Object.keys(this.state.allocations).length,
      cooling: () => Object.values(this.state.cooling).filter((t) => t > this.clock.now()).length,
      stray: () => (this.current() ? strayAllocations(this.state, this.current()).length : 0),
      statusUnsentSeconds: () => this.status.unsentMs() / 1000,
    });
    if (options.datapath)
      this.routing = new NodeRouting({
        node: options.node,
        config: options.datapath.config,
        kernel: options.datapath.kernel,
        clock: this.clock,
        deviceTimeoutMs: options.datapath.deviceTimeoutMs ?? 5000,
        resyncMs: options.datapath.resyncMs ?? 60_000,
        logger: options.logger,
        metrics: new DatapathMetrics(options.registry),
        poolEnis: () => this.routedEnis(),
        addresses: () => this.routedAddresses(),
      });
    if (options.datapath) {
      this.exclusive = new ExclusiveDatapath({ nodeNetns: options.datapath.nodeNetns });
      this.cannotPlug =
        'exclusiveUnavailable' in options.datapath ? options.datapath.exclusiveUnavailable : exclusiveUnavailable();
    } else
      this.cannotPlug =
        '--node-routing=false: the agent runs without its node datapath and cannot move an ENI into a pod';
    this.status = new StatusWriter({
      node: options.node,
      clock: this.clock,
      policy: {
        ...DEFAULT_STATUS_BACKOFF,
        baseMs: options.statusIntervalMs,
        ...(options.statusBackoffMaxMs === undefined
          ? {}
          : { maxMs: Math.max(options.statusBackoffMaxMs, options.statusIntervalMs) }),
        ...(options.statusStaleAfterMs === undefined ? {} : { staleAfterMs: options.statusStaleAfterMs }),
      },
      random: options.random ?? Math.random,
      logger: options.logger,
      metrics: this.metrics,
      plan: () => this.planStatus(),
      serverConditions: () => this.current()?.status?.agentConditions,
      patch: (status) =>
        this.custom
          .patchClusterCustomObjectStatus(
            { group: GROUP, version: VERSION, plural: 'enipools', name: options.node, body: { status } },
            mergeWithin(options.statusWriteTimeoutMs ?? 10_000),
          )
          .catch((e: unknown) => {
            if ((e as Error).name === 'AbortError')
              throw new Error(
                `the API server did not answer the status write within ${options.statusWriteTimeoutMs ?? 10_000} ms`,
              );
            throw e;
          }),
      event: (type, reason, message) => {
        const pool = this.current();
        if (pool) void this.events.record(this.target(pool), type, reason, message);
      },
    });
  }

  private target(pool: ENIPool) {
    return { apiVersion: pool.apiVersion, kind: 'ENIPool', name: pool.metadata.name, uid: pool.metadata.uid };
  }

  get ready(): boolean {
    return this.pool.synced && !this.recovering && this.current() !== undefined;
  }

  private current(): ENIPool | undefined {
    return this.pool.get(this.options.node);
  }

  private free(): string[] {
    return freeAddresses(this.state, this.current(), this.clock.now(), this.routing?.heldByNode());
  }

  /** The pool's InUse ENIs for the datapath; undefined until the pool has been listed (absence is no proof). */
  private routedEnis(): PoolEni[] | undefined {
    const pool = this.current();
    if (!this.pool.synced || !pool) return undefined;
    // An exclusive ENI is its pod's device: the node routes none of them (an Exclusive pool's ENIs
    // without secondaries, and any ENI a pod holds whole, left from a switch of the class); ENIs
    // holding secondary addresses keep their Shared pods' routes.
    const exclusive = exclusiveMode(pool.spec);
    const whole = new Set(Object.values(this.state.allocations).flatMap((a) => (a.exclusive ? [a.eniId] : [])));
    return (pool.status?.enis ?? [])
      .filter((e) => e.state === 'InUse' && !whole.has(e.id) && !(exclusive && holdsNoAddress(e)))
      .map((e) => ({
        id: e.id,
        mac: e.mac ?? '',
        deviceIndex: e.deviceIndex,
        gatewayIP: e.gatewayIP ?? '',
        vSwitchCIDR: e.vSwitchCIDR ?? '',
        ...(e.primaryIP ? { primaryIP: e.primaryIP } : {}),
        ...(e.gatewayIPv6 ? { gatewayIPv6: e.gatewayIPv6 } : {}),
      }));
  }

  private routedAddresses(): PodAddress[] {
    return Object.values(this.state.allocations)
      .filter((a) => a.eniId && !a.exclusive)
      .map((a) => ({ ip: a.ip, eniId: a.eniId }));
  }

  /**
   * Watches the pool; once it has listed, takes in what the state file lacks (see recover), then
   * serves allocations and writes the status. Releases are served at once.
   */
  async start(): Promise<void> {
    await this.pool.start();
    void this.pool.untilSynced().then(() => this.recover());
  }

  /** The pods the API server places on this node, or undefined when it cannot say. */
  private async nodePods(): Promise<NodePod[] | undefined> {
    try {
      const list = await this.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${this.options.node}` });
      return list.items.map((p) => {
        const podIPs = (p.status?.podIPs ?? []).map((x) => x.ip).filter((ip): ip is string => !!ip);
        if (p.status?.podIP && !podIPs.includes(p.status.podIP)) podIPs.push(p.status.podIP);
        return {
          pod: `${p.metadata?.namespace}/${p.metadata?.name}`,
          podIP: p.status?.podIP,
          hostNetwork: p.spec?.hostNetwork ?? false,
          interfaces: podInterfaces(podIPs, p.metadata?.annotations),
        };
      });
    } catch (e) {
      this.options.logger.warn(
        { node: this.options.node, err: (e as Error).message },
        'cannot list the pods of this node; recovered allocations are kept until it can',
      );
      return undefined;
    }
  }

  /**
   * After a restart, an address that the pool's status says is used, or that a pod of this node
   * holds, but that the state file lacks (a wiped disk, another state directory) is kept, never
   * handed out again, and reported; it returns once its pod is gone.
   */
  private async recover(): Promise<void> {
    const pods = await this.nodePods();
    // With nothing on disk, the pods are the only word on addresses handed out after the last
    // status write: wait for them rather than guess.
    if (!pods && Object.keys(this.state.allocations).length === 0 && !this.stopped) {
      this.cancelRecoveryRetry = this.clock.after(5000, () => void this.recover());
      return;
    }
    const r = recoverAllocations(this.state, this.current(), pods, this.clock.now());
    if (r.recovered.length || Object.keys(r.state.cooling).length !== Object.keys(this.state.cooling).length) {
      this.state = r.state;
      this.persist();
      await this.persisted().catch(() => undefined); // a save that failed is logged; memory still holds them
    }
    if (r.recovered.length) {
      this.metrics.recovered.inc(r.recovered.length);
      const ips = r.recovered.map((a) => a.ip);
      this.options.logger.warn(
        { node: this.options.node, ips, pods: r.recovered.map((a) => a.pod) },
        'addresses in use that the state file did not hold were taken back in; they are kept until their pods are gone',
      );
      const pool = this.current();
      if (pool) {
        void this.events.record(
          this.target(pool),
          'Warning',
          'RecoveredAllocations',
          `the agent's state lacked ${ips.length} addresses in use (${ips.join(', ')}); ` +
            'they are kept and not handed out until their pods are gone',
        );
      }
    }
    // The datapath after recovery, before any ADD: every address a running pod holds is known by
    // then, so a restart takes none of their rules away (and adds none twice: it compares first).
    if (this.routing && !this.stopped) {
      await this.routing.reconcile();
      this.routing.start();
    }
    this.recovering = false;
    this.onPoolChange();
    this.watchDepartures();
  }

  /** Every 30 s, recovered addresses whose pods left go back to the pool. */
  private watchDepartures(): void {
    if (this.stopped) return;
    this.cancelDepartures = this.clock.after(30_000, () => {
      void this.releaseDeparted();
      this.watchDepartures();
    });
  }

  /** Recovered addresses whose pods have left the node cool down and return to the pool. */
  private async releaseDeparted(): Promise<void> {
    if (!Object.values(this.state.allocations).some((a) => a.recovered)) return;
    const pods = await this.nodePods();
    if (!pods) return;
    for (const a of departedRecoveries(this.state, pods)) await this.removePod(a.containerId, a.ifName);
  }

  /**
   * eniMode Exclusive: the node's ENIs for pods (the pool's podENIs) as the extended resource
   * eniipam.io/eni in the Node's capacity and allocatable, so that the scheduler places a pod
   * requesting one only where one can be had; none on a Shared node (taken away after a switch).
   * Written when it changes, and again after a failed write.
   */
  private async advertise(): Promise<void> {
    const pool = this.current();
    if (!pool || this.recovering || this.stopped) return;
    const podEnis = pool.status?.summary?.podENIs;
    // Not known yet (the operator has not sized the pool): the Node keeps what it says.
    const offersNone = this.cannotPlug !== undefined || !this.conflistFollows;
    if (exclusiveMode(pool.spec) && podEnis === undefined && !offersNone) return;
    // An agent that cannot move ENIs into pods offers none: such pods wait Pending, not fail.
    const want = exclusiveMode(pool.spec) ? String(offersNone ? 0 : podEnis) : null;
    if (want === this.advertised) return;
    const resource = { [ENI_RESOURCE]: want };
    try {
      await this.core.patchNodeStatus(
        { name: this.options.node, body: { status: { capacity: resource, allocatable: resource } } },
        merge,
      );
      this.advertised = want;
    } catch (e) {
      // A write that fails once stop() has begun is not retried: stop() has cleared the timers.
      if (this.stopped) return;
      this.options.logger.warn(
        { node: this.options.node, err: (e as Error).message, resource: ENI_RESOURCE, value: want },
        'cannot write the node’s exclusive ENIs to its status; trying again in 5 s',
      );
      this.cancelAdvertise?.();
      this.cancelAdvertise = this.clock.after(5000, () => void this.advertise());
    }
  }

  private onPoolChange(): void {
    const mode = this.eniMode();
    // The conflist first: the scheduler sends exclusive pods here only once advertise() says so,
    // and advertise() offers none while the node's configuration is not the Exclusive one.
    if (mode) this.conflistFollows = this.options.cniConf?.follow(mode) ?? true;
    if (mode === 'Exclusive' && this.cannotPlug && !this.toldCannotPlug) {
      this.toldCannotPlug = true;
      this.options.logger.error(
        { node: this.options.node, resource: ENI_RESOURCE, err: this.cannotPlug },
        'the pool is eniMode Exclusive, but this agent cannot give pods ENIs; it offers none',
      );
      void this.events.record(
        this.target(this.current()!),
        'Warning',
        'ExclusiveENIsUnavailable',
        `the pool is eniMode Exclusive, but the agent offers no ${ENI_RESOURCE}: ${this.cannotPlug}`,
      );
    }
    void this.advertise();
    for (const a of strayAllocations(this.state, this.current())) {
      if (this.flagged.has(a.ip) || !this.current()) continue;
      this.flagged.add(a.ip);
      this.options.logger.warn(
        { node: this.options.node, ip: a.ip, pod: a.pod, eni: a.eniId },
        'an allocated IP is no longer in the pool; the allocation is kept until the pod releases it',
      );
      void this.events.record(
        this.target(this.current()!),
        'Warning',
        'StrayAllocation',
        `IP ${a.ip} of pod ${a.pod} (ENI ${a.eniId}) is no longer in the pool; ` +
          'the agent keeps the allocation until the pod releases it',
      );
    }
    if (!this.recovering) void this.routing?.reconcile();
    this.scheduleStatus();
  }

  /** Why an ADD finds no address now, in the pool's words (see emptyPoolReason). */
  whyEmpty(): string {
    return emptyPoolReason(this.current(), { recovering: this.recovering, node: this.options.node });
  }

  /** Gives the pod interface an address (the same one again for a repeated call). */
  allocate(req: { containerId: string; ifName: string; pod: string; network?: string }): Lease | 'pool-empty' {
    // Until what the state file lacks has been taken back in, no address is known to be free.
    if (this.recovering) return 'pool-empty';
    const end = this.metrics.latency.startTimer();
    const r = this.take(req);
    end();
    return r === 'pool-empty' ? r : r.lease;
  }

  private take(
    req: { containerId: string; ifName: string; pod: string; network?: string; netns?: string },
    ready = this.routing?.ready(),
  ) {
    const r = allocate(this.state, this.current(), req, this.clock.now(), this.routing?.heldByNode(), ready);
    if ('error' in r) {
      this.metrics.emptyPool.inc();
      return 'pool-empty' as const;
    }
    if (r.fresh) {
      this.state = r.state;
      this.persist();
      this.scheduleStatus();
    }
    return r;
  }

  /**
   * A pod's ADD: an address (as allocate), and with the node's datapath, its ENI's device, table
   * and the address's rules set before it answers. When they cannot be, a fresh address is
   * released again (nothing half-set) and the DatapathError says which ENI and why.
   */
  async addPod(req: AddRequest): Promise<Lease | 'pool-empty'> {
    let lease: Lease | 'pool-empty';
    try {
      lease = await this.setUpPod(req);
    } catch (e) {
      // A pod whose DEL came while its ADD waited is going: nothing to tell it.
      if (e instanceof DatapathError && e.reason !== 'released')
        this.podEvents.waiting(req, e.transient ? 'WaitingForPodNetwork' : 'PodNetworkFailed', e.message);
      throw e;
    }
    if (lease === 'pool-empty')
      this.podEvents.waiting(
        req,
        'WaitingForPodIP',
        `no free pod IP on node ${this.options.node} yet: ${this.whyEmpty()}; the runtime retries`,
      );
    else this.podEvents.served(req, lease.ip, lease.eniId);
    return lease;
  }

  private async setUpPod(req: AddRequest): Promise<Lease | 'pool-empty'> {
    if (this.recovering) return 'pool-empty';
    const pool = this.current();
    if (pool && exclusiveMode(pool.spec)) return this.serially(req.containerId, () => this.setUpExclusive(req, pool));
    const end = this.metrics.latency.startTimer();
    try {
      const r = this.take(req);
      if (r === 'pool-empty' || !this.routing) return r === 'pool-empty' ? r : r.lease;
      // Still this interface's address: a DEL (the runtime gave up on this ADD) may come while it waits.
      const key = allocationKey(req.containerId, req.ifName);
      const taken = this.state.allocations[key];
      const ours = () => this.state.allocations[key] === taken;
      try {
        await this.routing.ensure({ ip: r.lease.ip, eniId: r.lease.eniId });
        if (r.lease.ipv6) await this.routing.ensure({ ip: r.lease.ipv6.ip, eniId: r.lease.eniId });
        if (!ours()) throw released(r.lease);
      } catch (e) {
        const err = this.podFailed(
          e,
          r.lease,
          req,
          r.fresh
            ? 'the datapath of a pod address could not be set up; the ADD fails and the address is released'
            : 'the datapath of a pod address could not be set up; the ADD fails',
        );
        // Only the address this ADD took goes back: not one a later ADD of the container holds now.
        if (r.fresh && ours()) await this.removePod(req.containerId, req.ifName);
        throw err;
      }
      return r.lease;
    } finally {
      end();
    }
  }

  /**
   * An Exclusive pool's ADD: the pod must ask for the extended resource (the scheduler counted
   * it against the node's ENIs); it takes a whole ENI, one whose device is on the node first,
   * and the device moves into its namespace before the ADD answers. When that fails, a fresh
   * allocation is released again, its device brought back (nothing half-set).
   */
  private async setUpExclusive(req: AddRequest, pool: ENIPool): Promise<Lease | 'pool-empty'> {
    const key = allocationKey(req.containerId, req.ifName);
    const fail = (reason: 'apply-failed', message: string, transient = false) => {
      throw new DatapathError('', reason, message, transient);
    };
    if (this.cannotPlug || !this.exclusive)
      fail('apply-failed', `node ${this.options.node}'s pool is eniMode Exclusive, but ${this.cannotPlug}`);
    if (!req.netns) fail('apply-failed', 'CNI_NETNS is not set: an exclusive ENI needs the pod’s network namespace');
    if (!this.state.allocations[key]) await this.mustRequestEni(req);
    const end = this.metrics.latency.startTimer();
    try {
      const macs = await this.exclusive!.presentMacs();
      const onNode = new Set(
        (pool.status?.enis ?? []).filter((e) => macs.has((e.mac ?? '').toLowerCase())).map((e) => e.id),
      );
      const r = this.take(req, onNode);
      if (r === 'pool-empty') return r;
      const taken = this.state.allocations[key];
      try {
        await this.exclusive!.attach({
          eniId: r.lease.eniId,
          mac: r.lease.mac,
          netns: req.netns!,
          ifName: req.ifName,
          ip: r.lease.ip,
          prefixLength: r.lease.prefixLength,
          gateway: r.lease.gateway,
          mtu: this.options.datapath?.config.mtu ?? 1500,
          ...(req.bandwidth ? { bandwidth: req.bandwidth } : {}),
        });
        if (this.state.allocations[key] !== taken) throw released(r.lease);
      } catch (e) {
        const err = this.podFailed(
          e,
          r.lease,
          req,
          'an exclusive ENI could not be moved into its pod; the ADD fails and the ENI is brought back',
        );
        // A device not there yet never left the node: its ENI is free again at once, no cool-down.
        if (r.fresh && this.state.allocations[key] === taken)
          await this.unplug(req.containerId, req.ifName, req.netns, err.reason !== 'device-missing');
        throw err;
      }
      return r.lease;
    } finally {
      end();
    }
  }

  /** A pod's datapath that could not be set up: the error, with its lease's ENI, counted and logged. */
  private podFailed(e: unknown, lease: Lease, req: AddRequest, message: string): DatapathError {
    const err =
      e instanceof DatapathError
        ? new DatapathError(lease.eniId, e.reason, e.message, e.transient)
        : new DatapathError(lease.eniId, 'apply-failed', (e as Error).message, false);
    this.routing?.metrics.podFailures.inc({ eni: err.eniId, reason: err.reason });
    this.options.logger.warn(
      { node: this.options.node, eni: err.eniId, ip: lease.ip, pod: req.pod, reason: err.reason, err: err.message },
      message,
    );
    return err;
  }

  /** A pod on an Exclusive node that does not request eniipam.io/eni is refused, saying what it lacks. */
  private async mustRequestEni(req: AddRequest): Promise<void> {
    const [namespace, name] = req.pod.split('/');
    let requests = 0;
    try {
      // A list by name: the agent's role lists pods, and gets none.
      const list = await this.core.listNamespacedPod({ namespace: namespace!, fieldSelector: `metadata.name=${name}` });
      const pod = list.items[0];
      if (!pod) throw new Error('the API server has no such pod');
      for (const c of pod.spec?.containers ?? [])
        requests += Number(c.resources?.limits?.[ENI_RESOURCE] ?? c.resources?.requests?.[ENI_RESOURCE] ?? 0);
    } catch (e) {
      throw new DatapathError(
        '',
        'apply-failed',
        `cannot read pod ${req.pod} to see whether it requests ${ENI_RESOURCE}: ${(e as Error).message}`,
        true,
      );
    }
    if (requests < 1)
      throw new DatapathError(
        '',
        'no-eni-request',
        `pod ${req.pod} does not request ${ENI_RESOURCE}: node ${this.options.node}'s pool is eniMode Exclusive, ` +
          `where each pod takes a whole ENI; add resources.limits ${ENI_RESOURCE}: 1 to one of its containers, ` +
          'or run it on a node of a Shared class',
        false,
      );
  }

  release(containerId: string, ifName?: string): string[] {
    return this.drop(containerId, ifName).released;
  }

  private drop(containerId: string, ifName?: string, cool = true): { released: string[]; unrouted: Promise<void> } {
    const r = release(this.state, containerId, ifName, this.clock.now(), cool ? this.options.cooldownMs : 0);
    if (r.released.length) {
      this.state = r.state;
      this.persist();
      this.scheduleStatus();
    }
    return { released: r.released, unrouted: this.routing?.forget(r.released) ?? Promise.resolve() };
  }

  /** A pod's DEL: its addresses released, and their rules gone from the node before it answers. */
  /**
   * A pod's DEL (`netns`: its CNI_NETNS, where a device of an allocation recovered without it
   * is looked for). Waits for an ADD of the same container still moving its device.
   */
  removePod(containerId: string, ifName?: string, netns?: string): Promise<string[]> {
    return this.serially(containerId, () => this.unplug(containerId, ifName, netns));
  }

  /** One exclusive ADD or DEL of a container at a time: a DEL never overtakes the ADD it cancels. */
  private serially<T>(containerId: string, op: () => Promise<T>): Promise<T> {
    const before = this.inProgress.get(containerId) ?? Promise.resolve();
    const mine = before.then(op, op);
    const settled = mine.then(
      () => undefined,
      () => undefined,
    );
    this.inProgress.set(containerId, settled);
    void settled.then(() => {
      if (this.inProgress.get(containerId) === settled) this.inProgress.delete(containerId);
    });
    return mine;
  }

  private async unplug(containerId: string, ifName?: string, netns?: string, cool = true): Promise<string[]> {
    // An exclusive ENI's device is back on the node before the ENI is free for another pod (a
    // failure fails the DEL, which the runtime retries: the allocation stays meanwhile).
    for (const a of Object.values(this.state.allocations)) {
      if (a.containerId !== containerId || (ifName !== undefined && a.ifName !== ifName)) continue;
      const mac =
        a.exclusive?.mac ?? this.current()?.status?.enis?.find((e) => e.id === a.eniId && a.ip === e.primaryIP)?.mac;
      if (mac && this.exclusive) await this.exclusive.detach(a.eniId, mac, a.exclusive?.netns ?? netns);
    }
    const r = this.drop(containerId, ifName, cool);
    await r.unrouted;
    return r.released;
  }

  /**
   * Group commit: one save is in flight at a time (its write and fdatasync off the event
   * loop); the changes made meanwhile wait and go together in the next one, so a burst of pod
   * starts costs a few fdatasyncs, not one each, and the loop keeps serving during them.
   */
  private persist(): void {
    if (!this.queued) {
      let settle!: { resolve: () => void; reject: (e: Error) => void };
      const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
      done.catch(() => undefined); // callers that wait see the error; nobody else must crash on it
      this.queued = { done, ...settle };
    }
    this.covering = this.queued.done;
    if (!this.flushing) this.flushing = this.flush();
  }

  private async flush(): Promise<void> {
    while (this.queued) {
      const batch = this.queued;
      this.queued = undefined;
      try {
        // The state now holds every change of the batch (and none is half made: changes are synchronous).
        await this.file.saveAsync(this.state);
        this.unsaved = false;
        batch.resolve();
      } catch (e) {
        this.unsaved = true;
        this.options.logger.error(
          { node: this.options.node, err: (e as Error).message },
          'could not save the agent state',
        );
        batch.reject(e as Error);
      }
    }
    this.flushing = undefined;
  }

  /**
   * Resolves once every change made so far is on disk: answer a change only after it. After a
   * failed save, the state is saved again first, so that a repeated call (an ADD retried for the
   * same container) is answered once what it asked for is really saved.
   */
  async persisted(): Promise<void> {
    if (this.unsaved && !this.queued && !this.stopped) this.persist();
    await this.covering;
  }

  /** The eniMode of the node's pool, once seen. */
  eniMode(): 'Shared' | 'Exclusive' | undefined {
    const pool = this.current();
    return pool ? (exclusiveMode(pool.spec) ? 'Exclusive' : 'Shared') : undefined;
  }

  /** The agent's time (its clock). */
  now(): number {
    return this.clock.now();
  }

  list() {
    return Object.values(this.state.allocations);
  }

  /** Coalesces status writes: one soon after a change, then at most one per interval (see StatusWriter). */
  private scheduleStatus(): void {
    this.status.schedule();
  }

  /** The agent's fields of the pool status as they should be now; undefined while it must not write. */
  private planStatus(): PlannedStatus | undefined {
    const pool = this.current();
    // A write before recovery would clear status.used entries that only it can take back in.
    if (!pool || this.recovering) return undefined;
    const mine = agentStatus(this.state, pool, this.clock.now(), this.routing?.heldByNode());
    const old = {
      used: pool.status?.used ?? {},
      releaseAcks: pool.status?.releaseAcks ?? {},
      cooling: pool.status?.cooling ?? {},
    };
    const nulls = (now: Record<string, unknown>, before: Record<string, unknown>) =>
      Object.fromEntries(
        Object.keys(before)
          .filter((k) => !(k in now))
          .map((k) => [k, null]),
      );
    const fields = {
      used: { ...nulls(mine.used, old.used), ...mine.used },
      releaseAcks: { ...nulls(mine.releaseAcks, old.releaseAcks), ...mine.releaseAcks },
      cooling: { ...nulls(mine.cooling, old.cooling), ...mine.cooling },
    };
    this.clearCoolingWhenDone(mine.cooling);
    const text = JSON.stringify(fields);
    return {
      fields,
      changed: text !== this.lastWritten || !sameJson(mine, old),
      written: () => (this.lastWritten = text),
    };
  }

  /** Cooling entries end by time alone; one more write then takes them out of the status. */
  private clearCoolingWhenDone(cooling: Record<string, string>): void {
    this.cancelCooling?.();
    const ends = Object.values(cooling).map((t) => Date.parse(t));
    if (!ends.length || this.stopped) return;
    this.cancelCooling = this.clock.after(Math.max(0, Math.max(...ends) - this.clock.now()) + 10, () =>
      this.scheduleStatus(),
    );
  }

  /** Writes what is pending and stops watching. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.routing?.stop();
    this.cancelRecoveryRetry?.();
    this.cancelDepartures?.();
    this.cancelCooling?.();
    this.cancelAdvertise?.();
    await this.status.stop();
    await this.pool.stop();
    await this.flushing;
    this.file.close();
  }
}
