/**
 * In-memory fakes of the pool reconciler's ports, and a fixture that builds a reconciler over
 * them: objects preloaded, every write and cloud call recorded in order, a fixed clock. One
 * `reconcile(name)` per case, then the recorded actions are compared with the expected ones
 * (kubernetes/sample-controller's controller_test.go, for this operator).
 *
 * The cloud view is the REAL CloudState, preloaded with `upsert`, over a tiny fake EcsApi that
 * answers its describe calls (vSwitches, security groups, instance types, and the ENIs a resync
 * reads) and records them.
 */
import type { V1Taint } from '@kubernetes/client-node';
import type { TaintSpec } from '../../src/kube/taint.js';
import { ApiException, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import {
  API_VERSION,
  type ENIPool,
  type ENIPoolSpec,
  type ENIPoolStatus,
  type ObjectMeta,
} from '../../src/api/types.js';
import {
  CloudError,
  type EcsApi,
  type EniFilter,
  type Instance,
  type InstanceTypeLimits,
  type NetworkInterface,
  type SecurityGroup,
  type VSwitch,
} from '../../src/cloud/index.js';
import { silentLogger } from '../../src/observability/logger.js';
import { CloudFailures } from '../../src/operator/failures.js';
import { CloudState, TAGS } from '../../src/operator/eni/cloud-state.js';
import { systemClock } from '../../src/clock.js';
import { DEFAULT_OPERATOR_CONFIG, FINALIZER, type OperatorMode } from '../../src/operator/config.js';
import { OperatorMetrics } from '../../src/operator/metrics.js';
import { NodeMemories, type NodeMemory } from '../../src/operator/pool/node-memory.js';
import { PoolReconciler, type ReconcileResult } from '../../src/operator/pool/reconciler.js';
import { EniLedger } from '../../src/operator/eni/ledger.js';
import { EniLifecycle } from '../../src/operator/eni/lifecycle.js';
import type { StatePoller } from '../../src/operator/eni/poller.js';
import type {
  ClusterCache,
  EniWork,
  EniWorkInFlight,
  IpCalls,
  PoolEvents,
  PoolStore,
} from '../../src/operator/pool/ports.js';
import { RequestStamps } from '../../src/operator/pool/status.js';

/** One recorded call: what was called, with which arguments (the pool argument left out). */
export interface Call {
  action: string;
  args: unknown[];
}

/** The fixed time of every fixture (the clock moves only when a case moves it). */
export const NOW = Date.parse('2026-03-01T12:00:00.000Z');
export const CLUSTER = 'c-test';
export const VPC = 'vpc-1';
export const ZONE = 'zone-a';
export const INSTANCE = 'i-a';
export const NODE = 'node-a';
export const TYPE = 'ecs.test-3x10';

const clone = <T>(x: T): T => structuredClone(x);

// ---------------------------------------------------------------------------------------------
// Objects

/**
 * A secondary ENI of node-a, ours and InUse on i-a unless told otherwise, with `ips` pod
 * addresses: its secondaries 10.0.<n>.2, .3, ... (its own primary, 10.0.<n>.1, is the node's).
 */
export function eni(
  n: number,
  ips: number,
  o: Partial<NetworkInterface> & { ours?: boolean; node?: string } = {},
): NetworkInterface {
  const { ours = true, node = NODE, ...rest } = o;
  return {
    id: `eni-${n}`,
    mac: `00:16:3e:00:00:${String(n).padStart(2, '0')}`,
    status: 'InUse',
    type: 'Secondary',
    vpcId: VPC,
    vSwitchId: 'vsw-a',
    zoneId: ZONE,
    instanceId: INSTANCE,
    deviceIndex: n,
    primaryIp: `10.0.${n}.1`,
    secondaryIps: Array.from({ length: ips }, (_, k) => `10.0.${n}.${k + 2}`),
    ipv4Prefixes: [],
    ipv6: [],
    ipv6Prefixes: [],
    securityGroupIds: ['sg-1'],
    tags: ours ? { [TAGS.cluster]: CLUSTER, [TAGS.node]: node, [TAGS.creator]: 'eni-ipam-operator' } : {},
    creationTime: '2026-03-01T11:00:00Z',
    ...rest,
  };
}

/** An ENI's pod addresses (its secondaries). */
export const ipsOf = (e: NetworkInterface): string[] => [...e.secondaryIps];

/** The instance's own primary ENI: never part of a pool. */
export const primaryEni = (): NetworkInterface => ({
  ...eni(0, 0, { ours: false, deviceIndex: 0, vSwitchId: 'vsw-nodes' }),
  id: 'eni-primary',
  type: 'Primary',
});

export const vSwitch = (id: string, free: number, o: Partial<VSwitch> = {}): VSwitch => ({
  id,
  vpcId: VPC,
  zoneId: ZONE,
  cidr: '10.0.0.0/16',
  availableIpCount: free,
  name: id,
  tags: {},
  ...o,
});

export const node = (name: string): V1Node => ({ metadata: { name }, spec: { providerID: `cn-test.${INSTANCE}` } });

/** A pod scheduled to a node, Pending and without an IP unless told otherwise. */
export function pod(name: string, o: { node?: string; podIP?: string; hostNetwork?: boolean } = {}): V1Pod {
  return {
    metadata: { name, namespace: 'default' },
    spec: { nodeName: o.node ?? NODE, hostNetwork: o.hostNetwork, containers: [{ name: 'c', image: 'x' }] },
    status: { phase: 'Pending', podIP: o.podIP },
  };
}

export function pool(name = NODE, o: { spec?: Partial<ENIPoolSpec>; metadata?: Partial<ObjectMeta> } = {}): ENIPool {
  return {
    apiVersion: API_VERSION,
    kind: 'ENIPool',
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: '7',
      generation: 1,
      finalizers: [FINALIZER],
      ...o.metadata,
    },
    spec: {
      nodeName: name,
      instanceID: name === NODE ? INSTANCE : `i-${name}`,
      instanceType: TYPE,
      zoneID: ZONE,
      vpcID: VPC,
      className: 'default',
      vSwitchIDs: ['vsw-a'],
      securityGroupIDs: ['sg-1'],
      ...o.spec,
    },
  };
}

