import { Gauge, type Registry } from 'prom-client';
import { cloudFailureCause } from './failures.js';

/** Why the operator cannot use the cloud at all, as a condition reason, and what to do. */
export interface CloudOutage {
  reason: string;
  code: string;
  /** The action, code, the cloud's words and the fix; no request id (repeated Events fold). */
  message: string;
  /** When the failures began (ms). */
  since: number;
  failures: number;
}

const RETRY_BASE_MS = 2_000;
const RETRY_CAP_MS = 60_000;

/**
 * Whether this replica can use the ECS OpenAPI, from its fleet-wide reads (the leader's full
 * resyncs, a follower's probes). Until one has succeeded nothing is planned on the cloud cache
 * and the replica is not ready: a rollout with wrong credentials stops there instead of
 * replacing working replicas. While reads fail, pools and classes say why (`Degraded`), and the
 * reads are retried with a growing, jittered delay.
 */
export class CloudHealth {
  private verifiedOnce = false;
  private resyncedOnce = false;
  private failing?: CloudOutage;
  private readonly up: Gauge;
  private readonly errorInfo: Gauge<'code' | 'reason'>;

  constructor(
    registry: Registry,
    private readonly credentialsSource: string,
    private readonly now: () => number,
    private readonly random: () => number = Math.random,
  ) {
    this.up = new Gauge({
      name: 'eni_ipam_cloud_up',
      help: 'Whether the last fleet-wide OpenAPI read of this replica (the leader: its ENI resync; a follower: a probe) succeeded.',
      registers: [registry],
    });
    this.errorInfo = new Gauge({
      name: 'eni_ipam_cloud_error_info',
      help: 'Set to 1, labelled with the cloud code and the condition reason, while fleet-wide OpenAPI reads fail.',
      labelNames: ['code', 'reason'],
      registers: [registry],
    });
    this.up.set(0);
  }

  /**
   * A fleet-wide read succeeded; `resync`: a full resync, so the cloud cache is a picture of the
   * cloud that can be planned on. Answers whether this ends an outage or is the first such read.
   */
  succeeded(o: { resync: boolean }): boolean {
    const news = this.failing !== undefined || !this.verifiedOnce || (o.resync && !this.resyncedOnce);
    this.verifiedOnce = true;
    if (o.resync) this.resyncedOnce = true;
    this.failing = undefined;
    this.up.set(1);
    this.errorInfo.reset();
    return news;
  }

  /** A fleet-wide read failed; answers the outage as it stands now. */
  failed(e: unknown): CloudOutage {
    const cause = cloudFailureCause(e, this.credentialsSource);
    const changed = this.failing?.code !== cause.code || this.failing.message !== cause.message;
    this.failing = {
      ...cause,
      since: this.failing?.since ?? this.now(),
      failures: (this.failing?.failures ?? 0) + 1,
    };
    this.up.set(0);
    if (changed) this.errorInfo.reset();
    this.errorInfo.set({ code: cause.code, reason: cause.reason }, 1);
    return this.failing;
  }

  /** Some fleet-wide read has succeeded since start: the credentials and the endpoint work (readiness). */
  get verified(): boolean {
    return this.verifiedOnce;
  }

  /** A full resync has succeeded since start: the cloud cache is a picture of the cloud. */
  get resynced(): boolean {
    return this.resyncedOnce;
  }

  get current(): CloudOutage | undefined {
    return this.failing;
  }

  /** Why fleet-wide reads fail (the Degraded condition of pools and classes); undefined while the cloud answers. */
  outage(): { reason: string; message: string } | undefined {
    return this.failing && { reason: this.failing.reason, message: this.failing.message };
  }

  /** A failed read as a Degraded condition's reason and a message naming the fix. */
  causeOf(e: unknown): { reason: string; message: string } {
    const { reason, message } = cloudFailureCause(e, this.credentialsSource);
    return { reason, message };
  }

  /** When to read again after a failure: 2 s doubling to a minute, with jitter (half to the whole). */
  retryDelayMs(): number {
    const n = Math.max(1, this.failing?.failures ?? 1);
    const ceiling = Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** (n - 1));
    return Math.round(ceiling * (0.5 + this.random() / 2));
  }
}
