import type { ENIPool } from '../api/types.js';
import { randomUUID } from 'node:crypto';
import { CloudError, type CreateEniRequest, type EcsApi, type NetworkInterface } from '../cloud/index.js';
import type { Logger } from '../observability/logger.js';
import { CREATOR, TAGS, type CloudState } from './cloud-state.js';
import type { OperatorConfig } from './config.js';
import type { FailureMemory } from './failures.js';
import type { OperatorMetrics } from './metrics.js';
import type { StatePoller } from './poller.js';

export interface LifecycleDeps {
  api: EcsApi;
  cloud: CloudState;
  poller: StatePoller;
  metrics: OperatorMetrics;
  config: OperatorConfig;
  logger: Logger;
  enqueue: (name: string, afterMs?: number) => void;
  event: (pool: ENIPool, type: 'Normal' | 'Warning', reason: string, message: string) => void;
  onCloudError: (pool: ENIPool, e: unknown, vSwitchId?: string) => Promise<void>;
  /** An ENI's IPs reached its pool. */
  published: (name: string) => void;
  failures: FailureMemory;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** No answer came: the call may or may not have been carried out. */
const outcomeUnknown = (e: unknown) => e instanceof CloudError && e.outcomeUnknown;

/**
 * The asynchronous life of an ENI, run in the background so that a reconcile returns at once:
 * create it with all its IPs, attach it and wait for InUse through the shared poller (trusting
 * the cloud over a lost answer), or detach and delete it. It keeps count of the IPs on their
 * way to each node, so that the planner does not ask for them twice.
 */
export class EniLifecycle {
  /** IPs on their way to each node: ENIs being created or attached. */
  private readonly incoming = new Map<string, { enis: number; ips: number }>();
  /** ENIs being attached or waited for. */
  private readonly attaching = new Set<string>();
  /** ENIs this operator removed itself; any other ENI that leaves a pool was removed behind its back. */
  private readonly removedByUs = new Set<string>();
  /** ENIs being detached and deleted: no longer part of their pool, though they still hold a slot. */
  private readonly removing = new Set<string>();
  private stopped = false;

  constructor(private readonly d: LifecycleDeps) {}

  /** Background work issues no further cloud call (the operator is stopping). */
  stop(): void {
    this.stopped = true;
  }

  coming(name: string): { enis: number; ips: number } {
    return this.incoming.get(name) ?? { enis: 0, ips: 0 };
  }

  /** Whether this ENI is already being attached or waited for. */
  tracking(eniId: string): boolean {
    return this.attaching.has(eniId);
  }

  isRemoving(eniId: string): boolean {
    return this.removing.has(eniId);
  }

  /** Whether we removed this ENI (asked once: the answer is forgotten). */
  removedItself(eniId: string): boolean {
    return this.removing.has(eniId) || this.removedByUs.delete(eniId);
  }

  private addIncoming(name: string, enis: number, ips: number): void {
    const c = this.incoming.get(name) ?? { enis: 0, ips: 0 };
    const next = { enis: c.enis + enis, ips: c.ips + ips };
    if (next.enis <= 0 && next.ips <= 0) this.incoming.delete(name);
    else this.incoming.set(name, next);
  }

