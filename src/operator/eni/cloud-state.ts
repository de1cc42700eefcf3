import { systemClock } from '../../clock.js';
import type { EcsApi, InstanceTypeLimits, NetworkInterface, SecurityGroup, VSwitch } from '../../cloud/index.js';
import { recordFree, type FreeSample } from '../../ipam/headroom.js';
import { detachStrings } from '../../kube/detach.js';
import type { Logger } from '../../observability/logger.js';

/** The tag keys every ENI the operator creates carries. */
export const TAGS = {
  cluster: 'eni-ipam.io/cluster',
  node: 'eni-ipam.io/node',
  creator: 'eni-ipam.io/creator',
  createToken: 'eni-ipam.io/create-token',
} as const;
export const CREATOR = 'eni-ipam-operator';
/** How long a vSwitch that refused a /28 is not asked for one again. */
export const FRAGMENTED_MS = 10 * 60_000;

/**
 * What the operator knows of the cloud: ENIs of the VPC (a full paged resync, then per-instance
 * refreshes after each change), vSwitches and security groups (refreshed when stale or after
 * an exhaustion), and instance-type limits (fetched on a miss). Reconcilers read it; only
 * this class calls the describe actions.
 */
export class CloudState {
  private readonly byId = new Map<string, NetworkInterface>();
  // Indexes, so that a reconcile does not scan every ENI of the VPC (thousands at scale).
  private readonly byInstance = new Map<string, Set<string>>();
  private readonly byNode = new Map<string, Set<string>>();
  // When each ENI entry last changed (a sequence number), so a full resync does not undo newer news.
  private seq = 0;
  private readonly changed = new Map<string, number>();
  private vSwitchList: VSwitch[] = [];
  private vSwitchesAt = 0;
  /** Each listed vSwitch's free count as described lately, for its headroom forecast. */
  private readonly freeHistory = new Map<string, FreeSample[]>();
  private sgList: SecurityGroup[] = [];
  private sgAt = 0;
  private readonly types = new Map<string, InstanceTypeLimits>();
  /** vSwitches that answered IpNotEnough, until their free count is refreshed. */
  readonly blocked = new Map<string, number>();
  /**
   * vSwitches that refused a /28 prefix while they had the addresses (fragmented), and since
   * when: no prefix is planned there for FRAGMENTED_MS (a free count cannot show fragmentation).
   */
  private readonly fragmented = new Map<string, number>();

  constructor(
    private readonly api: EcsApi,
    private readonly vpcId: string,
    private readonly clusterId: string,
    private readonly logger: Logger,
    private readonly ttlMs = 60_000,
    private readonly now: () => number = systemClock.now,
  ) {}

  /**
   * Every ENI of the VPC, in pages of 500; answers what it read. Nothing is changed unless the
   * whole listing was read (a page that fails or looks wrong throws first). The listing takes a
   * while, and an ENI created, changed or deleted meanwhile (an answer the operator got) is newer
   * than what the pages say, so it is kept as it is. An ENI the listing does not show is
   * forgotten only once a read by its id says it is gone: absence in a list is no proof.
   */
  async fullResync(): Promise<{ enis: number; pages: number }> {
    const started = this.seq;
    const all: NetworkInterface[] = [];
    let pages = 0;
    for await (const page of this.api.networkInterfacePages({ vpcId: this.vpcId })) {
      pages++;
      all.push(...page);
    }
    const newer = (id: string) => (this.changed.get(id) ?? -1) > started;
    const listed = new Set(all.map((e) => e.id));
    const unlisted = [...this.byId.keys()].filter((id) => !listed.has(id) && !newer(id));
    const gone = await this.confirmGone(unlisted, newer);
    for (const id of gone) if (!newer(id)) this.forget(id);
    for (const e of all) if (!newer(e.id)) this.upsert(e);
    for (const id of [...this.changed.keys()]) if (!this.byId.has(id) && !newer(id)) this.changed.delete(id);
    this.logger.info({ enis: all.length, pages, confirmedGone: gone.length }, 'full ENI resync done');
    return { enis: all.length, pages };
  }

  /** The instance's ENIs and this node's own unattached ones, after a change. */
  async resyncInstance(instanceId: string | undefined, node: string): Promise<void> {
    // As for a full resync: an answer the operator got while the describes ran is newer than them.
    const started = this.seq;
    const newer = (id: string) => (this.changed.get(id) ?? -1) > started;
    const [attached, ours] = await Promise.all([
      instanceId ? this.api.describeNetworkInterfaces({ instanceId }) : [],
      this.api.describeNetworkInterfaces({
        vpcId: this.vpcId,
        tags: { [TAGS.cluster]: this.clusterId, [TAGS.node]: node },
      }),
    ]);
    const seen = new Set([...attached, ...ours].map((e) => e.id));
    const known = [...(instanceId ? this.enisOfInstance(instanceId) : []), ...this.ownedBy(node)];
    const unseen = [...new Set(known.map((e) => e.id))].filter((id) => !seen.has(id) && !newer(id));
    const gone = await this.confirmGone(unseen, newer);
    for (const id of gone) if (!newer(id)) this.forget(id);
    for (const e of [...attached, ...ours]) if (!newer(e.id)) this.upsert(e);
  }

  /**
   * Of ENIs a listing did not show, those that a read by their ids says are gone; the others are
   * taken in as that read shows them (detached elsewhere, say), unless newer news came meanwhile.
   */
  private async confirmGone(ids: string[], newer: (id: string) => boolean): Promise<string[]> {
    if (!ids.length) return [];
    const found = await this.api.describeNetworkInterfaces({ ids });
    const present = new Set(found.map((e) => e.id));
    for (const e of found) if (!newer(e.id)) this.upsert(e);
    return ids.filter((id) => !present.has(id));
  }

