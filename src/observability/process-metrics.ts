import { collectDefaultMetrics, type Registry } from 'prom-client';

/**
 * prom-client's gauges that are named like counters: `promtool check metrics` flags each
 * ("non-counter metrics should not have _total suffix"). Each is the sum over `type` of the
 * gauge of the same name without `_total` (nodejs_active_handles{type="Socket"}...), which stays,
 * so nothing is lost: `sum(nodejs_active_handles)` is the total.
 */
const GAUGES_NAMED_LIKE_COUNTERS = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/**
 * The standard process and Node.js metrics, under their standard names (process_cpu_seconds_total,
 * process_resident_memory_bytes, nodejs_heap_size_used_bytes...), without a prefix: stock
 * dashboards and alerts find them by these names, and the `job` label tells programs apart.
 */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of GAUGES_NAMED_LIKE_COUNTERS) registry.removeSingleMetric(name);
}