/** The merge patch a status write carries, applied (null removes a key of a map). */
function applyMergePatch(target: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...target };
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else if (typeof v === 'object' && !Array.isArray(v))
      out[k] = applyMergePatch((out[k] as Record<string, unknown>) ?? {}, v as Record<string, unknown>);
    else out[k] = clone(v);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Fakes

/** The informers' caches, over plain arrays. */
export class FakeClusterCache implements ClusterCache {
  constructor(
    public poolList: ENIPool[] = [],
    public nodeList: V1Node[] = [],
    public podList: V1Pod[] = [],
  ) {}

  pool(name: string): ENIPool | undefined {
    return this.poolList.find((p) => p.metadata.name === name);
  }

  pools(): readonly ENIPool[] {
    return this.poolList;
  }

  node(name: string): V1Node | undefined {
    return this.nodeList.find((n) => n.metadata?.name === name);
  }

  pendingPodsOn(node: string): readonly V1Pod[] {
    return this.podList.filter((p) => p.status?.phase === 'Pending' && p.spec?.nodeName === node);
  }

  poolsNaming(instanceId: string): readonly ENIPool[] {
    return this.poolList.filter((p) => p.spec.instanceID === instanceId);
  }
}

export type StoreWrite =
  | { action: 'setFinalizers'; name: string; finalizers: string[] }
  | { action: 'patchStatus'; name: string; resourceVersion: string | undefined; patch: Record<string, unknown> }
  | { action: 'deletePool'; name: string }
  | { action: 'removeTaint'; name: string; resourceVersion: string; index: number };

type StoreMethod = 'readPool' | 'setFinalizers' | 'patchStatus' | 'deletePool' | 'nodeExists' | 'removeTaint';

/** An error as client-node throws it for an HTTP status: the API server's Status as its body. */
export const apiError = (status: number, reason = 'Failed', message = `injected ${status}`): ApiException<string> =>
  new ApiException(
    status,
    `HTTP-Code: ${status}`,
    JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message, reason, code: status }),
    {},
  );

/**
 * The API server's pools and Nodes. Writes are recorded in order and applied to the pools it
 * holds (a status write bumps the resourceVersion, as the API server does); any method can be
 * told to answer an error once.
 */
export class FakePoolStore implements PoolStore {
  readonly writes: StoreWrite[] = [];
  /** Live reads, in order: `readPool <name>`, `nodeExists <name>`. */
  readonly reads: string[] = [];
  readonly live = new Map<string, ENIPool>();
  readonly liveNodes = new Set<string>();
  private readonly failures = new Map<StoreMethod, unknown[]>();

