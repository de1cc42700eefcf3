import type { V1Node } from '@kubernetes/client-node';
import type { ENIPool, ENIPoolClass, ENIPoolClassStatus, ENIPoolSpec } from '../../api/types.js';
import type { EcsApi } from '../../cloud/index.js';
import type { EventTarget } from '../../kube/events.js';
import type { Logger } from '../../observability/logger.js';
import type { CloudState } from '../eni/cloud-state.js';
import type { CiliumNode } from '../cilium/types.js';

/**
 * The narrow interfaces the class reconciler and the node placement work through: the
 * informers' caches, the few writes they make, Events, and the cloud reads a class's
 * validation needs. The operator gives them the real ones; one-reconcile tests give fakes.
 */

/** What they read of the cluster: the informers' caches. */
export interface PlacementCache {
  classes(): readonly ENIPoolClass[];
  class(name: string): ENIPoolClass | undefined;
  nodes(): readonly V1Node[];
  node(name: string): V1Node | undefined;
  pool(name: string): ENIPool | undefined;
  /** `--pool-api ciliumnode`: the node's CiliumNode, whose per-node values win over the class (cilium/node-spec.ts). */
  ciliumNode?(name: string): CiliumNode | undefined;
}

/**
 * A pool's spec and metadata as a merge patch (null removes a field); with `resourceVersion`, the
 * API server refuses it (409) unless the pool is still as the patch was planned on.
 */
export interface PoolPatch {
  metadata?: {
    labels?: Record<string, string | null>;
    annotations?: Record<string, string | null>;
    resourceVersion?: string;
  };
  spec?: { [K in keyof ENIPoolSpec]?: ENIPoolSpec[K] | null };
}

/** What they write on the API server. */
export interface PlacementStore {
  /** Creates the pool; false when a pool of that name exists already (the cache lagged). */
  createPool(pool: ENIPool): Promise<boolean>;
  patchPool(name: string, patch: PoolPatch): Promise<void>;
  patchClassStatus(name: string, status: ENIPoolClassStatus): Promise<void>;
}

/** Events about classes, nodes and pools. */
export interface ObjectEvents {
  record(target: EventTarget, type: 'Normal' | 'Warning', reason: string, message: string): void;
}

/** The cloud reads of a class's validation (cached; a stale list is described again). */
export type ClassCloudView = Pick<CloudState, 'vSwitches' | 'securityGroups' | 'instanceType'>;

/** The one cloud call of placement: a node without a providerID is found by its address. */
export type InstanceLookup = Pick<EcsApi, 'describeInstances'>;

/** Why fleet-wide cloud reads fail, and how a failure of one's own reads reads to a user. */
export interface ClassHealthView {
  outage(): { reason: string; message: string } | undefined;
  /** A failed read as a Degraded reason and a message naming the fix. */
  causeOf(e: unknown): { reason: string; message: string };
}

export interface PlacementSide {
  cache: PlacementCache;
  store: PlacementStore;
  events: ObjectEvents;
  logger: Logger;
  now: () => number;
  /** Whether this operator may still write (it leads on a fresh lease). */
  mayWrite: () => boolean;
}
