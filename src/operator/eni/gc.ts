import type { ENIPool } from '../../api/types.js';
import type { EcsApi } from '../../cloud/index.js';
import type { Informer } from '../../kube/informer.js';
import type { Logger } from '../../observability/logger.js';
import { TAGS, type CloudState } from './cloud-state.js';
import type { OperatorMetrics } from '../metrics.js';
import type { StatePoller } from './poller.js';

/**
 * Deletes leaked ENIs: tagged with this cluster's id, `Available` (attached to nothing), older
 * than the minimum age, and belonging to no ENIPool. Run after a full resync.
 */
export async function collectLeakedEnis(deps: {
  api: EcsApi;
  cloud: CloudState;
  pools: Informer<ENIPool>;
  /** Whether the pool is there on the API server (a live read: absence in the cache is no proof). */
  poolExists: (name: string) => Promise<boolean>;
  poller: StatePoller;
  metrics: OperatorMetrics;
  logger: Logger;
  minAgeMs: number;
  now: number;
}): Promise<string[]> {
  const { now } = deps;
  const pools = new Set(deps.pools.list().map((p) => p.metadata.name));
  const leaked = deps.cloud
    .owned()
    .filter(
      (e) =>
        e.status === 'Available' &&
        !e.instanceId &&
        !pools.has(e.tags[TAGS.node] ?? '') &&
        now - Date.parse(e.creationTime) >= deps.minAgeMs,
    );
  const deleted: string[] = [];
  for (const e of leaked) {
    try {
      if (await deps.poolExists(e.tags[TAGS.node] ?? '')) continue;
      await deps.api.deleteNetworkInterface(e.id);
      await deps.poller.wait(e.id, 'gone');
      deps.cloud.forget(e.id);
      deps.metrics.gcEnis.inc();
      deleted.push(e.id);
      deps.logger.info(
        { eni: e.id, node: e.tags[TAGS.node], vswitch: e.vSwitchId, created: e.creationTime },
        'deleted a leaked ENI',
      );
    } catch (err) {
      deps.logger.warn({ eni: e.id, err: (err as Error).message }, 'could not delete a leaked ENI');
    }
  }
  return deleted;
}
