/* eslint-disable @typescript-eslint/no-explicit-any -- API errors are read freely */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { Informer } from '../../src/kube/informer.js';
import { silentLogger } from '../../src/observability/logger.js';
import { omitEmpty } from '../../src/operator/cilium/omit-empty.js';
import type { World } from '../ecs/world.js';
import {
  CILIUM_API_VERSION,
  CILIUM_NODES,
  ENI_INDEX_TAG,
  type AllocationIP,
  type CiliumNode,
} from '../../src/operator/cilium/types.js';

/**
 * A conformance stand-in for cilium-agent with --ipam=alibabacloud, written from
 * reference/cilium-node.md §2 (not from Cilium's code): what it writes of its CiliumNode, when,
 * and how it allocates and answers releases. Its own tests check it rule by rule
 * (test/operator/cilium-agent.test.ts), so that the operator's tests stand on an agent that
 * behaves as the real one does, not as the operator would like.
 */

/** What the agent reads from the instance metadata service (§2.1). */
export interface InstanceMetadata {
  instanceId: string;
  instanceType: string;
  zoneId: string;
  vpcId: string;
  vpcCidr: string;
}

/** 1.19+ agent flags: written into spec on every update (0 and empty when left at their defaults). */
export interface AgentFlags {
  preAllocate?: number;
  minAllocate?: number;
  maxAllocate?: number;
  vswitches?: string[];
  securityGroups?: string[];
}

export interface StandInOptions {
  kc: KubeConfig;
  node: string;
  nodeUid: string;
  metadata: InstanceMetadata;
  flags?: AgentFlags;
  /** The LocalNode's labels: the CiliumNode's are replaced by these on every update. */
  labels?: Record<string, string>;
  /** --ipam-cilium-node-update-rate (default 15 s). */
  updateRateMs?: number;
  /** Health checking on (the default) needs two addresses before the agent serves. */
  healthChecking?: boolean;
}

/** What the agent hands the CNI for one address (§2.2 buildAllocationResult). */
export interface Allocation {
  ip: string;
  eni: string;
  mac: string;
  cidr: string;
  gateway: string;
  /** The ENI's index: its route table is 10 + this. */
  interfaceNumber: number;
}

const RELEASE_STATES = new Set(['marked-for-release', 'ready-for-release', 'released']);
const UPDATE_ATTEMPTS = 10;
const UPDATE_BACKOFF_MS = 500;

export class CiliumAgentStandIn {
  private readonly custom: CustomObjectsApi;
  private informer?: Informer<CiliumNode>;
  /** The CiliumNode as last seen, with the agent's answers applied: what a status write sends. */
  private own?: CiliumNode;
  /** Address -> its allocation (owner and ENI), the allocator's in-memory map. */
  private readonly allocated = new Map<string, AllocationIP>();
  private lastSync = 0;
  private syncTimer?: NodeJS.Timeout;
  private syncing = false;
  private stopped = false;
  /** Every status write the agent made, for the tests of its rate. */
  readonly statusWrites: number[] = [];
  /** Status writes refused (a 409: the operator wrote first); each is retried. */
  refusedWrites = 0;
  /** Pool addresses seen while their ENI was not in status (an allocation of one would fail). */
  readonly unlisted = new Set<string>();
  /** Versions of its CiliumNode the agent wrote itself, and every version it was told of. */
  private readonly ownVersions = new Set<string>();
  private readonly seenVersions = new Set<string>();
  /** Writes sent and not yet answered: the watch may show their versions before the answer names them as ours. */
  private writesInFlight = 0;

  constructor(private readonly o: StandInOptions) {
    this.custom = o.kc.makeApiClient(CustomObjectsApi);
  }

  get name(): string {
    return this.o.node;
  }