  /** Create an ENI carrying all its IPs, attach it, and publish it the moment it is InUse. */
  create(pool: ENIPool, vSwitchId: string, ips: number, securityGroupIds: string[]): void {
    const name = pool.metadata.name;
    this.addIncoming(name, 1, ips);
    const clientToken = randomUUID();
    const tags = {
      ...(pool.spec.eniTags ?? {}),
      [TAGS.cluster]: this.d.config.clusterId,
      [TAGS.node]: name,
      [TAGS.creator]: CREATOR,
      [TAGS.createToken]: clientToken,
    };
    void (async () => {
      let eni: NetworkInterface | undefined;
      try {
        if (this.stopped) return;
        eni = await this.createResolved(name, {
          vSwitchId,
          securityGroupIds,
          secondaryIpCount: ips - 1,
          tags,
          clientToken,
          description: `eni-ipam pool ENI of node ${name}`,
        });
        this.d.failures.succeeded(name, 'CreateNetworkInterface');
        this.d.metrics.cloudChanges.inc({ action: 'CreateNetworkInterface' });
        this.d.cloud.took(vSwitchId, ips);
        this.d.cloud.upsert(eni);
        this.d.event(pool, 'Normal', 'CreatedENI', `created ${eni.id} with ${ips} IPs in ${vSwitchId}`);
      } catch (e) {
        this.addIncoming(name, -1, -ips);
        await this.d
          .onCloudError(pool, e, vSwitchId)
          .catch((err) => this.failedInBackground(pool, 'CreateENIFailed', `creating an ENI in ${vSwitchId}`, err));
        return;
      }
      this.attach(pool, eni, { counted: ips });
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
        await sleep(1000 * 2 ** (attempt - 1));
        const [found] = await this.d.api
          .describeNetworkInterfaces({
            vpcId: this.d.config.vpcId,
            tags: { [TAGS.cluster]: this.d.config.clusterId, [TAGS.node]: name, [TAGS.createToken]: req.clientToken },
          })
          .catch(() => []);
        if (found) return found;
      }
      try {
        return await this.d.api.createNetworkInterface(req);
      } catch (e) {
        if (!outcomeUnknown(e)) throw e;
        last = e;
        this.d.logger.warn(
          { node: name, clientToken: req.clientToken, err: (e as Error).message },
          'no answer to CreateNetworkInterface; resolving it by its ClientToken',
        );
      }
    }
    throw last;
  }

  /** A background failure: held back per node and action, said once (Events fold repeats), looked at again after the back-off. */
  private failedInBackground(pool: ENIPool, reason: string, what: string, err: unknown): void {
    const name = pool.metadata.name;
    if (!(err instanceof CloudError)) {
      this.d.event(pool, 'Warning', reason, `${what}: ${(err as Error).message}`);
      this.d.enqueue(name, 2000);
      return;
    }
    if (err.code === 'Client.NotLeading' || err.code === 'Transport.Closed') return;
    const r = this.d.failures.record(name, err, Date.now());
    this.d.logger.warn(
      { node: name, action: err.action, code: err.code, requestId: err.requestId, retryInMs: r.until - Date.now() },
      `${what} failed`,
    );
    this.d.event(pool, 'Warning', reason, `${what}: ${r.message}`);
    this.d.enqueue(name, r.until - Date.now() + 50);
  }

