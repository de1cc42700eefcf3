import type { Condition } from '../api/types.js';
import type { Cancel, Clock } from '../clock.js';
import type { Logger } from '../observability/logger.js';
import { refusalOf } from '../kube/refusal.js';
import type { AgentMetrics } from './metrics.js';
import {
  STATUS_REPORTED,
  seconds,
  refused,
  reportedConditions,
  shouldLog,
  staleCondition,
  type Outage,
  type StatusBackoffPolicy,
} from './status-outage.js';

/** The agent's own status fields as they should be now, or undefined when it must not write yet. */
export interface PlannedStatus {
  /** The merge patch of the agent's fields (used, releaseAcks, cooling). */
  fields: Record<string, unknown>;
  /** Whether they differ from what the server holds or what was last written. */
  changed: boolean;
  /** Called once the server took them. */
  written(): void;
}

export interface StatusWriterOptions {
  node: string;
  clock: Clock;
  policy: StatusBackoffPolicy;
  random: () => number;
  logger: Logger;
  metrics: AgentMetrics;
  plan(): PlannedStatus | undefined;
  /** The agent's conditions on the server now (status.agentConditions of the pool it watches). */
  serverConditions(): Condition[] | undefined;
  /** One merge patch of the pool's status subresource. */
  patch(status: Record<string, unknown>): Promise<unknown>;
  /** Records an Event on the pool (another resource: it may get through when status writes do not). */
  event(type: 'Normal' | 'Warning', reason: string, message: string): void;
}

/**
 * Writes the agent's part of the pool status, coalesced: one write soon after a change, then at
 * most one per interval; changes made meanwhile go together in the next write. A refused write is
 * retried with jittered exponential back-off (the server's Retry-After a floor), reset by the
 * first write taken; refusals are counted by reason, the current back-off is a gauge, a log line
 * names the reason when it changes (and once a minute while it lasts), and once the status has
 * been unsent for staleAfterMs a Warning Event and the condition StatusReported say so.
 */
export class StatusWriter {
  private dirty = false;
  private cancelWrite?: Cancel;
  private cancelStale?: Cancel;
  private writing?: Promise<void>;
  private outage?: Outage;
  private stopped = false;

  constructor(private readonly options: StatusWriterOptions) {}

  /** How long the status has been unsent (0 while writes are taken). */
  unsentMs(now = this.options.clock.now()): number {
    return this.outage ? now - this.outage.since : 0;
  }

  /** Something changed: a write follows (after the interval, or the back-off while writes are refused). */
  schedule(): void {
    this.dirty = true;
    if (this.cancelWrite || this.writing || this.stopped) return;
    this.arm(this.outage?.delayMs ?? this.options.policy.baseMs);
  }

  private arm(ms: number): void {
    this.cancelWrite = this.options.clock.after(ms, () => {
      this.cancelWrite = undefined;
      void this.write();
    });
  }

  private async write(): Promise<void> {
    // One write at a time (the condition's own write included): a later one must not be overtaken.
    while (this.writing) await this.writing;
    if (!this.dirty) return;
    const planned = this.options.plan();
    if (!planned) return; // stays dirty: the next change (the pool seen, recovery done) schedules again
    this.dirty = false;
    const now = this.options.clock.now();
    const conditions = reportedConditions(this.options.serverConditions(), this.outage, now);
    if (!planned.changed && !conditions) return;
    const status = { ...planned.fields, ...(conditions ? { agentConditions: conditions } : {}) };
    this.writing = this.options.patch(status).then(
      () => {
        planned.written();
        this.taken();
      },
      (e: unknown) => {
        this.dirty = true;
        this.refused(e);
      },
    );
    try {
      await this.writing;
    } finally {
      this.writing = undefined;
      if (this.dirty && !this.stopped && !this.cancelWrite)
        this.arm(this.outage?.delayMs ?? this.options.policy.baseMs);
    }
  }

  private taken(): void {
    this.options.metrics.statusWrites.inc();
    const ended = this.outage;
    if (!ended) return;
    this.outage = undefined;
    this.cancelStale?.();
    this.options.metrics.statusBackoff.set(0);
    const unsentMs = this.options.clock.now() - ended.since;
    this.options.logger.info(
      { node: this.options.node, failures: ended.failures, unsentMs },
      'the pool status is written again',
    );
    if (ended.stale)
      this.options.event(
        'Normal',
        'StatusReported',
        `the agent wrote this pool's status again after ${seconds(unsentMs)} ` + `(${ended.failures} writes refused)`,
      );
  }

  private refused(e: unknown): void {
    const now = this.options.clock.now();
    const r = refusalOf(e, now);
    const first = !this.outage;
    const outage = refused(this.outage, r, now, this.options.policy, this.options.random);
    this.outage = outage;
    this.options.metrics.statusWriteFailures.inc({ reason: r.reason });
    this.options.metrics.statusBackoff.set(outage.delayMs / 1000);
    if (shouldLog(outage, now, this.options.policy)) {
      outage.loggedAt = now;
      outage.loggedReason = r.reason;
      this.options.logger.warn(
        {
          node: this.options.node,
          reason: r.reason,
          code: r.code,
          err: r.message,
          failures: outage.failures,
          retryInMs: Math.round(outage.delayMs),
          ...(r.retryAfterMs === undefined ? {} : { retryAfterMs: r.retryAfterMs }),
          unsentMs: now - outage.since,
        },
        'could not write the pool status; retrying with back-off',
      );
    }
    if (first && !this.stopped)
      this.cancelStale = this.options.clock.after(this.options.policy.staleAfterMs, () => void this.goStale());
  }

  /**
   * Unsent too long: a Warning Event (Events are another resource: a 403 on enipools/status
   * leaves them alone), and one small write of the condition alone, which lands when the server
   * refuses the full write for what it carries, or only some of the writes.
   */
  private async goStale(): Promise<void> {
    const o = this.outage;
    if (!o || o.stale || this.stopped) return;
    o.stale = true;
    this.options.event(
      'Warning',
      'StatusNotReported',
      `the agent could not write this pool's status (used, releaseAcks, cooling) for ` +
        `${seconds(this.options.clock.now() - o.since)}: ${o.last.message}; it keeps serving pods from its own ` +
        `records and retries with back-off up to ${seconds(this.options.policy.maxMs)}`,
    );
    while (this.writing) await this.writing;
    if (this.outage?.since !== o.since || this.stopped) return; // a write was taken meanwhile: the status is current
    const others = (this.options.serverConditions() ?? []).filter((c) => c.type !== STATUS_REPORTED);
    this.writing = this.options
      .patch({ agentConditions: [...others, staleCondition(o, this.options.clock.now())] })
      .then(
        () => undefined,
        (e: unknown) => {
          this.options.metrics.statusWriteFailures.inc({ reason: refusalOf(e, this.options.clock.now()).reason });
        },
      );
    try {
      await this.writing;
    } finally {
      this.writing = undefined;
    }
  }

  /** Stops retrying; one last write of what is pending, if anything is. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelWrite?.();
    this.cancelStale?.();
    this.cancelWrite = undefined;
    await this.write();
  }
}