  /** Creates or updates its CiliumNode (synchronously, before IPAM starts), then watches it. */
  async start(): Promise<void> {
    await this.updateCiliumNode();
    this.informer = new Informer<CiliumNode>({
      kc: this.o.kc,
      path: `/apis/${CILIUM_NODES.group}/${CILIUM_NODES.version}/ciliumnodes`,
      list: () =>
        this.custom.listClusterCustomObject({ ...CILIUM_NODES, fieldSelector: `metadata.name=${this.o.node}` }),
      fieldSelector: `metadata.name=${this.o.node}`,
      logger: silentLogger(),
      onChange: (type, n) => {
        if (type === 'update' && n.metadata.resourceVersion) this.seenVersions.add(n.metadata.resourceVersion);
        this.onUpdate(type === 'delete' ? undefined : n);
      },
    });
    await this.informer.start();
    // The initial sync, as the real agent's after its endpoints are restored.
    this.triggerSync();
  }

  /**
   * The LocalNode changed (or the agent started): GET, mutate, full Update, retried on conflict.
   * The alibaba-cloud spec is reset and refilled, labels replaced, sizing set from the flags; the
   * pool and the status are never written here.
   */
  async updateCiliumNode(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      let current: CiliumNode | undefined;
      try {
        current = (await this.custom.getClusterCustomObject({ ...CILIUM_NODES, name: this.o.node })) as CiliumNode;
      } catch (e: any) {
        if (e?.code !== 404) throw e;
      }
      const next = this.mutate(current);
      this.writesInFlight++;
      try {
        const written = (
          current
            ? await this.custom.replaceClusterCustomObject({ ...CILIUM_NODES, name: this.o.node, body: next })
            : await this.custom.createClusterCustomObject({ ...CILIUM_NODES, body: next })
        ) as CiliumNode;
        this.wrote(written, next.metadata.resourceVersion);
        return;
      } catch (e: any) {
        if (e?.code !== 409 || attempt >= UPDATE_ATTEMPTS) throw e;
        await new Promise((r) => setTimeout(r, UPDATE_BACKOFF_MS));
      } finally {
        this.writesInFlight--;
      }
    }
  }

  /**
   * A write answered: its version is the agent's own, unless the write changed nothing (the API
   * server then answers the version it already had, which may be another writer's).
   */
  private wrote(node: CiliumNode, sentVersion: string | undefined): void {
    const v = node.metadata.resourceVersion;
    if (v && v !== sentVersion) this.ownVersions.add(v);
  }

  /** The object as the agent sends it: decoded into Go types and encoded again (omitempty drops empties). */
  private mutate(current: CiliumNode | undefined): CiliumNode {
    return omitEmpty(this.mutated(current));
  }

  private mutated(current: CiliumNode | undefined): CiliumNode {
    const m = this.o.metadata;
    const flags = this.o.flags ?? {};
    const spec = { ...(current?.spec ?? {}) };
    spec['instance-id'] = m.instanceId;
    spec['alibaba-cloud'] = {
      'instance-type': m.instanceType,
      'availability-zone': m.zoneId,
      'vpc-id': m.vpcId,
      'cidr-block': m.vpcCidr,
      ...(flags.vswitches?.length ? { vswitches: flags.vswitches } : {}),
      ...(flags.securityGroups?.length ? { 'security-groups': flags.securityGroups } : {}),
    };
    spec.ipam = {
      ...spec.ipam,
      'pre-allocate': flags.preAllocate ?? 0,
      'min-allocate': flags.minAllocate ?? 0,
      'max-allocate': flags.maxAllocate ?? 0,
    };
    spec.bootid = 'stand-in-boot';
    return {
      apiVersion: CILIUM_API_VERSION,
      kind: 'CiliumNode',
      metadata: {
        ...(current?.metadata ?? {}),
        name: this.o.node,
        labels: { ...(this.o.labels ?? {}) },
        annotations: {},
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: this.o.node, uid: this.o.nodeUid }],
      },
      spec,
      ...(current?.status ? { status: current.status } : {}),
    };
  }

  /** §2.4: the answers to release requests, on every informer update (none while the pool is nil). */
  private onUpdate(node: CiliumNode | undefined): void {
    if (!node) {
      this.own = undefined;
      return;
    }
    const next: CiliumNode = structuredClone(node);
    const pool = next.spec.ipam?.pool;
    const listed = new Set(
      Object.values(next.status?.['alibaba-cloud']?.enis ?? {}).map((e) => e['network-interface-id']),
    );
    for (const [ip, entry] of Object.entries(pool ?? {})) if (!listed.has(entry.resource ?? '')) this.unlisted.add(ip);
    let answered = false;
    if (pool) {
      const states = next.status?.ipam?.['release-ips'] ?? {};
      for (const [ip, state] of Object.entries(states)) {
        if (state === 'ready-for-release' || state === 'do-not-release') continue;
        if (!(ip in pool)) {
          if (state === 'released') delete states[ip];
          else if (state === 'marked-for-release') states[ip] = 'do-not-release';
          answered = true;
          continue;
        }
        if (state !== 'marked-for-release') continue;
        states[ip] = this.allocated.has(ip) ? 'do-not-release' : 'ready-for-release';
        answered = true;
      }
    }
    this.own = next;
    if (answered) this.triggerSync();
  }

  /** Required addresses before the agent serves (§2.2). */
  private required(): number {
    const ipam = this.own?.spec.ipam ?? {};
    if ((ipam['min-allocate'] ?? 0) > 0) return ipam['min-allocate']!;
    if ((ipam['pre-allocate'] ?? 0) > 0) return ipam['pre-allocate']!;
    return this.o.healthChecking === false ? 1 : 2;
  }

  /** Whether the agent would serve now: enough addresses, an ENI in status and a VPC CIDR that parses. */
  serving(): boolean {
    const own = this.own;
    if (!own) return false;
    const pool = Object.keys(own.spec.ipam?.pool ?? {});
    const enis = Object.keys(own.status?.['alibaba-cloud']?.enis ?? {});
    const cidr = own.spec['alibaba-cloud']?.['cidr-block'] ?? '';
    return pool.length >= this.required() && enis.length > 0 && /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(cidr);
  }

  /** Waits (checking every `everyMs`, as the agent's 5 s loop) until it serves. */
  async untilServing(timeoutMs = 30_000, everyMs = 100): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.serving()) {
      if (Date.now() > deadline)
        throw new Error(`${this.o.node}: waiting for IPs to become available in CRD-backed allocation pool`);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }

  /**
   * allocateNext: the pool in map order, skipping addresses allocated, in a release handshake,
   * with an owner or of another family. The first candidate's ENI must be in status, or the
   * allocation fails (another address is not tried).
   */
  allocateNext(owner: string): Allocation {
    const own = this.own;
    if (!own) throw new Error('no CiliumNode yet');
    const states = own.status?.ipam?.['release-ips'] ?? {};
    for (const [ip, entry] of Object.entries(own.spec.ipam?.pool ?? {})) {
      if (this.allocated.has(ip) || RELEASE_STATES.has(states[ip] ?? '') || entry.owner) continue;
      if (!/^\d+\.\d+\.\d+\.\d+$/.test(ip)) continue;
      const result = this.allocationResult(ip, entry);
      this.allocated.set(ip, { owner, resource: entry.resource });
      this.triggerSync();
      return result;
    }
    throw new Error(`${this.o.node}: no more IPs available`);
  }

  /** The routing facts of an address, from the status ENI its pool entry names (§2.2). */
  private allocationResult(ip: string, entry: AllocationIP): Allocation {
    const eni = Object.values(this.own?.status?.['alibaba-cloud']?.enis ?? {}).find(
      (e) => e['network-interface-id'] === entry.resource,
    );
    if (!eni) throw new Error(`unable to find ENI ${entry.resource}`);
    const cidr = eni.vswitch.cidr;
    const index = Number(eni.tags?.[ENI_INDEX_TAG]);
    return {
      ip,
      eni: eni['network-interface-id'],
      mac: eni['mac-address'],
      cidr,
      gateway: gatewayOf(cidr),
      interfaceNumber: Number.isInteger(index) ? index : 0,
    };
  }

  release(ip: string): void {
    if (this.allocated.delete(ip)) this.triggerSync();
  }

  /**
   * How many changes to its CiliumNode another writer (the operator) made, for the tests of
   * churn (counted at the end: a watch event may arrive before the answer to the agent's write).
   */
  foreignWrites(): number {
    return [...this.seenVersions].filter((v) => !this.ownVersions.has(v)).length;
  }

  /** foreignWrites() once none of its own writes is in flight (each own version is then known as its own). */
  async settledForeignWrites(): Promise<number> {
    while (this.writesInFlight > 0) await new Promise((r) => setTimeout(r, 10));
    return this.foreignWrites();
  }

  /** The addresses it has handed out. */
  allocations(): ReadonlyMap<string, AllocationIP> {
    return this.allocated;
  }

  /** The CiliumNode as the agent last saw it. */
  view(): CiliumNode | undefined {
    return this.own;
  }

  /** The rate-limited status refresher: at most once per update rate, retried after an error. */
  private triggerSync(): void {
    if (this.stopped || this.syncTimer) return;
    const rate = this.o.updateRateMs ?? 15_000;
    const wait = Math.max(0, this.lastSync + rate - Date.now());
    this.syncTimer = setTimeout(() => {
      this.syncTimer = undefined;
      void this.sync();
    }, wait);
  }

  /** refreshNode: `used` rebuilt from the allocations, the whole status sent with the cached resourceVersion. */
  private async sync(): Promise<void> {
    if (this.stopped || !this.own) return;
    if (this.syncing) return this.triggerSync();
    this.syncing = true;
    this.lastSync = Date.now();
    const node: CiliumNode = structuredClone(this.own);
    const pool = node.spec.ipam?.pool ?? {};
    const used: Record<string, AllocationIP> = {};
    for (const [ip, a] of this.allocated) used[ip] = { ...pool[ip], owner: a.owner, resource: a.resource };
    node.status = { ...node.status, ipam: { ...node.status?.ipam, used } };
    this.writesInFlight++;
    try {
      const written = await this.custom.replaceClusterCustomObjectStatus({
        ...CILIUM_NODES,
        name: this.o.node,
        body: omitEmpty(node),
      });
      this.wrote(written as CiliumNode, node.metadata.resourceVersion);
      this.statusWrites.push(Date.now());
    } catch {
      this.refusedWrites++;
      this.syncing = false;
      return this.triggerSync();
    } finally {
      this.writesInFlight--;
    }
    this.syncing = false;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.syncTimer);
    await this.informer?.stop();
  }
}

