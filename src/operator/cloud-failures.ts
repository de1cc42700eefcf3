import type { ENIPool } from '../api/types.js';
import { CloudError } from '../cloud/index.js';
import type { FailureRecord } from '../ipam/failure-record.js';
import type { Logger } from '../observability/logger.js';
import { recordFailure } from './failures.js';
import type { NodeMemories } from './node-memory.js';
import type { CloudView, PoolEvents } from './ports.js';

export interface CloudFailureDeps {
  cloud: CloudView;
  events: PoolEvents;
  memory: NodeMemories;
  logger: Logger;
  now: () => number;
  enqueue: (name: string, afterMs?: number) => void;
}

/** A deposed leader's calls, or a client that is closing: nothing to hold back, nothing to say. */
export const isShutdown = (e: unknown): boolean =>
  e instanceof CloudError && (e.code === 'Client.NotLeading' || e.code === 'Transport.Closed');

/**
 * What a failed change to a node's ENIs means, shared by the reconcile and the background ENI
 * work: an exhausted vSwitch is skipped, an instance limit is resynced, a spent quota is a
 * shortfall; any other failure holds the action back on the node for its back-off.
 */
export class CloudFailures {
  constructor(private readonly d: CloudFailureDeps) {}

  /**
   * Handles the failure: answers the back-off the action is now held to (if any) and whether the
   * user was told already (an Event of its own kind); otherwise the caller says it.
   */
  async respond(pool: ENIPool, e: CloudError, vSwitchId?: string): Promise<FailureResponse> {
    const { cloud, events } = this.d;
    const name = pool.metadata.name;
    if (e.kind === 'vswitch-exhausted' && vSwitchId) {
      cloud.block(vSwitchId);
      const message = `vSwitch ${vSwitchId} has no free addresses (${e.code}); trying the zone's other vSwitches`;
      events.record(pool, 'Warning', 'VSwitchExhausted', message);
      this.d.enqueue(name, 100);
      return { told: true };
    }
    if (e.kind === 'instance-limit') {
      const message = `${e.action} on ${pool.spec.instanceID}: ${e.code}; resyncing the instance`;
      events.record(pool, 'Warning', 'InstanceLimit', message);
      await cloud.resyncInstance(pool.spec.instanceID!, name);
      await cloud.instanceType(pool.spec.instanceType!, { refresh: true });
      // Held back too: a limit the resync does not explain would otherwise be asked for every second.
      return { held: this.hold(pool, e), told: true };
    }
    const held = this.hold(pool, e);
    if (e.kind === 'quota-exceeded') {
      // No retry frees a regional quota soon: the action is held back like a permanent failure.
      this.d.memory.of(name).shortfall = { reason: 'QuotaExceeded', message: held.message };
      events.record(pool, 'Warning', 'QuotaExceeded', held.message);
      return { held, told: true };
    }
    return { held, told: false };
  }

  private hold(pool: ENIPool, e: CloudError): FailureRecord {
    const name = pool.metadata.name;
    const r = recordFailure(this.d.memory.of(name), e, this.d.now());
    const retryInMs = r.until - this.d.now();
    this.d.logger.warn(
      { node: name, action: e.action, code: e.code, requestId: e.requestId, retryInMs },
      'cloud call failed',
    );
    return r;
  }
}

/** What a failure meant: the back-off the action is held to, and whether an Event said so already. */
export interface FailureResponse {
  held?: FailureRecord;
  told: boolean;
}