  private nodeOf(e: NetworkInterface): string | undefined {
    return e.tags[TAGS.cluster] === this.clusterId ? e.tags[TAGS.node] : undefined;
  }

  get(id: string): NetworkInterface | undefined {
    return this.byId.get(id);
  }

  upsert(e: NetworkInterface): void {
    detachStrings(e); // before its id becomes a key
    this.forget(e.id);
    this.byId.set(e.id, e);
    this.changed.set(e.id, ++this.seq);
    const add = (m: Map<string, Set<string>>, k: string | undefined) =>
      k && (m.get(k) ?? m.set(k, new Set()).get(k)!).add(e.id);
    add(this.byInstance, e.instanceId);
    add(this.byNode, this.nodeOf(e));
  }

  forget(id: string): void {
    const e = this.byId.get(id);
    if (!e) return;
    this.changed.set(id, ++this.seq);
    this.byId.delete(id);
    if (e.instanceId) this.byInstance.get(e.instanceId)?.delete(id);
    const node = this.nodeOf(e);
    if (node) this.byNode.get(node)?.delete(id);
  }

  private lookup(ids: Set<string> | undefined): NetworkInterface[] {
    return [...(ids ?? [])].map((id) => this.byId.get(id)!);
  }

  /** ENIs attached (or attaching) to an instance, its primary included. */
  enisOfInstance(instanceId: string): NetworkInterface[] {
    return this.lookup(this.byInstance.get(instanceId));
  }

  /** ENIs this cluster created for a node, attached or not. */
  ownedBy(node: string): NetworkInterface[] {
    return this.lookup(this.byNode.get(node));
  }

  /** ENIs this cluster created, for garbage collection. */
  owned(): NetworkInterface[] {
    return [...this.byNode.values()].flatMap((ids) => this.lookup(ids));
  }

  /** The vSwitch list as last described (no call). */
  get knownVSwitches(): readonly VSwitch[] {
    return this.vSwitchList;
  }

  async vSwitches(o: { refresh?: boolean } = {}): Promise<VSwitch[]> {
    if (o.refresh || this.now() - this.vSwitchesAt > this.ttlMs) {
      this.vSwitchList = await this.api.describeVSwitches({ vpcId: this.vpcId });
      this.vSwitchesAt = this.now();
      this.blocked.clear();
      this.recordFree(this.vSwitchList, this.vSwitchesAt);
    }
    return this.vSwitchList;
  }

  /**
   * A describe's free counts join the histories; a vSwitch it no longer lists loses its own.
   * Only describes count: what took() subtracts between them is our own estimate, and block()'s
   * zero a guess from one refusal.
   */
  private recordFree(listed: readonly VSwitch[], at: number): void {
    const ids = new Set(listed.map((v) => v.id));
    for (const id of [...this.freeHistory.keys()]) if (!ids.has(id)) this.freeHistory.delete(id);
    for (const v of listed)
      this.freeHistory.set(v.id, recordFree(this.freeHistory.get(v.id) ?? [], { at, free: v.availableIpCount }));
  }

  /** A vSwitch's free count at its recent describes, oldest first (none for one no longer listed). */
  freeHistoryOf(vSwitchId: string): readonly FreeSample[] {
    return this.freeHistory.get(vSwitchId) ?? [];
  }

  /** Marks a vSwitch fragmented: no prefix is planned in it for a while. */
  fragment(vSwitchId: string): void {
    this.fragmented.set(vSwitchId, this.now());
  }

  /** A vSwitch gave a /28: whole enough again. */
  unfragment(vSwitchId: string): void {
    this.fragmented.delete(vSwitchId);
  }

  /** Whether a vSwitch refused a prefix lately (within FRAGMENTED_MS). */
  isFragmented(vSwitchId: string): boolean {
    const since = this.fragmented.get(vSwitchId);
    if (since === undefined) return false;
    if (this.now() - since < FRAGMENTED_MS) return true;
    this.fragmented.delete(vSwitchId);
    return false;
  }

  /** Marks a vSwitch exhausted: it is skipped until the next refresh of the vSwitch list. */
  block(vSwitchId: string): void {
    this.blocked.set(vSwitchId, this.now());
    const v = this.vSwitchList.find((x) => x.id === vSwitchId);
    if (v) v.availableIpCount = 0;
    // Come back to it after a shortened refresh.
    this.vSwitchesAt = Math.min(this.vSwitchesAt, this.now() - this.ttlMs / 2);
  }

  /** Accounts addresses taken from a vSwitch by our own calls, until the next refresh. */
  took(vSwitchId: string, n: number): void {
    const v = this.vSwitchList.find((x) => x.id === vSwitchId);
    if (v) v.availableIpCount = Math.max(0, v.availableIpCount - n);
  }

  async securityGroups(o: { refresh?: boolean } = {}): Promise<SecurityGroup[]> {
    if (o.refresh || this.now() - this.sgAt > this.ttlMs) {
      this.sgList = await this.api.describeSecurityGroups({ vpcId: this.vpcId });
      this.sgAt = this.now();
    }
    return this.sgList;
  }

  /** Limits of an instance type, fetched on a miss (never a region-wide list). */
  async instanceType(id: string, o: { refresh?: boolean } = {}): Promise<InstanceTypeLimits | undefined> {
    if (o.refresh || !this.types.has(id)) {
      const [t] = await this.api.describeInstanceTypes([id]);
      if (t) this.types.set(id, t);
    }
    return this.types.get(id);
  }
}
