import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.js';
import { apiErrorMessage, isConflict, isNotFound } from './errors.js';

export interface LeaderElectionOptions {
  kc: KubeConfig;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationSeconds?: number;
  renewDeadlineSeconds?: number;
  retryPeriodSeconds?: number;
  logger: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

/** Why a leader stopped leading (the `reason` field of its log line). */
export type StepDownReason = 'other-holder' | 'conflict' | 'renew-deadline';

/** What one acquire-or-renew attempt found. */
type Attempt = 'held' | 'not-held';

/**
 * Lease-based leader election after client-go's tools/leaderelection: acquire or renew every
 * retry period; another holder's lease counts as valid until leaseDuration has passed on
 * *our* clock since we saw its record change (clock skew between nodes does not matter);
 * updates carry the read resourceVersion, so of two candidates only one wins; stop() releases
 * the lease. A leader steps down the moment it reads the Lease held by another identity
 * (whatever its renewTime) or loses a write conflict on it: someone else may be leading
 * already. Only errors that say nothing about the holder (timeouts, 5xx, connections) keep it
 * leading, until its renew deadline.
 */
export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly lease: number;
  private readonly renewDeadline: number;
  private readonly retry: number;
  private observed?: { record: string; at: number };
  /** When the last successful acquire or renew was *sent* (never later than the server's renewTime). */
  private lastRenew = 0;
  private timer?: NodeJS.Timeout;
  private watchdog?: NodeJS.Timeout;
  private running = false;
  leader = false;

  constructor(private readonly options: LeaderElectionOptions) {
    this.api = options.kc.makeApiClient(CoordinationV1Api);
    this.lease = (options.leaseDurationSeconds ?? 15) * 1000;
    this.renewDeadline = (options.renewDeadlineSeconds ?? 10) * 1000;
    this.retry = (options.retryPeriodSeconds ?? 2) * 1000;
    if (this.renewDeadline <= this.retry * 1.2)
      throw new Error('the renew deadline must be longer than 1.2 retry periods');
    if (this.lease <= this.renewDeadline) throw new Error('the lease duration must be longer than the renew deadline');
    // The Lease holds whole seconds (an int32): the API server refuses anything else.
    if (!Number.isInteger(this.lease / 1000)) throw new Error('the lease duration must be whole seconds');
  }

  start(): void {
    this.running = true;
    // Steps down on time even while an attempt hangs (a black-holed connection never answers).
    this.watchdog = setInterval(() => this.checkDeadline(), Math.max(50, this.retry / 4));
    this.watchdog.unref();
    void this.tick();
  }

  /**
   * Whether this candidate holds a lease no one else can hold yet: it leads, and its last
   * successful renew was sent less than the renew deadline ago (the lease itself runs longer,
   * so a follower cannot have taken over). Checked right before every mutating cloud call.
   */
  holdsFreshLease(now = monotonic()): boolean {
    return this.leader && now - this.lastRenew < this.renewDeadline;
  }

  private checkDeadline(): void {
    if (this.leader && !this.holdsFreshLease())
      this.stepDown('renew-deadline', 'lost leadership: could not renew the lease in time', {
        sinceRenewMs: Math.round(monotonic() - this.lastRenew),
      });
  }

  /** Stops leading at once (holdsFreshLease() is false from here on) and says why. */
  private stepDown(reason: StepDownReason, message: string, detail: Record<string, unknown> = {}): void {
    if (!this.leader) return;
    this.leader = false;
    this.options.logger.warn({ lease: this.options.name, identity: this.options.identity, reason, ...detail }, message);
    this.options.onStoppedLeading();
  }

  private async tick(): Promise<void> {
    if (!this.running) return;
    let attempt: Attempt = 'not-held';
    const sentAt = monotonic();
    // Every attempt has a deadline: the time left to renew, or one retry period for a candidate.
    const deadline = this.leader
      ? Math.max(1, this.lastRenew + this.renewDeadline - sentAt)
      : Math.max(this.retry, 1000);
    try {
      attempt = await withDeadline(this.tryAcquireOrRenew(), deadline, 'lease update');
    } catch (e) {
      this.options.logger.warn(
        { lease: this.options.name, err: apiErrorMessage(e) },
        'leader election: lease update failed',
      );
    }
    if (attempt === 'held' && this.running) {
      this.lastRenew = sentAt;
      if (!this.leader) {
        this.leader = true;
        this.options.logger.info({ lease: this.options.name, identity: this.options.identity }, 'became leader');
        this.options.onStartedLeading();
      }
    }
    this.checkDeadline();
    if (this.running) {
      const jitter = this.leader ? 0 : Math.random() * 0.2 * this.retry;
      this.timer = setTimeout(() => void this.tick(), this.retry + jitter);
    }
  }

