import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** What the agent's gauges read when scraped. */
export interface AgentGauges {
  free(): number;
  inUse(): number;
  cooling(): number;
  stray(): number;
  /** How long the agent's status has been unsent (0 while its writes are taken). */
  statusUnsentSeconds(): number;
}

/** The node agent's metrics (`eni_ipam_agent_*`); gauges are read from the agent at scrape time. */
export class AgentMetrics {
  readonly free: Gauge;
  readonly inUse: Gauge;
  readonly cooling: Gauge;
  readonly stray: Gauge;
  readonly latency: Histogram;
  readonly emptyPool: Counter;
  readonly statusWrites: Counter;
  readonly statusWriteFailures: Counter<'reason'>;
  readonly statusBackoff: Gauge;
  readonly statusUnsent: Gauge;
  readonly recovered: Counter;

  constructor(registry: Registry, read: AgentGauges) {
    const registers = [registry];
    const gauge = (name: string, help: string, value: () => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(value());
        },
      });
    this.free = gauge('eni_ipam_agent_ips_free', 'IPs the agent may hand out now.', read.free);
    this.inUse = gauge('eni_ipam_agent_ips_in_use', 'IPs handed to pods.', read.inUse);
    this.cooling = gauge('eni_ipam_agent_ips_cooling', 'Released IPs cooling down before reuse.', read.cooling);
    this.stray = gauge(
      'eni_ipam_agent_stray_allocations',
      'Allocations whose IP is no longer in the pool.',
      read.stray,
    );
    this.latency = new Histogram({
      name: 'eni_ipam_agent_allocation_duration_seconds',
      help: 'Time to answer an allocation.',
      buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
      registers,
    });
    this.emptyPool = new Counter({
      name: 'eni_ipam_agent_allocations_pool_empty_total',
      help: 'Allocations refused because the pool had no free IP.',
      registers,
    });
    this.statusWrites = new Counter({
      name: 'eni_ipam_agent_status_writes_total',
      help: 'Status patches the agent wrote.',
      registers,
    });
    this.statusWriteFailures = new Counter({
      name: 'eni_ipam_agent_status_write_failures_total',
      help: 'Status patches the API server refused or did not answer, by reason (forbidden, throttled, conflict, unavailable, unreachable, ...).',
      labelNames: ['reason'],
      registers,
    });
    this.statusBackoff = new Gauge({
      name: 'eni_ipam_agent_status_backoff_seconds',
      help: 'The delay before the next status write while writes are refused (0 while they are taken).',
      registers,
    });
    this.statusUnsent = gauge(
      'eni_ipam_agent_status_unsent_seconds',
      'How long the agent\u2019s status has been unsent (0 while its writes are taken).',
      read.statusUnsentSeconds,
    );
    this.recovered = new Counter({
      name: 'eni_ipam_agent_recovered_allocations_total',
      help: 'Addresses in use that the state file lacked, taken back in from the pool status or the node\u2019s pods.',
      registers,
    });
  }
}
