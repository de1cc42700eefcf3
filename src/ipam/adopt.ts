import type { PoolObservation, PoolPlan } from './pool-plan.js';

/**
 * Our ENIs that another operator instance left half-done (created and parked, or attaching to
 * this instance): finished, not replaced. None while the operator may not change the cloud, or
 * while attaches are held back after a failure.
 */
export function adoptions(o: PoolObservation, blocked: (action: string) => boolean): PoolPlan['adopt'] {
  if (o.mode === 'read-only' || blocked('AttachNetworkInterface')) return [];
  const adopt: PoolPlan['adopt'] = [];
  for (const e of o.ownedEnis.filter((x) => !x.attaching && !x.removing)) {
    if (e.status === 'Available' && !e.instanceId) adopt.push({ eniId: e.id, alreadyAttaching: false });
    else if (e.status === 'Attaching' && e.instanceId === o.pool.spec.instanceID)
      adopt.push({ eniId: e.id, alreadyAttaching: true });
  }
  return adopt;
}
