import type { FailureRecord } from '../../ipam/failure-record.js';
import type { Demand } from '../../ipam/demand.js';
import type { PoolMemory, Shortfall } from '../../ipam/pool-plan.js';

/** Everything the operator remembers of one node between reconciles. */
export interface NodeMemory {
  /** Since when the pool has lacked IPs (for the deficit-to-published metric). */
  deficitSince?: number;
  /** Since when the pool has been in excess without a break. */
  excessSince?: number;
  shortfall?: Shortfall;
  /** How fast the node has taken addresses lately (for the growth batch). */
  demand?: Demand;
  /** Per action, the last failure and its back-off. */
  failures: Map<string, FailureRecord>;
  /** When the Node was first confirmed gone while its instance still existed. */
  goneSince?: number;
  /** The pool is being torn down and the node's ENIs were read afresh for it. */
  resyncedForTeardown: boolean;
}

const fresh = (): NodeMemory => ({ failures: new Map(), resyncedForTeardown: false });

/**
 * One record per node, made on first use and removed in one place, when the node's pool is gone.
 * ENI work in flight is not here: the lifecycle's ledger has it (eni/ledger.ts).
 */
export class NodeMemories {
  private readonly byNode = new Map<string, NodeMemory>();

  of(node: string): NodeMemory {
    return this.byNode.get(node) ?? this.byNode.set(node, fresh()).get(node)!;
  }

  forget(node: string): void {
    this.byNode.delete(node);
  }

  /** What planning reads of the node's memory. */
  forPlanning(node: string): PoolMemory {
    const m = this.of(node);
    return {
      deficitSince: m.deficitSince,
      excessSince: m.excessSince,
      shortfall: m.shortfall,
      demand: m.demand,
      failures: [...m.failures.values()],
    };
  }
}

/** The node's deficit is met (its IPs reached the pool): how long it lasted is observed, once. */
export function deficitMet(m: NodeMemory, now: number, histogram: { observe(seconds: number): void }): void {
  if (m.deficitSince === undefined) return;
  histogram.observe((now - m.deficitSince) / 1000);
  m.deficitSince = undefined;
}
