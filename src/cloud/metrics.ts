import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { RETRYABLE_CODES, TRANSPORT_CODES, isRetryableCode } from './errors.js';
import type { ActionLimiters } from './limits.js';

// The codes a retry is counted under (see isRetryableCode), given a series from the start.
const RETRIED_CODES = [...RETRYABLE_CODES, ...Object.values(TRANSPORT_CODES)].filter(isRetryableCode);

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** Every OpenAPI call, measured per action. Labels carry action names and codes only. */
export class OpenApiMetrics {
  readonly requests: Counter<'action' | 'code'>;
  readonly duration: Histogram<'action'>;
  readonly limiterWait: Histogram<'action'>;
  readonly throttled: Counter<'action'>;
  readonly retries: Counter<'action' | 'code'>;
  readonly inFlight: Gauge<'action'>;

  constructor(registry: Registry, limiters: ActionLimiters) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'eni_ipam_openapi_requests_total',
      help: 'OpenAPI requests sent, by action and result code (OK on success).',
      labelNames: ['action', 'code'],
      registers,
    });
    this.duration = new Histogram({
      name: 'eni_ipam_openapi_request_duration_seconds',
      help: 'Time from sending an OpenAPI request to its answer, by action.',
      labelNames: ['action'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.limiterWait = new Histogram({
      name: 'eni_ipam_openapi_limiter_wait_seconds',
      help: "Time a call waited for its action's rate limiter before it was sent.",
      labelNames: ['action'],
      buckets: [0, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 900],
      registers,
    });
    this.throttled = new Counter({
      name: 'eni_ipam_openapi_throttled_total',
      help: 'OpenAPI answers that were a throttling code (Throttling, Throttling.User, Throttling.Api).',
      labelNames: ['action'],
      registers,
    });
    this.retries = new Counter({
      name: 'eni_ipam_openapi_retries_total',
      help: 'OpenAPI calls retried, by action and the code that caused the retry.',
      labelNames: ['action', 'code'],
      registers,
    });
    this.inFlight = new Gauge({
      name: 'eni_ipam_openapi_in_flight',
      help: 'OpenAPI requests sent and not yet answered.',
      labelNames: ['action'],
      registers,
    });
    new Gauge({
      name: 'eni_ipam_openapi_limiter_tokens',
      help: "Calls an action's limiter would let through at once right now (tokens left in its bucket).",
      labelNames: ['action'],
      registers,
      async collect() {
        this.reset();
        for (const [action, n] of Object.entries(await limiters.tokensLeft())) this.set({ action }, n);
      },
    });
    const quota = new Gauge({
      name: 'eni_ipam_openapi_quota_per_minute',
      help: "The client's configured call limit per action, in calls per minute.",
      labelNames: ['action'],
      registers,
    });
    const burst = new Gauge({
      name: 'eni_ipam_openapi_quota_burst',
      help: "The client's configured burst per action.",
      labelNames: ['action'],
      registers,
    });
    for (const [action, l] of Object.entries(limiters.limits)) {
      quota.set({ action }, l.perMinute);
      burst.set({ action }, l.burst);
      // Counters start at 0 for every known action: rate() and increase() miss a series' first
      // event, and a dashboard shows 0 rather than nothing.
      this.requests.inc({ action, code: 'OK' }, 0);
      this.throttled.inc({ action }, 0);
      for (const code of RETRIED_CODES) this.retries.inc({ action, code }, 0);
    }
  }
}
