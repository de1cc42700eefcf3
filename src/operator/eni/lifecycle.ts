import type { ENIPool } from '../../api/types.js';
import { sleepOn, type Clock } from '../../clock.js';
import { randomUUID } from 'node:crypto';
import {
  CloudError,
  TRANSPORT_CODES,
  type CreateEniRequest,
  type EcsApi,
  type NetworkInterface,
} from '../../cloud/index.js';
import { PREFIX_SIZE } from '../../ipam/prefix.js';
import type { Logger } from '../../observability/logger.js';
import { CREATOR, TAGS, type CloudState } from './cloud-state.js';
import { isShutdown, type CloudFailures } from '../failures.js';
import type { OperatorConfig } from '../config.js';
import { deficitMet, type NodeMemories, type NodeMemory } from '../pool/node-memory.js';
import type { EniWork, EniWorkInFlight, PoolEvents } from '../pool/ports.js';
import type { EniLedger, EniOperation } from './ledger.js';
import type { OperatorMetrics } from '../metrics.js';
import type { StatePoller } from './poller.js';

export interface LifecycleDeps {
  api: EcsApi;
  cloud: CloudState;
  poller: StatePoller;
  metrics: Pick<OperatorMetrics, 'cloudChanges' | 'deficitToPublished'>;
  config: OperatorConfig;
  logger: Logger;
  memory: NodeMemories;
  events: PoolEvents;
  failures: CloudFailures;
  /** Times failures and met deficits, and spaces the retries of a create without an answer. */
  clock: Clock;
  enqueue: (name: string, afterMs?: number) => void;
  /** The record of ENI work in flight; the lifecycle is its only writer. */
  ledger: EniLedger;
}

/** No answer came: the call may or may not have been carried out. */
const outcomeUnknown = (e: unknown) => e instanceof CloudError && e.outcomeUnknown;

/**
 * The asynchronous life of an ENI, run in the background so that a reconcile returns at once:
 * create it with all its IPs, attach it and wait for InUse through the shared poller (trusting
 * the cloud over a lost answer), or detach and delete it. What is in flight is recorded in its
 * ledger, one record per operation, which it alone writes and planning reads (`inFlight`).
 */
export class EniLifecycle implements EniWork {
  private stopped = false;
  private readonly ledger: EniLedger;