  private async tryAcquireOrRenew(): Promise<Attempt> {
    const { namespace, name, identity } = this.options;
    const now = Date.now();
    let current: V1Lease;
    try {
      current = await this.api.readNamespacedLease({ name, namespace });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      const body: V1Lease = {
        metadata: { name, namespace },
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds: this.lease / 1000,
          acquireTime: new V1MicroTime(now),
          renewTime: new V1MicroTime(now),
          leaseTransitions: 0,
        },
      };
      try {
        await this.api.createNamespacedLease({ namespace, body });
        return 'held';
      } catch (err) {
        if (!isConflict(err)) throw err;
        // Someone created it between our read and our create: another replica holds it now.
        this.stepDown('conflict', 'lost leadership: another replica created the lease first');
        return 'not-held';
      }
    }
    const spec = current.spec ?? {};
    const record = JSON.stringify([spec.holderIdentity, String(spec.renewTime ?? ''), spec.leaseTransitions]);
    // Measured when the record was seen, on a clock that no NTP step moves.
    if (this.observed?.record !== record) this.observed = { record, at: monotonic() };
    const holder = spec.holderIdentity ?? '';
    const heldByOther = holder !== '' && holder !== identity;
    if (heldByOther && this.leader) {
      this.stepDown('other-holder', 'lost leadership: the lease is held by another holder', {
        holder,
        renewTime: spec.renewTime instanceof Date ? spec.renewTime.toISOString() : String(spec.renewTime ?? ''),
      });
      return 'not-held';
    }
    const duration = (spec.leaseDurationSeconds ?? this.lease / 1000) * 1000;
    if (heldByOther && monotonic() < this.observed.at + duration) return 'not-held';
    const mine = holder === identity;
    const next: V1Lease = {
      ...current,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: this.lease / 1000,
        renewTime: new V1MicroTime(now),
        acquireTime:
          mine && spec.acquireTime ? new V1MicroTime(Date.parse(String(spec.acquireTime))) : new V1MicroTime(now),
        leaseTransitions: mine ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
      },
    };
    try {
      await this.api.replaceNamespacedLease({ name, namespace, body: next });
    } catch (e) {
      if (!isConflict(e)) throw e;
      // The Lease changed since we read it: whoever wrote it may lead now.
      this.stepDown('conflict', 'lost leadership: the lease update lost a conflict');
      return 'not-held';
    }
    if (!mine) this.options.logger.info({ lease: name, from: holder || '(none)', to: identity }, 'took over the lease');
    return 'held';
  }

  /** Stops campaigning; `release: false` lets the lease run out instead of handing it over at once. */
  async stop(o: { release?: boolean } = {}): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    clearInterval(this.watchdog);
    if (!this.leader) return;
    this.leader = false;
    try {
      if (o.release ?? true) await withDeadline(this.giveUp(), this.renewDeadline, 'giving the lease up');
    } catch (e) {
      this.options.logger.warn({ lease: this.options.name, err: apiErrorMessage(e) }, 'could not release the lease');
    }
    this.options.onStoppedLeading();
  }

  private async giveUp(): Promise<void> {
    const current = await this.api.readNamespacedLease({ name: this.options.name, namespace: this.options.namespace });
    if (current.spec?.holderIdentity !== this.options.identity) return;
    const acquireTime = current.spec.acquireTime
      ? new V1MicroTime(Date.parse(String(current.spec.acquireTime)))
      : undefined;
    await this.api.replaceNamespacedLease({
      name: this.options.name,
      namespace: this.options.namespace,
      body: {
        ...current,
        spec: {
          ...current.spec,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          renewTime: new V1MicroTime(Date.now()),
          acquireTime,
        },
      },
    });
  }
}

/** Local durations are measured on a monotonic clock; only the Lease's own times are wall-clock. */
const monotonic = (): number => performance.now();

/** The promise, or a rejection naming what took too long once `ms` have passed. */
function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer from the API server within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
