import type { TaintSpec } from '../kube/taint.js';

export type OperatorMode = 'normal' | 'no-release' | 'read-only';

/**
 * Where node agents read their pool: eni-ipam's ENIPool (its own agent), or Cilium's CiliumNode
 * (unmodified cilium-agents with --ipam=alibabacloud; the operator keeps its ENIPools beside).
 */
export type PoolApi = 'enipool' | 'ciliumnode';
export const POOL_APIS: readonly PoolApi[] = ['enipool', 'ciliumnode'];

/** The operator's settings, from flags (see cli/operator.ts) with these defaults. */
export interface OperatorConfig {
  clusterId: string;
  vpcId: string;
  mode: OperatorMode;
  poolApi: PoolApi;
  workers: number;
  /** Full ENI resync and re-enqueue of every pool. */
  resyncIntervalMs: number;
  gcIntervalMs: number;
  /** A leaked ENI must be at least this old to be collected. */
  gcMinAgeMs: number;
  pollMinIntervalMs: number;
  pollMaxIntervalMs: number;
  /** A Node gone while its instance still exists keeps its ENIs this long. */
  nodeGoneGraceMs: number;
  /**
   * The taint nodes register with until their pool can serve pods: removed once the pool is
   * first Ready, never added. Undefined: none is looked for.
   */
  startupTaint?: TaintSpec;
}

export const DEFAULT_OPERATOR_CONFIG: Omit<OperatorConfig, 'clusterId' | 'vpcId'> = {
  mode: 'normal',
  poolApi: 'enipool',
  workers: 8,
  resyncIntervalMs: 5 * 60_000,
  gcIntervalMs: 10 * 60_000,
  gcMinAgeMs: 10 * 60_000,
  pollMinIntervalMs: 250,
  pollMaxIntervalMs: 4000,
  nodeGoneGraceMs: 10 * 60_000,
  startupTaint: { key: 'eniipam.io/pool-not-ready', effect: 'NoSchedule' },
};

export const FINALIZER = 'eniipam.io/release-enis';