  constructor(private readonly deps: LifecycleDeps) {
    this.ledger = deps.ledger;
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

  /** The operations in flight, of one node or all (for tests and debugging). */
  operations(node?: string): readonly Readonly<EniOperation>[] {
    return this.ledger.records(node);
  }

  /** Background work issues no further cloud call (the operator is stopping). */
  stop(): void {
    this.stopped = true;
  }

  private event(pool: ENIPool, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.deps.events.record(pool, type, reason, message);
  }

  /**
   * Create an ENI carrying all its IPs (with `prefix`, as /28s; with `ipv6`, that many IPv6
   * addresses too; with `ipv6Prefixes`, that many /80s), attach it, and publish it the moment it
   * is InUse.
   */
  create(
    pool: ENIPool,
    vSwitchId: string,
    ips: number,
    securityGroupIds: string[],
    o: { prefix?: boolean; ipv6?: number; ipv6Prefixes?: number } = {},
  ): void {
    const { prefix = false, ipv6 = 0, ipv6Prefixes = 0 } = o;
    if (this.stopped) return;
    const name = pool.metadata.name;
    const memory = this.deps.memory.of(name);
    const clientToken = randomUUID();
    // What the ENI brings the pool: its IPv4 pod addresses, or IPv6 ones in an IPv6-only pool.
    const op = this.ledger.beginCreate(name, clientToken, ips || ipv6);
    // Taken from the vSwitch now (its IPs and its own primary), so that other pools planned meanwhile do not count on them too.
    this.deps.cloud.took(vSwitchId, ips + 1);
    const tags = {
      ...(pool.spec.eniTags ?? {}),
      [TAGS.cluster]: this.deps.config.clusterId,
      [TAGS.node]: name,
      [TAGS.creator]: CREATOR,
      [TAGS.createToken]: clientToken,
    };
    void (async () => {
      let eni: NetworkInterface | undefined;
      try {
        eni = await this.createResolved(name, {
          vSwitchId,
          securityGroupIds,
          ...(prefix ? { ipv4PrefixCount: ips / PREFIX_SIZE } : { secondaryIpCount: ips }),
          ...(ipv6 ? { ipv6Count: ipv6 } : {}),
          ...(ipv6Prefixes ? { ipv6PrefixCount: ipv6Prefixes } : {}),
          tags,
          clientToken,
          description: `eni-ipam pool ENI of node ${name}`,
        });
        memory.failures.delete('CreateNetworkInterface');
        this.deps.metrics.cloudChanges.inc({ action: 'CreateNetworkInterface' });
        this.deps.cloud.upsert(eni);
        if (prefix) this.deps.cloud.unfragment(vSwitchId);
        const what =
          (prefix ? `${ips / PREFIX_SIZE} /28 prefixes (${ips} IPs)` : `${ips} IPs`) +
          (eni.ipv6.length ? ` and ${eni.ipv6.length} IPv6 addresses` : '') +
          (eni.ipv6Prefixes.length ? ` and the IPv6 prefix ${eni.ipv6Prefixes.join(', ')}` : '');
        this.event(pool, 'Normal', 'CreatedENI', `created ${eni.id} with ${what} in ${vSwitchId}`);
      } catch (e) {
        this.ledger.end(op);
        await this.failed(pool, 'CreateENIFailed', `creating an ENI in ${vSwitchId}`, e, vSwitchId, prefix);
        return;
      }
      this.ledger.created(op, eni.id);
      this.attachRecorded(pool, eni, memory, op, false);
    })();
  }

  /**
   * Creates the ENI; when no answer came (a timeout, a dropped connection), finds out what
   * happened instead of creating another: the ENI is looked for by its token tag, and the
   * create is repeated with the same ClientToken, which the cloud answers with the same ENI.
   */
  private async createResolved(
    name: string,
    req: CreateEniRequest & { clientToken: string },
  ): Promise<NetworkInterface> {
    let last: unknown;
    for (let attempt = 0; attempt < 5 && !this.stopped; attempt++) {
      if (attempt > 0) {
        await sleepOn(this.deps.clock, 1000 * 2 ** (attempt - 1));
        const [found] = await this.deps.api
          .describeNetworkInterfaces({
            vpcId: this.deps.config.vpcId,
            tags: {
              [TAGS.cluster]: this.deps.config.clusterId,
              [TAGS.node]: name,
              [TAGS.createToken]: req.clientToken,
            },
          })
          .catch(() => []);
        if (found) return found;
      }
      try {
        return await this.deps.api.createNetworkInterface(req);
      } catch (e) {
        if (!outcomeUnknown(e)) throw e;
        last = e;
        this.deps.logger.warn(
          { node: name, clientToken: req.clientToken, err: (e as Error).message },
          'no answer to CreateNetworkInterface; resolving it by its ClientToken',
        );
      }
    }
    throw last;
  }

  /**
   * A background failure: what it means is handled (see CloudFailures); an action held back is
   * said once (Events fold repeats) and looked at again after its back-off.
   */
  private async failed(
    pool: ENIPool,
    reason: string,
    what: string,
    err: unknown,
    vSwitchId?: string,
    prefix = false,
  ): Promise<void> {
    const name = pool.metadata.name;
    if (!(err instanceof CloudError)) {
      this.event(pool, 'Warning', reason, `${what}: ${(err as Error).message}`);
      this.deps.enqueue(name, 2000);
      return;
    }
    if (isShutdown(err)) return;
    const r = await this.deps.failures.respond(pool, err, vSwitchId, prefix).catch((e: Error) => {
      this.deps.logger.warn({ node: name, err: e.message }, `${what} failed, and so did the resync after it`);
      this.deps.enqueue(name, 2000);
      return undefined;
    });
    if (!r?.held) return; // handled, and the pool enqueued, by the response itself
    if (!r.told) this.event(pool, 'Warning', reason, `${what}: ${r.held.message}`);
    this.deps.enqueue(name, r.held.until - this.deps.clock.now() + 50);
  }

  /** Attaches one of our ENIs and waits for InUse; `alreadyAttaching`: no attach call, only the wait. */
  attach(pool: ENIPool, eni: NetworkInterface, o: { alreadyAttaching?: boolean } = {}): void {
    if (this.stopped) return;
    const name = pool.metadata.name;
    // What it brings to pods: its secondaries (its primary is the node's).
    // Pod addresses it brings: IPv4, or IPv6 in an IPv6-only pool (a dual-stack ENI's IPv6 follow its IPv4).
    const op = this.ledger.beginAttach(
      name,
      eni.id,
      Math.max(eni.secondaryIps.length + PREFIX_SIZE * eni.ipv4Prefixes.length, eni.ipv6.length),
    );
    this.attachRecorded(pool, eni, this.deps.memory.of(name), op, o.alreadyAttaching ?? false);
  }

  /** The attach of `op`, a record in the attaching phase; its failures go to the node's memory it started with. */
  private attachRecorded(
    pool: ENIPool,
    eni: NetworkInterface,
    memory: NodeMemory,
    op: EniOperation,
    alreadyAttaching: boolean,
  ): void {
    const name = pool.metadata.name;
    const carried = op.ips;
    void (async () => {
      try {
        if (this.stopped) return;
        let failure: unknown;
        if (!alreadyAttaching) {
          try {
            await this.deps.api.attachNetworkInterface(eni.id, pool.spec.instanceID!);
            memory.failures.delete('AttachNetworkInterface');
            this.deps.metrics.cloudChanges.inc({ action: 'AttachNetworkInterface' });
            this.deps.cloud.upsert({ ...eni, status: 'Attaching', instanceId: pool.spec.instanceID });
          } catch (e) {
            failure = e;
          }
        }
        // Whatever the call answered, the cloud's word decides: an attach may succeed though its answer was lost.
        const attached = await this.untilAttached(eni.id, pool.spec.instanceID!);
        // The cloud could not be read: it proves nothing, so the ENI is kept for a later attach.
        if (attached === 'unknown' && !(failure instanceof CloudError))
          failure = new CloudError(
            'AttachNetworkInterface',
            TRANSPORT_CODES.timeout,
            `the state of ${eni.id} could not be read after its attach`,
            undefined,
          );
        if (attached !== 'unknown' && attached !== 'fell-back') {
          this.deps.cloud.upsert(attached);
          deficitMet(this.deps.memory.of(name), this.deps.clock.now(), this.deps.metrics.deficitToPublished);
          this.event(
            pool,
            'Normal',
            'AttachedENI',
            `${eni.id} is InUse on ${pool.spec.instanceID}; its ${carried} IPs are published`,
          );
          return;
        }
        if (this.stopped) return;
        const why = failure instanceof Error ? failure.message : 'the ENI fell back to Available';
        // Refused for a passing reason (throttled, no answer, not leading): the ENI is fine; attach it later.
        if (
          attached === 'unknown' ||
          (failure instanceof CloudError &&
            (failure.retryable || failure.code.startsWith('Client.') || failure.code === 'Transport.Closed'))
        ) {
          await this.failed(
            pool,
            'AttachFailed',
            `attaching ${eni.id} to ${pool.spec.instanceID} (kept for a later attach)`,
            failure,
          );
          return;
        }
        // Held back, so that a node whose attaches keep failing does not create (or adopt), fail and delete in a loop.
        const cause =
          failure instanceof CloudError
            ? failure
            : new CloudError(
                'AttachNetworkInterface',
                'OperationFailed.AttachFellBack',
                `${eni.id} fell back to Available instead of reaching InUse`,
                undefined,
              );
        if (this.deps.config.mode !== 'normal') {
          const what = `attaching ${eni.id} to ${pool.spec.instanceID} (mode ${this.deps.config.mode} keeps it for a later attach)`;
          await this.failed(pool, 'AttachFailed', what, cause);
          return;
        }
        this.event(
          pool,
          'Warning',
          'AttachFailed',
          `attaching ${eni.id} to ${pool.spec.instanceID}: ${why}; deleting it`,
        );
        // Not coming any more: its addresses are not counted while it is deleted.
        this.ledger.end(op);
        await this.deleteEni(pool, eni.id).catch((err) =>
          this.deps.logger.warn(
            { node: name, eni: eni.id, err: (err as Error).message },
            'could not delete an ENI whose attach failed; GC will',
          ),
        );
        await this.failed(pool, 'AttachFailed', `attaching to ${pool.spec.instanceID}`, cause);
      } finally {
        this.ledger.end(op);
        this.deps.enqueue(name);
      }
    })();
  }

  /**
   * Waits until the ENI is InUse on the instance: the ENI as read then; `fell-back` when a read
   * shows it is not attaching there (any more); `unknown` when the cloud could not be read (a failed
   * read proves nothing: the ENI is not deleted on it).
   */
  private async untilAttached(id: string, instanceId: string): Promise<NetworkInterface | 'fell-back' | 'unknown'> {
    for (let attempt = 0; attempt < 5 && !this.stopped; attempt++) {
      try {
        const e = await this.deps.poller.wait(id, 'InUse');
        if (e?.instanceId === instanceId) return e;
      } catch {
        // Look again before giving up: the poller may have seen a state from before the attach.
      }
      let now: NetworkInterface | undefined;
      try {
        [now] = await this.deps.api.describeNetworkInterfaces({ ids: [id] });
      } catch {
        continue;
      }
      if (now?.instanceId === instanceId && now.status === 'InUse') return now;
      if (!(now?.instanceId === instanceId && now.status === 'Attaching')) return 'fell-back';
    }
    return 'unknown';
  }

  /** Detach (if attached) and delete an ENI, waiting through the shared poller. */
  async deleteEni(pool: ENIPool, id: string): Promise<void> {
    const op = this.ledger.beginRemove(pool.metadata.name, id);
    try {
      await this.detachAndDelete(id);
    } finally {
      this.ledger.removed(op);
    }
  }

  private async detachAndDelete(id: string): Promise<void> {
    const { api, cloud, poller } = this.deps;
    let eni = cloud.get(id);
    if (eni?.instanceId && (eni.status === 'InUse' || eni.status === 'Attaching' || eni.status === 'Detaching')) {
      if (eni.status === 'Attaching') await poller.wait(id, 'InUse').catch(() => undefined);
      await api.detachNetworkInterface(id, eni.instanceId).catch((e) => {
        if (!(e instanceof CloudError && e.code === 'InvalidEniId.NotFound')) throw e;
      });
      this.deps.metrics.cloudChanges.inc({ action: 'DetachNetworkInterface' });
      eni = await poller.wait(id, 'Available');
    }
    await api.deleteNetworkInterface(id).catch((e) => {
      if (!(e instanceof CloudError && e.code === 'InvalidEniId.NotFound')) throw e;
    });
    this.deps.metrics.cloudChanges.inc({ action: 'DeleteNetworkInterface' });
    await poller.wait(id, 'gone');
    cloud.forget(id);
  }

  remove(pool: ENIPool, eni: NetworkInterface): void {
    if (this.ledger.inFlight(pool.metadata.name).removing.has(eni.id)) return;
    void this.deleteEni(pool, eni.id)
      .then(() => this.event(pool, 'Normal', 'DeletedENI', `deleted empty ENI ${eni.id}`))
      .catch((e) => this.event(pool, 'Warning', 'DeleteENIFailed', `deleting ${eni.id}: ${(e as Error).message}`))
      .finally(() => this.deps.enqueue(pool.metadata.name));
  }
}
