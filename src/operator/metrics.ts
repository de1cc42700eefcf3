import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { MUTATING_ACTIONS } from '../cloud/index.js';

/** The kinds of work queue keys (see parseKey). */
const RECONCILE_KINDS = ['pool', 'class', 'node'] as const;

/** The fleet as the caches see it, read at each scrape. */
export interface FleetView {
  nodes: Record<'ready' | 'in-deficit' | 'at-capacity' | 'error', number>;
  enis: Record<string, number>;
  vSwitches: Array<{ id: string; zone: string; free: number }>;
}

/** The operator's own metrics (`eni_ipam_*`); the cloud client adds `eni_ipam_openapi_*`. */
export class OperatorMetrics {
  /** Set by the operator once its caches exist. */
  fleet?: () => FleetView;

  readonly poolIps: Gauge<'node' | 'kind'>;
  readonly poolPrefixes: Gauge<'node'>;
  readonly poolIpv6: Gauge<'node' | 'kind'>;
  readonly poolIpv6Prefixes: Gauge<'node'>;
  readonly nodes: Gauge<'state'>;
  readonly enis: Gauge<'state'>;
  readonly vSwitchFree: Gauge<'vswitch' | 'zone'>;
  readonly deficitToPublished: Histogram;
  readonly reconcileDuration: Histogram<'kind'>;
  readonly reconcileErrors: Counter<'kind'>;
  readonly queueDepth: Gauge;
  readonly queueWait: Histogram;
  readonly gcEnis: Counter;
  readonly leader: Gauge;
  readonly cloudChanges: Counter<'action'>;
  readonly resyncs: Counter;
  readonly resyncPages: Gauge;
  readonly resyncEnis: Gauge;
  readonly resyncCpu: Gauge;
  readonly resyncDuration: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.poolIps = new Gauge({
      name: 'eni_ipam_pool_ips',
      help: 'IPs of a node pool by kind: available, used, needed, releasing, and batch (what a growth step carries beyond the need).',
      labelNames: ['node', 'kind'],
      registers,
    });
    this.poolPrefixes = new Gauge({
      name: 'eni_ipam_pool_prefixes',
      help: 'IPv4 /28 prefixes on the attached ENIs of a node pool (ipv4Mode Prefix); each is 16 of its available IPs.',
      labelNames: ['node'],
      registers,
    });
    this.poolIpv6 = new Gauge({
      name: 'eni_ipam_pool_ipv6_addresses',
      help: 'IPv6 addresses of a node pool that uses IPv6, by kind: available (on attached ENIs), used (by pods); eni_ipam_pool_ips counts the pool\u2019s pod family (IPv4, or IPv6 in an IPv6-only pool).',
      labelNames: ['node', 'kind'],
      registers,
    });
    this.poolIpv6Prefixes = new Gauge({
      name: 'eni_ipam_pool_ipv6_prefixes',
      help: 'IPv6 /80 prefixes on the attached ENIs of a dual-stack node pool (ipv6Mode Prefix); its pods take their IPv6 addresses from them.',
      labelNames: ['node'],
      registers,
    });
    const fleet = () => this.fleet?.();
    this.nodes = new Gauge({
      name: 'eni_ipam_nodes',
      help: 'Nodes by pool state: ready, in-deficit, at-capacity, error.',
      labelNames: ['state'],
      registers,
      collect() {
        const f = fleet();
        if (f) for (const [state, n] of Object.entries(f.nodes)) this.set({ state }, n);
      },
    });
    this.enis = new Gauge({
      name: 'eni_ipam_enis',
      help: 'Secondary ENIs the operator created, by state.',
      labelNames: ['state'],
      registers,
      collect() {
        const f = fleet();
        if (!f) return;
        this.reset();
        for (const [state, n] of Object.entries(f.enis)) this.set({ state }, n);
      },
    });
    this.vSwitchFree = new Gauge({
      name: 'eni_ipam_vswitch_free_ips',
      help: 'Free addresses of a vSwitch, as last described.',
      labelNames: ['vswitch', 'zone'],
      registers,
      collect() {
        const f = fleet();
        if (f) for (const v of f.vSwitches) this.set({ vswitch: v.id, zone: v.zone }, v.free);
      },
    });
    this.deficitToPublished = new Histogram({
      name: 'eni_ipam_deficit_to_published_seconds',
      help: 'Time from a pool deficit being seen to the IPs that cover it being published.',
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300],
      registers,
    });
    this.reconcileDuration = new Histogram({
      name: 'eni_ipam_reconcile_duration_seconds',
      help: 'Reconcile duration by kind (pool, class).',
      labelNames: ['kind'],
      buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: 'eni_ipam_reconcile_errors_total',
      help: 'Reconciles that failed, by kind.',
      labelNames: ['kind'],
      registers,
    });
    this.queueDepth = new Gauge({
      name: 'eni_ipam_workqueue_depth',
      help: 'Keys waiting in the work queue.',
      registers,
    });
    this.queueWait = new Histogram({
      name: 'eni_ipam_workqueue_wait_seconds',
      help: 'Time a key waited in the queue before work started.',
      buckets: [0.001, 0.01, 0.1, 0.5, 1, 5, 10, 60],
      registers,
    });
    this.gcEnis = new Counter({
      name: 'eni_ipam_gc_enis_deleted_total',
      help: 'Leaked ENIs the garbage collector deleted.',
      registers,
    });
    this.leader = new Gauge({
      name: 'eni_ipam_leader',
      help: '1 while this operator instance is the leader.',
      registers,
    });
    this.cloudChanges = new Counter({
      name: 'eni_ipam_cloud_changes_total',
      help: 'Cloud changes the operator made, by action.',
      labelNames: ['action'],
      registers,
    });
    this.resyncs = new Counter({ name: 'eni_ipam_resyncs_total', help: 'Full ENI resyncs completed.', registers });
    this.resyncPages = new Gauge({
      name: 'eni_ipam_resync_pages',
      help: 'DescribeNetworkInterfaces pages the last full resync read.',
      registers,
    });
    this.resyncEnis = new Gauge({
      name: 'eni_ipam_resync_enis',
      help: 'ENIs of the VPC the last full resync found.',
      registers,
    });
    this.resyncCpu = new Gauge({
      name: 'eni_ipam_resync_cpu_seconds',
      help: 'CPU time (user and system) the process spent during the last full resync.',
      registers,
    });
    this.resyncDuration = new Gauge({
      name: 'eni_ipam_resync_duration_seconds',
      help: 'Wall time of the last full resync.',
      registers,
    });
    // Every series whose labels are known has a sample from the start (counters without labels
    // have one anyway): rate() and increase() miss a series' first event, dashboards show 0.
    for (const kind of RECONCILE_KINDS) {
      this.reconcileErrors.inc({ kind }, 0);
      this.reconcileDuration.zero({ kind });
    }
    for (const action of MUTATING_ACTIONS) this.cloudChanges.inc({ action }, 0);
  }
}
