import type { Condition } from '../api/types.js';
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
  private timer?: NodeJS.Timeout;
  private staleTimer?: NodeJS.Timeout;
  private writing?: Promise<void>;
  private outage?: Outage;
  private stopped = false;

  constructor(private readonly o: StatusWriterOptions) {}

  /** How long the status has been unsent (0 while writes are taken). */
  unsentMs(now = Date.now()): number {
    return this.outage ? now - this.outage.since : 0;
  }

  /** Something changed: a write follows (after the interval, or the back-off while writes are refused). */
  schedule(): void {
    this.dirty = true;
    if (this.timer || this.writing || this.stopped) return;
    this.arm(this.outage?.delayMs ?? this.o.policy.baseMs);
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.write();
    }, ms);
    this.timer.unref();
  }

  private async write(): Promise<void> {
    // One write at a time (the condition's own write included): a later one must not be overtaken.
    while (this.writing) await this.writing;
    if (!this.dirty) return;
    const planned = this.o.plan();
    if (!planned) return; // stays dirty: the next change (the pool seen, recovery done) schedules again
    this.dirty = false;
    const now = Date.now();
    const conditions = reportedConditions(this.o.serverConditions(), this.outage, now);
    if (!planned.changed && !conditions) return;
    const status = { ...planned.fields, ...(conditions ? { agentConditions: conditions } : {}) };
    this.writing = this.o.patch(status).then(
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
      if (this.dirty && !this.stopped && !this.timer) this.arm(this.outage?.delayMs ?? this.o.policy.baseMs);
    }
  }

  private taken(): void {
    this.o.metrics.statusWrites.inc();
    const ended = this.outage;
    if (!ended) return;
    this.outage = undefined;
    clearTimeout(this.staleTimer);
    this.o.metrics.statusBackoff.set(0);
    const unsentMs = Date.now() - ended.since;
    this.o.logger.info({ node: this.o.node, failures: ended.failures, unsentMs }, 'the pool status is written again');
    if (ended.stale)
      this.o.event(
        'Normal',
        'StatusReported',
        `the agent wrote this pool's status again after ${seconds(unsentMs)} ` + `(${ended.failures} writes refused)`,
      );
  }

  private refused(e: unknown): void {
    const now = Date.now();
    const r = refusalOf(e, now);
    const first = !this.outage;
    const outage = refused(this.outage, r, now, this.o.policy, this.o.random);
    this.outage = outage;
    this.o.metrics.statusWriteFailures.inc({ reason: r.reason });
    this.o.metrics.statusBackoff.set(outage.delayMs / 1000);
    if (shouldLog(outage, now, this.o.policy)) {
      outage.loggedAt = now;
      outage.loggedReason = r.reason;
      this.o.logger.warn(
        {
          node: this.o.node,
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
    if (first && !this.stopped) {
      this.staleTimer = setTimeout(() => void this.goStale(), this.o.policy.staleAfterMs);
      this.staleTimer.unref();
    }
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
    this.o.event(
      'Warning',
      'StatusNotReported',
      `the agent could not write this pool's status (used, releaseAcks, cooling) for ` +
        `${seconds(Date.now() - o.since)}: ${o.last.message}; it keeps serving pods from its own ` +
        `records and retries with back-off up to ${seconds(this.o.policy.maxMs)}`,
    );
    while (this.writing) await this.writing;
    if (this.outage?.since !== o.since || this.stopped) return; // a write was taken meanwhile: the status is current
    const others = (this.o.serverConditions() ?? []).filter((c) => c.type !== STATUS_REPORTED);
    this.writing = this.o.patch({ agentConditions: [...others, staleCondition(o, Date.now())] }).then(
      () => undefined,
      (e: unknown) => {
        this.o.metrics.statusWriteFailures.inc({ reason: refusalOf(e).reason });
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
    clearTimeout(this.timer);
    clearTimeout(this.staleTimer);
    this.timer = undefined;
    await this.write();
  }
}