  /**
   * Attaches an ENI and waits for InUse. `counted`: the IPs it carries are already counted as
   * coming (a create counted them); `alreadyAttaching`: no attach call, only the wait.
   */
  attach(pool: ENIPool, eni: NetworkInterface, o: { counted?: number; alreadyAttaching?: boolean } = {}): void {
    const name = pool.metadata.name;
    const carried = o.counted ?? 1 + eni.secondaryIps.length;
    if (o.counted === undefined) this.addIncoming(name, 1, carried);
    this.attaching.add(eni.id);
    const alreadyAttaching = o.alreadyAttaching ?? false;
    void (async () => {
      try {
        if (this.stopped) return;
        let failure: unknown;
        if (!alreadyAttaching) {
          try {
            await this.d.api.attachNetworkInterface(eni.id, pool.spec.instanceID!);
            this.d.failures.succeeded(name, 'AttachNetworkInterface');
            this.d.metrics.cloudChanges.inc({ action: 'AttachNetworkInterface' });
            this.d.cloud.upsert({ ...eni, status: 'Attaching', instanceId: pool.spec.instanceID });
          } catch (e) {
            failure = e;
          }
        }
        // Whatever the call answered, the cloud's word decides: an attach may succeed though its answer was lost.
        const attached = await this.untilAttached(eni.id, pool.spec.instanceID!);
        if (attached) {
          this.d.cloud.upsert(attached);
          this.d.published(name);
          this.d.event(
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
          failure instanceof CloudError &&
          (failure.retryable || failure.code.startsWith('Client.') || failure.code === 'Transport.Closed')
        ) {
          this.failedInBackground(
            pool,
            'AttachFailed',
            `attaching ${eni.id} to ${pool.spec.instanceID} (kept for a later attach)`,
            failure,
          );
          return;
        }
        if (this.d.config.mode !== 'normal') {
          this.d.event(
            pool,
            'Warning',
            'AttachFailed',
            `attaching ${eni.id} to ${pool.spec.instanceID}: ${why}; mode ${this.d.config.mode} keeps it for a later attach`,
          );
          return;
        }
        this.d.event(
          pool,
          'Warning',
          'AttachFailed',
          `attaching ${eni.id} to ${pool.spec.instanceID}: ${why}; deleting it`,
        );
        await this.deleteEni(eni.id).catch((err) =>
          this.d.logger.warn(
            { node: name, eni: eni.id, err: (err as Error).message },
            'could not delete an ENI whose attach failed; GC will',
          ),
        );
        // Held back, so that a node whose attaches keep failing does not create, fail and delete in a loop.
        const cause =
          failure instanceof CloudError
            ? failure
            : new CloudError(
                'AttachNetworkInterface',
                'OperationFailed.AttachFellBack',
                `${eni.id} fell back to Available instead of reaching InUse`,
                undefined,
              );
        await this.d
          .onCloudError(pool, cause)
          .catch((err) => this.failedInBackground(pool, 'AttachFailed', `attaching to ${pool.spec.instanceID}`, err));
      } finally {
        this.addIncoming(name, -1, -carried);
        this.attaching.delete(eni.id);
        this.d.enqueue(name);
      }
    })();
  }

  /** Waits until the ENI is InUse on the instance; undefined if it is not attaching there (any more). */
  private async untilAttached(id: string, instanceId: string): Promise<NetworkInterface | undefined> {
    for (let attempt = 0; attempt < 5 && !this.stopped; attempt++) {
      try {
        const e = await this.d.poller.wait(id, 'InUse');
        if (e?.instanceId === instanceId) return e;
      } catch {
        // Look again before giving up: the poller may have seen a state from before the attach.
      }
      const [now] = await this.d.api.describeNetworkInterfaces({ ids: [id] }).catch(() => []);
      if (now?.instanceId === instanceId && now.status === 'InUse') return now;
      if (!(now?.instanceId === instanceId && now.status === 'Attaching')) return undefined;
    }
    return undefined;
  }

  /** Detach (if attached) and delete an ENI, waiting through the shared poller. */
  async deleteEni(id: string): Promise<void> {
    this.removing.add(id);
    this.removedByUs.add(id);
    try {
      await this.detachAndDelete(id);
    } finally {
      this.removing.delete(id);
    }
  }

  private async detachAndDelete(id: string): Promise<void> {
    const { api, cloud, poller } = this.d;
    let eni = cloud.get(id);
    if (eni?.instanceId && (eni.status === 'InUse' || eni.status === 'Attaching' || eni.status === 'Detaching')) {
      if (eni.status === 'Attaching') await poller.wait(id, 'InUse').catch(() => undefined);
      await api.detachNetworkInterface(id, eni.instanceId).catch((e) => {
        if (!(e instanceof CloudError && e.code === 'InvalidEniId.NotFound')) throw e;
      });
      this.d.metrics.cloudChanges.inc({ action: 'DetachNetworkInterface' });
      eni = await poller.wait(id, 'Available');
    }
    await api.deleteNetworkInterface(id).catch((e) => {
      if (!(e instanceof CloudError && e.code === 'InvalidEniId.NotFound')) throw e;
    });
    this.d.metrics.cloudChanges.inc({ action: 'DeleteNetworkInterface' });
    await poller.wait(id, 'gone');
    cloud.forget(id);
  }

  remove(pool: ENIPool, eni: NetworkInterface): void {
    if (this.removing.has(eni.id)) return;
    void this.deleteEni(eni.id)
      .then(() => this.d.event(pool, 'Normal', 'DeletedENI', `deleted empty ENI ${eni.id}`))
      .catch((e) => this.d.event(pool, 'Warning', 'DeleteENIFailed', `deleting ${eni.id}: ${(e as Error).message}`))
      .finally(() => this.d.enqueue(pool.metadata.name));
  }
}