  /** The next call of `method` throws `error` (an ApiException for a status code). */
  failNext(method: StoreMethod, error: number | Error): void {
    const reasons: Record<number, string> = { 403: 'Forbidden', 404: 'NotFound', 409: 'Conflict' };
    const e = typeof error === 'number' ? apiError(error, reasons[error] ?? 'InternalError') : error;
    this.failures.set(method, [...(this.failures.get(method) ?? []), e]);
  }

  private maybeFail(method: StoreMethod): void {
    const queued = this.failures.get(method);
    if (queued?.length) throw queued.shift();
  }

  async readPool(name: string): Promise<ENIPool | undefined> {
    this.reads.push(`readPool ${name}`);
    this.maybeFail('readPool');
    const p = this.live.get(name);
    return p && clone(p);
  }

  async setFinalizers(name: string, finalizers: string[], resourceVersion?: string): Promise<ENIPool | undefined> {
    this.writes.push({ action: 'setFinalizers', name, finalizers: [...finalizers] });
    this.maybeFail('setFinalizers');
    const p = this.live.get(name);
    if (p && resourceVersion !== undefined && resourceVersion !== p.metadata.resourceVersion)
      throw apiError(409, 'Conflict');
    if (p) p.metadata = { ...p.metadata, finalizers: [...finalizers], resourceVersion: this.bump(p) };
    return p && clone(p);
  }

  async patchStatus(name: string, resourceVersion: string | undefined, patch: Record<string, unknown>): Promise<void> {
    this.writes.push({ action: 'patchStatus', name, resourceVersion, patch: clone(patch) });
    this.maybeFail('patchStatus');
    const p = this.live.get(name);
    if (!p) throw apiError(404, 'NotFound');
    if (resourceVersion !== undefined && resourceVersion !== p.metadata.resourceVersion)
      throw apiError(409, 'Conflict');
    p.status = applyMergePatch((p.status ?? {}) as Record<string, unknown>, patch) as ENIPoolStatus;
    p.metadata = { ...p.metadata, resourceVersion: this.bump(p) };
  }

  async deletePool(name: string): Promise<void> {
    this.writes.push({ action: 'deletePool', name });
    this.maybeFail('deletePool');
    this.live.delete(name);
  }

  async nodeExists(name: string): Promise<boolean> {
    this.reads.push(`nodeExists ${name}`);
    this.maybeFail('nodeExists');
    return this.liveNodes.has(name);
  }

  async removeTaint(name: string, resourceVersion: string, index: number): Promise<void> {
    this.writes.push({ action: 'removeTaint', name, resourceVersion, index });
    this.maybeFail('removeTaint');
  }

  private bump(p: ENIPool): string {
    return String(Number(p.metadata.resourceVersion ?? '0') + 1);
  }
}

/**
 * The reconciler's own cloud calls, recorded in order, each answering as scripted: a real
 * CloudError (`fail`), or success (assigned IPs come from 10.9.<k>.<j>, never seen before).
 */
export class FakeIpCalls implements IpCalls {
  readonly calls: Call[] = [];
  /** Instances DescribeInstances knows (by id). */
  readonly instances = new Map<string, Instance>();
  private readonly scripted = new Map<string, CloudError[]>();
  private assigned = 0;

  /**
   * The next `times` calls of `action` fail with `code` (classified by the real CloudError).
   * `outcomeUnknown`: as when no attempt got an answer.
   */
  fail(action: string, code: string, o: { times?: number; message?: string; outcomeUnknown?: boolean } = {}): void {
    const list = this.scripted.get(action) ?? [];
    for (let i = 0; i < (o.times ?? 1); i++) {
      const e = new CloudError(action, code, o.message ?? `the cloud says ${code}`, `req-${list.length + 1}`);
      e.outcomeUnknown = o.outcomeUnknown ?? false;
      list.push(e);
    }
    this.scripted.set(action, list);
  }

  private answer(action: string, args: unknown[]): void {
    this.calls.push({ action, args: clone(args) });
    const e = this.scripted.get(action)?.shift();
    if (e) throw e;
  }

  async assignPrivateIpAddresses(eniId: string, o: { count?: number; ips?: string[] }): Promise<string[]> {
    this.answer('AssignPrivateIpAddresses', [eniId, o]);
    const k = ++this.assigned;
    return o.ips ?? Array.from({ length: o.count ?? 1 }, (_, j) => `10.9.${k}.${j + 1}`);
  }

