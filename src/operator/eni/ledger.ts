import type { EniWorkInFlight } from '../pool/ports.js';

/**
 * ENI work in flight, one record per operation: the only account of what the background ENI
 * work is doing. The lifecycle writes it (a record begins with the operation, moves through its
 * phases and ends with it); the plan reads the counts derived from it. No counter is raised or
 * lowered anywhere: a count is the number of records, so it cannot go negative, and a record that
 * ends twice, or after its node was forgotten, changes nothing.
 */

/**
 * creating: CreateNetworkInterface on its way (the ENI has no id yet, only its ClientToken);
 * attaching: attached, or waited for, until InUse; removing: being detached and deleted;
 * removed: the removal is over, but the pool still lists the ENI (its leaving is not yet said).
 */
export type EniPhase = 'creating' | 'attaching' | 'removing' | 'removed';

export interface EniOperation {
  readonly node: string;
  phase: EniPhase;
  /** The ENI; a create has it once the cloud answered. */
  eniId?: string;
  /** A create's ClientToken, which names it before it has an ENI. */
  readonly clientToken?: string;
  /** The addresses it brings to the node's pods when it lands (0 for a removal). */
  readonly ips: number;
}

/** The records, and what is derived from them. */
export class EniLedger {
  /** The open records, by node (a reconcile reads its node's alone). */
  private readonly byNode = new Map<string, Set<EniOperation>>();

  /** A create: `ips` addresses on their way, named by the create's ClientToken. */
  beginCreate(node: string, clientToken: string, ips: number): EniOperation {
    return this.add({ node, phase: 'creating', clientToken, ips });
  }

  /** An attach (or a wait for one) of an ENI that brings `ips` addresses. */
  beginAttach(node: string, eniId: string, ips: number): EniOperation {
    return this.add({ node, phase: 'attaching', eniId, ips });
  }

  /** A detach and delete; one that failed before (its record still `removed`) is tried again in the same record. */
  beginRemove(node: string, eniId: string): EniOperation {
    const earlier = [...this.of(node)].find((op) => op.eniId === eniId && op.phase === 'removed');
    if (earlier) {
      earlier.phase = 'removing';
      return earlier;
    }
    return this.add({ node, phase: 'removing', eniId, ips: 0 });
  }

  /** A create answered with its ENI, which is now attached. */
  created(op: EniOperation, eniId: string): void {
    if (op.phase !== 'creating') throw new Error(`ENI operation of ${op.node} is ${op.phase}, not creating`);
    op.eniId = eniId;
    op.phase = 'attaching';
  }

  /** A removal is over (done or given up): it counts as ours until the pool stops listing the ENI. */
  removed(op: EniOperation): void {
    if (op.phase !== 'removing') throw new Error(`ENI operation of ${op.node} is ${op.phase}, not removing`);
    op.phase = 'removed';
  }

  /** The operation is over: it landed, or failed. */
  end(op: EniOperation): void {
    const open = this.byNode.get(op.node);
    open?.delete(op);
    if (open?.size === 0) this.byNode.delete(op.node);
  }

  /**
   * The node's pool, as read for a plan, lists only `eniIds`: the removals of every other ENI are
   * over and said (a plan looks for ENIs gone behind our back only among those the pool lists).
   */
  listed(node: string, eniIds: readonly string[]): void {
    for (const op of this.of(node)) if (op.phase === 'removed' && !eniIds.includes(op.eniId!)) this.end(op);
  }

  /** The node's pool is gone: its records go (operations still running end into nothing). */
  forget(node: string): void {
    this.byNode.delete(node);
  }

  inFlight(node: string): EniWorkInFlight {
    const ops = this.records(node);
    const ids = (...phases: EniPhase[]) =>
      new Set(ops.filter((op) => phases.includes(op.phase) && op.eniId).map((op) => op.eniId!));
    const coming = ops.filter((op) => op.phase === 'creating' || op.phase === 'attaching');
    return {
      enis: coming.length,
      ips: coming.reduce((sum, op) => sum + op.ips, 0),
      attaching: ids('attaching'),
      removing: ids('removing'),
      removedByUs: ids('removing', 'removed'),
      creating: new Set(ops.filter((op) => op.phase === 'creating').map((op) => op.clientToken!)),
    };
  }

  /** The open records, of one node or all. */
  records(node?: string): readonly Readonly<EniOperation>[] {
    return node === undefined ? [...this.byNode.values()].flatMap((ops) => [...ops]) : [...this.of(node)];
  }

  private add(op: EniOperation): EniOperation {
    if (op.ips < 0 || !Number.isInteger(op.ips)) throw new Error(`ENI operation of ${op.node}: ${op.ips} addresses`);
    const open = this.byNode.get(op.node) ?? this.byNode.set(op.node, new Set()).get(op.node)!;
    open.add(op);
    return op;
  }

  private of(node: string): ReadonlySet<EniOperation> {
    return this.byNode.get(node) ?? new Set();
  }
}
