import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { MUTATING_ACTIONS } from '../cloud/index.js';
import type { FleetView } from './fleet.js';

/** The kinds of work queue keys (see parseKey). */
const RECONCILE_KINDS = ['pool', 'class', 'node'] as const;

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
  readonly vSwitchPoolIps: Gauge<'vswitch' | 'zone' | 'kind'>;
  readonly vSwitchConsumption: Gauge<'vswitch' | 'zone'>;
  readonly vSwitchExhaustion: Gauge<'vswitch' | 'zone'>;
  readonly zonePoolsShort: Gauge<'zone' | 'reason'>;
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
    // One view per scrape: every collect of a scrape runs in the same synchronous pass (prom-client
    // calls them all before it awaits any), so the view is made once and forgotten after it.
    let view: FleetView | undefined;
    const fleet = () => {
      if (!view && this.fleet) {
        view = this.fleet();
        queueMicrotask(() => (view = undefined));
      }
      return view;
    };
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
    // Series of a vSwitch the last describe no longer lists, or of a forecast withdrawn, go:
    // each of these is rebuilt from the view at every scrape.
    const perVSwitch = (set: (g: Gauge<'vswitch' | 'zone'>, v: FleetView['vSwitches'][number]) => void) =>
      function (this: Gauge<'vswitch' | 'zone'>) {
        const f = fleet();
        if (!f) return;
        this.reset();
        for (const v of f.vSwitches) set(this, v);
      };
    this.vSwitchFree = new Gauge({
      name: 'eni_ipam_vswitch_free_ips',
      help: 'Free addresses of a vSwitch, as last described.',
      labelNames: ['vswitch', 'zone'],
      registers,
      collect: perVSwitch((g, v) => g.set({ vswitch: v.id, zone: v.zone }, v.free)),
    });
    this.vSwitchPoolIps = new Gauge({
      name: 'eni_ipam_vswitch_pool_ips',
      help: 'IPv4 addresses the node pools hold from a vSwitch, by kind: available (on the pools\u2019 ENIs in it), used (of those, by pods).',
      labelNames: ['vswitch', 'zone', 'kind'],
      registers,
      collect() {
        const f = fleet();
        if (!f) return;
        this.reset();
        for (const v of f.vSwitches)
          for (const kind of ['available', 'used'] as const)
            this.set({ vswitch: v.id, zone: v.zone, kind }, v.pooled[kind]);
      },
    });
    this.vSwitchConsumption = new Gauge({
      name: 'eni_ipam_vswitch_consumption_ips_per_second',
      help: 'Addresses a vSwitch loses per second (to anything in it), the least-squares slope of its free count over the last 30 minutes of describes; negative while addresses come back. Absent before 10 minutes of them.',
      labelNames: ['vswitch', 'zone'],
      registers,
      collect: perVSwitch((g, v) => {
        if (v.forecast) g.set({ vswitch: v.id, zone: v.zone }, v.forecast.consumptionPerSecond);
      }),
    });
    this.vSwitchExhaustion = new Gauge({
      name: 'eni_ipam_vswitch_exhaustion_seconds',
      help: 'Seconds until a vSwitch has no free address at its consumption rate; absent while it has no positive rate.',
      labelNames: ['vswitch', 'zone'],
      registers,
      collect: perVSwitch((g, v) => {
        if (v.forecast?.exhaustionSeconds !== undefined)
          g.set({ vswitch: v.id, zone: v.zone }, v.forecast.exhaustionSeconds);
      }),
    });
    this.zonePoolsShort = new Gauge({
      name: 'eni_ipam_zone_pools_short',
      help: 'Node pools of a zone below their preAllocate/minAllocate target that the operator cannot fill for lack of vSwitch room, by their Exhausted reason: VSwitchExhausted, VSwitchFragmented, NoVSwitchInZone.',
      labelNames: ['zone', 'reason'],
      registers,
      collect() {
        const f = fleet();
        if (!f) return;
        this.reset();
        for (const z of f.zones)
          for (const [reason, n] of Object.entries(z.short)) this.set({ zone: z.zone, reason }, n);
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
