/**
 * Found in review (it failed before the fix): a pool the user has just marked
 * `eniipam.io/override: "true"` is rewritten from a cache that has not seen the annotation yet.
 *
 * node-placement.ts ensurePool decides from the cached pool (`existing`) and writes a merge patch
 * with no precondition (placement-store.ts patchPool: no resourceVersion), so the API server takes
 * it whatever the pool is now. A user who annotates a pool and then changes its class (or whose
 * Node updates meanwhile) has the pool's spec replaced with the class's while the pool watch lags:
 * "an override pool is never rewritten" holds only when the cache is current.
 */
import { describe, expect, it } from '@jest/globals';
import type { V1Node } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { ENIPool, ENIPoolClass } from '../../src/api/types.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ClassVerdict } from '../../src/operator/class/reconciler.js';
import { NodePlacement, OVERRIDE_ANNOTATION } from '../../src/operator/class/node-placement.js';
import type { PlacementStore, PoolPatch } from '../../src/operator/class/ports.js';

const VPC = 'vpc-1';
const clone = <T>(x: T): T => structuredClone(x);

/** A JSON merge patch (RFC 7386), as the API server applies it. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return clone(patch);
  const out: Record<string, unknown> =
    target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else if (v !== undefined) out[k] = mergePatch(out[k], v);
  }
  return out;
}

const cls: ENIPoolClass = {
  apiVersion: 'eniipam.io/v1alpha1',
  kind: 'ENIPoolClass',
  metadata: { name: 'default', uid: 'uid-default', generation: 2 },
  // The class was just changed: minAllocate 2 -> 10.
  spec: { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-1'], minAllocate: 10 },
};
const node: V1Node = {
  metadata: {
    name: 'n1',
    uid: 'uid-n1',
    labels: { 'topology.kubernetes.io/zone': 'zone-a', 'node.kubernetes.io/instance-type': 'ecs.g7.large' },
  },
  spec: { providerID: 'cn-hangzhou.i-n1' },
};
const cachedPool: ENIPool = {
  apiVersion: 'eniipam.io/v1alpha1',
  kind: 'ENIPool',
  metadata: { name: 'n1', resourceVersion: '10', labels: { 'eniipam.io/class': 'default' } },
  spec: {
    nodeName: 'n1',
    instanceID: 'i-n1',
    instanceType: 'ecs.g7.large',
    zoneID: 'zone-a',
    vpcID: VPC,
    className: 'default',
    vSwitchTags: { role: 'pods' },
    securityGroupIDs: ['sg-1'],
    minAllocate: 2,
  },
};

describe('an override pool and a pool cache that lags', () => {
  it('never rewrites a pool whose live copy carries the override annotation', async () => {
    // On the API server: the user marked the pool as theirs and set its own sizing (rv 11, 12).
    const live = mergePatch(cachedPool, {
      metadata: { resourceVersion: '12', annotations: { [OVERRIDE_ANNOTATION]: 'true' } },
      spec: { minAllocate: 50 },
    }) as ENIPool;
    const store: PlacementStore = {
      createPool: async () => false,
      patchPool: async (_name: string, patch: PoolPatch) => {
        const rv = (patch.metadata as { resourceVersion?: string } | undefined)?.resourceVersion;
        if (rv !== undefined && rv !== live.metadata.resourceVersion)
          throw Object.assign(new Error('Conflict'), { code: 409 });
        Object.assign(live, mergePatch(live, patch));
      },
      patchClassStatus: async () => undefined,
    };
    const verdict: ClassVerdict = { generation: 2, state: 'valid', message: '', zones: ['zone-a'] };
    const placement = new NodePlacement({
      // The informer has not delivered the user's edit yet.
      cache: {
        classes: () => [cls],
        class: (n) => (n === 'default' ? cls : undefined),
        nodes: () => [node],
        node: (n) => (n === 'n1' ? node : undefined),
        pool: (n) => (n === 'n1' ? clone(cachedPool) : undefined),
      },
      store,
      events: { record: () => undefined },
      logger: silentLogger(),
      now: () => Date.parse('2026-03-01T12:00:00Z'),
      mayWrite: () => true,
      instances: { describeInstances: async () => [] },
      verdict: () => verdict,
      config: { vpcId: VPC },
      enqueueClass: () => undefined,
      registry: new Registry(),
    });
    await placement.reconcile('n1').catch(() => undefined); // a refused write is retried on a fresh cache
    expect(live.metadata.annotations?.[OVERRIDE_ANNOTATION]).toBe('true');
    // Before the fix: the user's minAllocate 50 is replaced with the class's 10.
    expect(live.spec.minAllocate).toBe(50);
  });
});