  async unassignPrivateIpAddresses(eniId: string, ips: string[]): Promise<void> {
    this.answer('UnassignPrivateIpAddresses', [eniId, ips]);
  }

  async assignIpv6Addresses(eniId: string, o: { count?: number; ips?: string[] }): Promise<string[]> {
    this.answer('AssignIpv6Addresses', [eniId, o]);
    const k = ++this.assigned;
    return o.ips ?? Array.from({ length: o.count ?? 1 }, (_, j) => `fd00:9:${k}::${j + 1}`);
  }

  async unassignIpv6Addresses(eniId: string, ips: string[]): Promise<void> {
    this.answer('UnassignIpv6Addresses', [eniId, ips]);
  }

  /** IPv6 prefixes come from fd00:8:<k>:0:<j+1>::/80, never seen before. */
  async assignIpv6Prefixes(eniId: string, o: { count: number }): Promise<string[]> {
    this.answer('AssignIpv6Addresses', [eniId, { prefixes: o.count }]);
    const k = ++this.assigned;
    return Array.from({ length: o.count }, (_, j) => `fd00:8:${k}:0:${j + 1}::/80`);
  }

  async unassignIpv6Prefixes(eniId: string, prefixes: string[]): Promise<void> {
    this.answer('UnassignIpv6Addresses', [eniId, { prefixes }]);
  }

  /** Prefixes come from 10.8.<k>.<16j>/28, never seen before. */
  async assignIpv4Prefixes(eniId: string, o: { count: number }): Promise<string[]> {
    this.answer('AssignPrivateIpAddresses', [eniId, { prefixes: o.count }]);
    const k = ++this.assigned;
    return Array.from({ length: o.count }, (_, j) => `10.8.${k}.${16 * j}/28`);
  }

  async unassignIpv4Prefixes(eniId: string, prefixes: string[]): Promise<void> {
    this.answer('UnassignPrivateIpAddresses', [eniId, { prefixes }]);
  }

  async describeInstances(f: { ids?: string[]; privateIps?: string[]; vpcId?: string } = {}): Promise<Instance[]> {
    this.answer('DescribeInstances', [f]);
    return (f.ids ?? [...this.instances.keys()]).flatMap((id) => {
      const i = this.instances.get(id);
      return i ? [clone(i)] : [];
    });
  }
}

export const instance = (id = INSTANCE, status = 'Running'): Instance => ({
  id,
  instanceType: TYPE,
  zoneId: ZONE,
  vpcId: VPC,
  vSwitchId: 'vsw-nodes',
  status,
  primaryIp: '10.0.0.10',
  securityGroupIds: ['sg-nodes'],
});

/**
 * The background ENI work, recorded (nothing happens in the background). Its work in flight is a
 * real ledger that a case fills (or a real lifecycle writes, given this ledger).
 */
export class FakeEniWork implements EniWork {
  readonly calls: Call[] = [];
  readonly ledger = new EniLedger();
  /** What a delete does to the cloud once it has waited for the ENI to be gone. */
  onDeleted?: (id: string) => void;

  create(_pool: ENIPool, vSwitchId: string, ips: number, securityGroupIds: string[]): void {
    this.calls.push({ action: 'create', args: [vSwitchId, ips, [...securityGroupIds]] });
  }

  attach(_pool: ENIPool, e: NetworkInterface, o?: { alreadyAttaching?: boolean }): void {
    this.calls.push({ action: 'attach', args: [e.id, { alreadyAttaching: o?.alreadyAttaching ?? false }] });
  }

  remove(_pool: ENIPool, e: NetworkInterface): void {
    this.calls.push({ action: 'remove', args: [e.id] });
  }

  async deleteEni(_pool: ENIPool, id: string): Promise<void> {
    this.calls.push({ action: 'deleteEni', args: [id] });
    this.onDeleted?.(id);
  }

  inFlight(node: string): EniWorkInFlight {
    return this.ledger.inFlight(node);
  }

  listed(node: string, eniIds: readonly string[]): void {
    this.ledger.listed(node, eniIds);
  }

  forget(node: string): void {
    this.ledger.forget(node);
  }
}

