import type { EcsApi, EniStatus, NetworkInterface } from '../../cloud/index.js';
import { systemClock, type Cancel, type Clock } from '../../clock.js';
import type { Logger } from '../../observability/logger.js';

interface Waiting {
  until: EniStatus | 'gone';
  since: number;
  resolve: (eni: NetworkInterface | undefined) => void;
  reject: (e: Error) => void;
  timeoutAt: number;
}

/**
 * Waits for asynchronous ENI changes (attach, detach, delete) for every node at once: one
 * DescribeNetworkInterfaces call with up to 100 NetworkInterfaceId.N serves all that are
 * waiting, at a short interval that grows while nothing new arrives.
 */
export interface StatePollerOptions {
  api: Pick<EcsApi, 'describeNetworkInterfacesPage'>;
  logger: Logger;
  clock?: Clock;
  minIntervalMs?: number;
  maxIntervalMs?: number;
  /** A wait gives up after this long. */
  timeoutMs?: number;
}

export class StatePoller {
  private readonly waiting = new Map<string, Waiting>();
  private cancelPoll?: Cancel;
  /** When the scheduled poll runs. */
  private pollAt = 0;
  private interval: number;
  private stopped = false;
  private readonly clock: Clock;
  private readonly minIntervalMs: number;
  private readonly maxIntervalMs: number;
  private readonly timeoutMs: number;

  constructor(private readonly options: StatePollerOptions) {
    this.clock = options.clock ?? systemClock;
    this.minIntervalMs = options.minIntervalMs ?? 250;
    this.maxIntervalMs = options.maxIntervalMs ?? 4000;
    this.timeoutMs = options.timeoutMs ?? 5 * 60_000;
    this.interval = this.minIntervalMs;
  }

  /** Resolves with the ENI once it is in `until` (undefined for `gone`); rejects after the timeout. */
  wait(eniId: string, until: EniStatus | 'gone'): Promise<NetworkInterface | undefined> {
    return new Promise((resolve, reject) => {
      this.waiting.get(eniId)?.reject(new Error(`superseded wait for ${eniId}`));
      const now = this.clock.now();
      this.waiting.set(eniId, { until, since: now, resolve, reject, timeoutAt: now + this.timeoutMs });
      this.interval = this.minIntervalMs;
      // A poll the grown interval put far off is brought forward: a new wait is looked at soon.
      if (this.cancelPoll && this.pollAt > now + this.interval) {
        this.cancelPoll();
        this.cancelPoll = undefined;
      }
      this.schedule();
    });
  }

  get size(): number {
    return this.waiting.size;
  }

  private schedule(): void {
    if (this.cancelPoll || this.stopped || this.waiting.size === 0) return;
    this.pollAt = this.clock.now() + this.interval;
    this.cancelPoll = this.clock.after(this.interval, () => void this.poll());
  }

  private async poll(): Promise<void> {
    this.cancelPoll = undefined;
    const ids = [...this.waiting.keys()];
    try {
      for (let i = 0; i < ids.length; i += 100) {
        const batch = ids.slice(i, i + 100);
        const found = new Map(
          (await this.options.api.describeNetworkInterfacesPage({ ids: batch }, { maxResults: 100 })).items.map(
            (e) => [e.id, e] as const,
          ),
        );
        for (const id of batch) {
          const w = this.waiting.get(id);
          if (!w) continue;
          const e = found.get(id);
          if ((w.until === 'gone' && !e) || (e && e.status === w.until)) {
            this.waiting.delete(id);
            w.resolve(e);
          } else if (w.until !== 'gone' && !e) {
            this.waiting.delete(id);
            w.reject(new Error(`ENI ${id} disappeared while waiting for ${w.until}`));
          } else if (w.until === 'InUse' && e?.status === 'Available') {
            // The attach failed and the ENI fell back to Available.
            this.waiting.delete(id);
            w.reject(new Error(`attaching ENI ${id} failed: it is Available again`));
          } else if (this.clock.now() > w.timeoutAt) {
            this.waiting.delete(id);
            w.reject(
              new Error(
                `ENI ${id} did not become ${w.until} within ${this.timeoutMs / 1000} s (it is ${e?.status ?? 'gone'})`,
              ),
            );
          }
        }
      }
    } catch (e) {
      this.options.logger.warn({ err: (e as Error).message, waiting: ids.length }, 'polling ENI states failed');
    }
    this.interval = Math.min(this.maxIntervalMs, Math.round(this.interval * 1.5));
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.cancelPoll?.();
    this.cancelPoll = undefined;
    for (const [id, w] of this.waiting) w.reject(new Error(`stopped while waiting for ENI ${id}`));
    this.waiting.clear();
  }
}
