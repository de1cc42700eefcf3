import type { FailureRecord } from '../../ipam/failure-record.js';
import type { PoolMemory, Shortfall } from '../../ipam/pool-plan.js';

/** Everything the operator remembers of one node between reconciles. */
export interface NodeMemory {
  /** Since when the pool has lacked IPs (for the deficit-to-published metric). */
  deficitSince?: number;
  /** Since when the pool has been in excess without a break. */
  excessSince?: number;
  shortfall?: Shortfall;
  /** Per action, the last failure and its back-off. */
  failures: Map<string, FailureRecord>;
  /** When the Node was first confirmed gone while its instance still existed. */
  goneSince?: number;
  /** The pool is being torn down and the node's ENIs were read afresh for it. */
  resyncedForTeardown: boolean;
  /** IPs on their way: ENIs being created or attached. */
  incoming: { enis: number; ips: number };
  /** ENIs being attached or waited for. */
  attaching: Set<string>;
  /** ENIs being detached and deleted: no longer part of the pool, though they hold a slot. */
  removing: Set<string>;
  /** ENIs this operator removed itself; any other ENI that leaves the pool was removed behind its back. */
  removedByUs: Set<string>;
}

const fresh = (): NodeMemory => ({
  failures: new Map(),
  resyncedForTeardown: false,
  incoming: { enis: 0, ips: 0 },
  attaching: new Set(),
  removing: new Set(),
  removedByUs: new Set(),
});

/** One record per node, made on first use and removed in one place, when the node's pool is gone. */
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
      failures: [...m.failures.values()],
    };
  }
}

/** IPs on their way to the node, counted up (an ENI started) or down (it landed or failed). */
export function addIncoming(m: NodeMemory, enis: number, ips: number): void {
  m.incoming = { enis: m.incoming.enis + enis, ips: m.incoming.ips + ips };
}