export interface RecordedEvent {
  pool: string;
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export class EventLog implements PoolEvents {
  readonly events: RecordedEvent[] = [];

  record(p: ENIPool, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.events.push({ pool: p.metadata.name, type, reason, message });
  }
}

/**
 * What CloudState describes through EcsApi, answered from plain lists, each call recorded
 * (`DescribeVSwitches`, `DescribeSecurityGroups`, `DescribeInstanceTypes`, `DescribeNetworkInterfaces`).
 */
export class FakeDescribe {
  readonly calls: Call[] = [];

  constructor(
    public vSwitches: VSwitch[],
    public securityGroups: SecurityGroup[],
    public instanceTypes: InstanceTypeLimits[],
    /** The ENIs the cloud holds (what a resync reads). */
    public enis: NetworkInterface[],
  ) {}

  /** Set: DescribeNetworkInterfaces throws this once an ENI has been deleted (a read that fails after the deletes). */
  failAfterDeletes?: Error;
  deleted = 0;

  api(): EcsApi {
    const rec = (action: string, args: unknown[]) => this.calls.push({ action, args: clone(args) });
    const api: Pick<
      EcsApi,
      'describeVSwitches' | 'describeSecurityGroups' | 'describeInstanceTypes' | 'describeNetworkInterfaces'
    > = {
      describeVSwitches: async (f) => {
        rec('DescribeVSwitches', [f]);
        return clone(this.vSwitches.filter((v) => !f?.vpcId || v.vpcId === f.vpcId));
      },
      describeSecurityGroups: async (f) => {
        rec('DescribeSecurityGroups', [f]);
        return clone(this.securityGroups.filter((g) => !f?.vpcId || g.vpcId === f.vpcId));
      },
      describeInstanceTypes: async (ids = []) => {
        rec('DescribeInstanceTypes', [ids]);
        return clone(this.instanceTypes.filter((t) => ids.includes(t.id)));
      },
      describeNetworkInterfaces: async (f: EniFilter = {}) => {
        rec('DescribeNetworkInterfaces', [f]);
        if (this.failAfterDeletes && this.deleted > 0) throw this.failAfterDeletes;
        return clone(
          this.enis.filter(
            (e) =>
              (!f.ids || f.ids.includes(e.id)) &&
              (!f.instanceId || e.instanceId === f.instanceId) &&
              (!f.vpcId || e.vpcId === f.vpcId) &&
              Object.entries(f.tags ?? {}).every(([k, v]) => e.tags[k] === v),
          ),
        );
      },
    };
    return api as EcsApi;
  }
}

// ---------------------------------------------------------------------------------------------
// The fixture

export interface FixtureOptions {
  mode?: OperatorMode;
  /** Spec fields over node-a's pool defaults (vsw-a, sg-1, i-a, the 3 × 10 type). */
  spec?: Partial<ENIPoolSpec>;
  metadata?: Partial<ObjectMeta>;
  status?: ENIPoolStatus;
  /** The pool as the API server has it when it differs from the cache (a fresh read answers this). */
  live?: (p: ENIPool) => ENIPool | undefined;
  /** The pool is in the cache (default true). */
  cached?: boolean;
  /** More pools, in the cache and on the API server. */
  otherPools?: ENIPool[];
  /** Secondary ENIs, in the cloud and in the cloud-state cache (the instance's primary is always there). */
  enis?: NetworkInterface[];
  /** ENIs in the cloud that the cloud-state cache has not seen yet (a resync finds them). */
  unseenEnis?: NetworkInterface[];
  vSwitches?: VSwitch[];
  securityGroups?: SecurityGroup[];
  instanceTypes?: InstanceTypeLimits[];
  /** What DescribeInstances knows (default: i-a Running). */
  instances?: Instance[];
  /** Nodes in the cache (default node-a). */
  nodes?: string[];
  /** Nodes on the API server (default: those in the cache). */
  liveNodes?: string[];
  pods?: V1Pod[];
  /** The node's memory before the reconcile (failures, an excess since, a deficit since). */
  memory?: (m: NodeMemory) => void;
  /** ENI work in flight before the reconcile (creates, attaches, removals), as the lifecycle records it. */
  inFlight?: (ledger: EniLedger) => void;
  mayWrite?: boolean;
  nodeGoneGraceMs?: number;
  /** The operator's startup taint (default: none looked for). */
  startupTaint?: TaintSpec;
  /** node-a's taints in the cache, and its resourceVersion (default '3'). */
  nodeTaints?: V1Taint[];
}

/** 3 ENIs of 11 addresses: 10 pod addresses on each secondary ENI (its own primary is the node's). */
export const DEFAULT_TYPE: InstanceTypeLimits = { id: TYPE, eniQuantity: 3, ipv4PerEni: 11, ipv6PerEni: 0 };

export interface Fixture {
  reconciler: PoolReconciler;
  cache: FakeClusterCache;
  store: FakePoolStore;
  ecs: FakeIpCalls;
  enis: FakeEniWork;
  events: EventLog;
  describe: FakeDescribe;
  cloud: CloudState;
  memory: NodeMemories;
  failures: CloudFailures;
  metrics: OperatorMetrics;
  /** `enqueue(name, afterMs)` calls, in order. */
  enqueued: Array<[string, number | undefined]>;
  clock: { now: number };
  lease: { fresh: boolean };
  /** What the operator knows of the cloud as a whole (a case sets an outage or an unread cloud). */
  health: { resynced: boolean; outage?: { reason: string; message: string } };
  /** One reconcile of node-a's pool (or the one named). */
  reconcile(name?: string): Promise<ReconcileResult>;
  /** The cache catches up with the API server (an informer's next event). */
  sync(): void;
  /** Forgets what was recorded so far (to look at the next reconcile alone). */
  clearRecords(): void;
  /** The status writes made (patchStatus), in order. */
  statusWrites(): Array<Extract<StoreWrite, { action: 'patchStatus' }>>;
}

/** A reconciler over fakes, with node-a, i-a (3 ENIs × 10 IPs), vsw-a with free addresses, mode normal. */
export function fixture(o: FixtureOptions = {}): Fixture {
  const logger = silentLogger();
  const main = pool(NODE, { spec: o.spec, metadata: o.metadata });
  if (o.status) main.status = clone(o.status);
  const pools = [...(o.cached === false ? [] : [main]), ...(o.otherPools ?? [])];
  const nodeNames = o.nodes ?? [NODE];
  const nodes = nodeNames.map(node);
  const tainted = nodes.find((n) => n.metadata?.name === NODE);
  if (tainted && o.nodeTaints) {
    tainted.metadata!.resourceVersion = '3';
    tainted.spec!.taints = clone(o.nodeTaints);
  }
  const cache = new FakeClusterCache(clone(pools), nodes, clone(o.pods ?? []));

  const store = new FakePoolStore();
  const live = o.live ? o.live(clone(main)) : clone(main);
  if (live) store.live.set(NODE, live);
  for (const p of o.otherPools ?? []) store.live.set(p.metadata.name, clone(p));
  for (const n of o.liveNodes ?? nodeNames) store.liveNodes.add(n);

  const enis = [primaryEni(), ...(o.enis ?? [])];
  const describe = new FakeDescribe(
    o.vSwitches ?? [vSwitch('vsw-a', 100)],
    o.securityGroups ?? [],
    o.instanceTypes ?? [DEFAULT_TYPE],
    clone([...enis, ...(o.unseenEnis ?? [])]),
  );
  const cloud = new CloudState(describe.api(), VPC, CLUSTER, logger);
  for (const e of enis) cloud.upsert(clone(e));

  const ecs = new FakeIpCalls();
  for (const i of o.instances ?? [instance()]) ecs.instances.set(i.id, i);
  const eniWork = new FakeEniWork();
  // As the lifecycle's delete: it returns once the ENI is gone from the cloud, and the cache forgets it.
  eniWork.onDeleted = (id) => {
    describe.enis = describe.enis.filter((e) => e.id !== id);
    describe.deleted++;
    cloud.forget(id);
  };
  const events = new EventLog();
  const memory = new NodeMemories();
  o.memory?.(memory.of(NODE));
  o.inFlight?.(eniWork.ledger);
  const clock = { now: NOW };
  const now = () => clock.now;
  const enqueued: Fixture['enqueued'] = [];
  const enqueue = (name: string, afterMs?: number) => void enqueued.push([name, afterMs]);
  const lease = { fresh: o.mayWrite ?? true };
  const health: Fixture['health'] = { resynced: true };
  const failures = new CloudFailures({ cloud, events, memory, logger, now, enqueue });
  const metrics = new OperatorMetrics(new Registry());
  const reconciler = new PoolReconciler({
    cache,
    store,
    cloud,
    ecs,
    enis: eniWork,
    events,
    health: {
      get resynced() {
        return health.resynced;
      },
      outage: () => health.outage,
    },
    failures,
    memory,
    metrics,
    config: {
      clusterId: CLUSTER,
      vpcId: VPC,
      mode: o.mode ?? 'normal',
      nodeGoneGraceMs: o.nodeGoneGraceMs ?? 10 * 60_000,
      startupTaint: o.startupTaint,
    },
    logger,
    now,
    enqueue,
    mayWrite: () => lease.fresh,
    stamps: new RequestStamps(),
  });
  const f: Fixture = {
    reconciler,
    cache,
    store,
    ecs,
    enis: eniWork,
    events,
    describe,
    cloud,
    memory,
    failures,
    metrics,
    enqueued,
    clock,
    lease,
    health,
    reconcile: (name = NODE) => reconciler.reconcile(name),
    sync: () => {
      cache.poolList = [...store.live.values()].map(clone);
    },
    clearRecords: () => {
      for (const list of [store.writes, store.reads, ecs.calls, eniWork.calls, events.events, describe.calls, enqueued])
        list.length = 0;
    },
    statusWrites: () =>
      store.writes.filter((w): w is Extract<StoreWrite, { action: 'patchStatus' }> => w.action === 'patchStatus'),
  };
  return f;
}

/** A condition as `Type=Status/Reason`, for comparing lists of them. */
export const conditionsOf = (patch: Record<string, unknown> | undefined): string[] =>
  ((patch?.conditions as Array<{ type: string; status: string; reason?: string }> | undefined) ?? []).map(
    (c) => `${c.type}=${c.status}/${c.reason}`,
  );

/** The condition of a type in a status patch. */
export const conditionIn = (patch: Record<string, unknown> | undefined, type: string) =>
  (patch?.conditions as Array<{ type: string; status: string; reason?: string; message?: string }> | undefined)?.find(
    (c) => c.type === type,
  );

/** What the cloud does when the real lifecycle calls it. */
export interface LifecycleScript {
  attach?: () => Promise<void>;
  create?: () => Promise<NetworkInterface>;
  /** What DescribeNetworkInterfaces / the poller see of an ENI. */
  state?: (id: string) => NetworkInterface | undefined;
  /** The poller's wait, where a case holds or fails it (default: answered at once from `state`). */
  wait?: (id: string, until: string) => Promise<NetworkInterface | undefined>;
}

/** The real EniLifecycle over the fixture (memory, cloud state, Events, ledger), the cloud answering as `s` says. */
export function scriptedLifecycle(f: Fixture, mode: OperatorMode, s: LifecycleScript) {
  const calls: string[] = [];
  const api = {
    attachNetworkInterface: async () => (calls.push('AttachNetworkInterface'), s.attach?.()),
    createNetworkInterface: async () => {
      calls.push('CreateNetworkInterface');
      return s.create!();
    },
    detachNetworkInterface: async () => void calls.push('DetachNetworkInterface'),
    deleteNetworkInterface: async () => void calls.push('DeleteNetworkInterface'),
    describeNetworkInterfaces: async (q: { ids?: string[] }) =>
      (q.ids ?? []).flatMap((id) => (s.state?.(id) ? [s.state(id)!] : [])),
  } as unknown as EcsApi;
  const poller = {
    wait: async (id: string, until: string) => {
      if (s.wait) return s.wait(id, until);
      const e = s.state?.(id);
      if (until === 'gone') return undefined;
      if (e?.status === until) return e;
      throw new Error(`ENI ${id} is ${e?.status ?? 'gone'}`);
    },
  } as unknown as StatePoller;
  const l = new EniLifecycle({
    api,
    cloud: f.cloud,
    poller,
    metrics: new OperatorMetrics(new Registry()),
    config: { ...DEFAULT_OPERATOR_CONFIG, clusterId: CLUSTER, vpcId: VPC, mode },
    logger: silentLogger(),
    memory: f.memory,
    events: f.events,
    failures: f.failures,
    // The fixture's time; waits (a create's retries) on real timers.
    clock: { now: () => f.clock.now, after: systemClock.after },
    enqueue: (name, afterMs) => void f.enqueued.push([name, afterMs]),
    ledger: f.enis.ledger,
  });
  return { l, calls };
}

/** Lets background work run its course (promises and immediates, no timers). */
export const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};
