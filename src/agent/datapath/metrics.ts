import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ProblemKind } from './model.js';

/** The node datapath's metrics (`eni_ipam_agent_datapath_*`); ENI ids as labels are bounded by the node's ENIs. */
export class DatapathMetrics {
  readonly changes: Counter<'change'>;
  readonly applyFailures: Counter<'change' | 'eni'>;
  readonly podFailures: Counter<'eni' | 'reason'>;
  readonly problems: Gauge<'eni' | 'reason'>;
  readonly enisReady: Gauge;
  readonly reconcile: Histogram<'result'>;
  readonly podSetup: Histogram;

  constructor(registry: Registry) {
    const registers = [registry];
    this.changes = new Counter({
      name: 'eni_ipam_agent_datapath_changes_total',
      help: 'Changes the agent made to the node (link, route-add, route-del, rule-add, rule-del).',
      labelNames: ['change'],
      registers,
    });
    this.applyFailures = new Counter({
      name: 'eni_ipam_agent_datapath_apply_failures_total',
      help: 'Changes the kernel refused, by change and ENI.',
      labelNames: ['change', 'eni'],
      registers,
    });
    this.podFailures = new Counter({
      name: 'eni_ipam_agent_datapath_pod_failures_total',
      help: 'Pod addresses (ADDs) whose datapath could not be set up, by ENI and reason; their address was released.',
      labelNames: ['eni', 'reason'],
      registers,
    });
    this.problems = new Gauge({
      name: 'eni_ipam_agent_datapath_eni_problems',
      help: 'ENIs of the pool the agent cannot set up now, by ENI and reason (1 while it lasts).',
      labelNames: ['eni', 'reason'],
      registers,
    });
    this.enisReady = new Gauge({
      name: 'eni_ipam_agent_datapath_enis_ready',
      help: 'InUse ENIs of the pool whose device is up with the MTU and whose route table is set.',
      registers,
    });
    this.reconcile = new Histogram({
      name: 'eni_ipam_agent_datapath_reconcile_duration_seconds',
      help: 'Time to compare the node with the pool and the pods and set it right, by result (ok, partial, failed).',
      labelNames: ['result'],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      registers,
    });
    this.podSetup = new Histogram({
      name: 'eni_ipam_agent_datapath_pod_setup_duration_seconds',
      help: 'Time an ADD spent on the datapath (waiting for the ENI device included).',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers,
    });
  }

  /** Sets the problem gauge to exactly these (eni, reason) pairs. */
  setProblems(now: ReadonlyMap<string, ProblemKind>, before: ReadonlyMap<string, ProblemKind>): void {
    for (const [eni, reason] of before) if (now.get(eni) !== reason) this.problems.remove({ eni, reason });
    for (const [eni, reason] of now) this.problems.set({ eni, reason }, 1);
  }
}