/**
 * The stand-in for one node of an ECS world: its instance metadata (what the real agent reads
 * from the metadata service) looked up by the node's host name.
 */
export function standInFor(
  world: Pick<World, 'instances' | 'vpcs'>,
  o: Omit<StandInOptions, 'metadata'>,
): CiliumAgentStandIn {
  const instance = [...world.instances.values()].find((i) => i.hostName === o.node);
  if (!instance) throw new Error(`no instance of the ECS world has host name ${o.node}`);
  return new CiliumAgentStandIn({
    ...o,
    metadata: {
      instanceId: instance.id,
      instanceType: instance.instanceType,
      zoneId: instance.zoneId,
      vpcId: instance.vpcId,
      vpcCidr: world.vpcs.get(instance.vpcId)!.cidr,
    },
  });
}

/** The vSwitch gateway Cilium uses: the address at index -3 of the CIDR (x.x.x.253 of a /24). */
export function gatewayOf(cidr: string): string {
  const [base, bits] = cidr.split('/');
  const n = base!.split('.').reduce((a, b) => a * 256 + Number(b), 0);
  const size = 2 ** (32 - Number(bits));
  const gw = n - (n % size) + size - 3;
  return [24, 16, 8, 0].map((s) => Math.floor(gw / 2 ** s) % 256).join('.');
}
