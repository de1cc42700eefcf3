import { sameJson } from '../../kube/same-json.js';
import type { V1Node } from '@kubernetes/client-node';
import { Gauge, type Registry } from 'prom-client';
import { API_VERSION, POLICY_FIELDS, type ENIPoolClass, type ENIPoolSpec } from '../../api/types.js';
import { isConflict } from '../../kube/errors.js';
import type { ClassVerdict } from './reconciler.js';
import type { OperatorConfig } from '../config.js';
import { nodeInfo, winningClass, type NodeInfo } from './node-info.js';
import { ciliumSpecFields } from '../cilium/node-spec.js';
import type { InstanceLookup, PlacementSide, PoolPatch } from './ports.js';

/** A pool with this annotation set to "true" is the user's: the operator never rewrites its spec. */
export const OVERRIDE_ANNOTATION = 'eniipam.io/override';
/** Set on a pool whose node no valid class governs any more: why its spec is left as it was. */
export const MISMATCH_ANNOTATION = 'eniipam.io/class-mismatch';

const INSTANCE_BY_IP_TTL_MS = 10 * 60_000;

/** Why a node gets no pod addresses from eni-ipam (or none from a vSwitch of its zone). */
export type Unserved = 'NoClass' | 'ClassInvalid' | 'ZoneNotCovered';
const UNSERVED: readonly Unserved[] = ['NoClass', 'ClassInvalid', 'ZoneNotCovered'];

export interface NodePlacementDeps extends PlacementSide {
  instances: InstanceLookup;
  /** The verdict of a class as its reconciler last judged it. */
  verdict: (className: string) => ClassVerdict | undefined;
  config: Pick<OperatorConfig, 'vpcId'>;
  /** A class's status counts its nodes: it is judged again when a node comes to it or leaves it. */
  enqueueClass: (name: string) => void;
  registry: Registry;
}

/**
 * Places one node: the class that governs it (the highest priority among those selecting it)
 * decides its pool, created or brought in line with the class at once. A node that no valid class
 * serves gets an Event on the Node, a log line and a count in `eni_ipam_nodes_unserved`; its
 * pool, if it has one, is left as it was (a class deleted or narrowed never takes addresses from
 * pods) and flagged.
 */
export class NodePlacement {
  /** Per node: the class that governed it last, and why it is not served (if it is not). */
  private readonly placed = new Map<string, { className?: string; unserved?: Unserved; message?: string }>();
  private readonly instanceByIp = new Map<string, { id: string; at: number }>();
  constructor(private readonly deps: NodePlacementDeps) {
    const counts = () => this.unservedCounts();
    new Gauge({
      name: 'eni_ipam_nodes_unserved',
      help:
        'Nodes that get no pod addresses from eni-ipam, by reason: NoClass (no ENIPoolClass selects them), ' +
        'ClassInvalid (the class that does is not valid), ZoneNotCovered (no vSwitch of their class in their zone).',
      labelNames: ['reason'],
      registers: [deps.registry],
      collect() {
        for (const [reason, n] of Object.entries(counts())) this.set({ reason }, n);
      },
    });
  }

  private unservedCounts(): Record<Unserved, number> {
    const out = Object.fromEntries(UNSERVED.map((r) => [r, 0])) as Record<Unserved, number>;
    for (const p of this.placed.values()) if (p.unserved) out[p.unserved]++;
    return out;
  }

  async reconcile(name: string): Promise<{ requeueAfterMs?: number; backoff?: boolean }> {
    try {
      return await this.place(name);
    } catch (e) {
      // A write planned on a pool older than the server's: placed again on the newer pool, after a back-off.
      if (isConflict(e)) return { backoff: true };
      throw e;
    }
  }

  private async place(name: string): Promise<{ requeueAfterMs?: number }> {
    const { cache } = this.deps;
    const node = cache.node(name);
    if (!node) {
      // Gone: its pool's departure is the pool reconciler's (a live read first).
      const was = this.placed.get(name);
      this.placed.delete(name);
      if (was?.className) this.deps.enqueueClass(was.className);
      return {};
    }
    const info = nodeInfo(node);
    const winner = winningClass(cache.classes(), info.labels);
    const previous = this.placed.get(name);
    if (previous?.className !== winner?.metadata.name) {
      if (previous?.className) this.deps.enqueueClass(previous.className);
      if (winner) this.deps.enqueueClass(winner.metadata.name);
    }
    if (!winner) {
      const message =
        `no ENIPoolClass selects node ${name}: it gets no pool and no pod addresses from eni-ipam; ` +
        'create a class whose nodeSelector matches its labels';
      return this.unserved(node, undefined, 'NoClass', message, (was) =>
        cache.class(was)
          ? `class ${was} no longer selects node ${name} (no class does)`
          : `class ${was} was deleted and no class selects node ${name}`,
      );
    }
    const className = winner.metadata.name;
    const verdict = this.deps.verdict(className);
    // Not judged yet (or judged on an older spec): its reconcile places every node once it has.
    if (!verdict || verdict.generation !== winner.metadata.generation) {
      this.placed.set(name, { ...previous, className });
      return {};
    }
    if (verdict.state === 'invalid') {
      const message =
        `class ${className} selects node ${name} but is not valid (${verdict.reason}: ${verdict.message}); ` +
        'the node gets no new pod addresses until the class is fixed';
      return this.unserved(node, className, 'ClassInvalid', message, (was) =>
        was === className
          ? `class ${className} is not valid (${verdict.reason})`
          : `class ${className}, which now selects node ${name}, is not valid (${verdict.reason})`,
      );
    }
    await this.ensurePool(winner, info);
    if (verdict.state === 'valid' && info.zoneId && !verdict.zones.includes(info.zoneId)) {
      const message =
        `class ${className} has no vSwitch in zone ${info.zoneId} of node ${name} (its vSwitches cover ` +
        `${verdict.zones.join(', ')}): the node's pool cannot get addresses; add a vSwitch of zone ${info.zoneId}`;
      this.say(node, className, 'ZoneNotCovered', message);
      return {};
    }
    this.placed.set(name, { className });
    return {};
  }

  /**
   * The node has no valid class: said once; a pool it has is left as it is, and flagged with why
   * (`why` words it from the class the pool follows).
   */
  private async unserved(
    node: V1Node,
    className: string | undefined,
    reason: Unserved,
    message: string,
    why: (poolClass: string) => string,
  ): Promise<{ requeueAfterMs?: number }> {
    this.say(node, className, reason, message);
    const pool = this.deps.cache.pool(node.metadata!.name!);
    if (!pool || pool.metadata.deletionTimestamp || !this.deps.mayWrite()) return {};
    const flag = why(pool.spec.className ?? '');
    if (pool.metadata.annotations?.[MISMATCH_ANNOTATION] === flag) return {};
    const patch: PoolPatch = {
      metadata: { annotations: { [MISMATCH_ANNOTATION]: flag }, resourceVersion: pool.metadata.resourceVersion },
    };
    await this.deps.store.patchPool(pool.metadata.name, patch);
    return {};
  }

  private say(node: V1Node, className: string | undefined, reason: Unserved, message: string): void {
    const name = node.metadata!.name!;
    const before = this.placed.get(name);
    this.placed.set(name, { className, unserved: reason, message });
    if (before?.unserved === reason && before.message === message) return;
    this.deps.logger.warn({ node: name, class: className, reason }, message);
    if (this.deps.mayWrite())
      this.deps.events.record(
        { apiVersion: 'v1', kind: 'Node', name, uid: node.metadata?.uid },
        'Warning',
        reason === 'NoClass' ? 'NoENIPoolClass' : reason,
        message,
      );
  }

  private async instanceOf(node: NodeInfo): Promise<string | undefined> {
    if (node.instanceId) return node.instanceId;
    if (!node.internalIp) return undefined;
    // An address moves to another instance when its instance is released: the answer expires.
    const known = this.instanceByIp.get(node.internalIp);
    const now = this.deps.now();
    if (known && now - known.at < INSTANCE_BY_IP_TTL_MS) return known.id;
    const [found] = await this.deps.instances.describeInstances({
      privateIps: [node.internalIp],
      vpcId: this.deps.config.vpcId,
    });
    if (found) this.instanceByIp.set(node.internalIp, { id: found.id, at: now });
    else this.instanceByIp.delete(node.internalIp);
    return found?.id;
  }

  /** Creates the node's pool from its class, or brings the pool's spec in line with it. */
  private async ensurePool(cls: ENIPoolClass, node: NodeInfo): Promise<void> {
    const existing = this.deps.cache.pool(node.name);
    if (existing?.metadata.annotations?.[OVERRIDE_ANNOTATION] === 'true') return;
    // Being deleted: a new pool is made once it is gone (its deletion is an event too).
    if (existing?.metadata.deletionTimestamp) return;
    if (!this.deps.mayWrite()) return;
    // The Node says which instance it is; its CiliumNode, where it has one, says it otherwise.
    const cilium = ciliumSpecFields(this.deps.cache.ciliumNode?.(node.name));
    const spec: PoolPatch['spec'] & ENIPoolSpec = {
      nodeName: node.name,
      instanceID: node.instanceId ?? cilium.instanceID ?? (await this.instanceOf(node)),
      instanceType: node.instanceType ?? cilium.instanceType,
      zoneID: node.zoneId ?? cilium.zoneID,
      vpcID: this.deps.config.vpcId,
      className: cls.metadata.name,
    };
    // A field the class drops is dropped from the pool too (null in the merge patch).
    for (const f of POLICY_FIELDS) (spec as Record<string, unknown>)[f] = cilium[f] ?? cls.spec[f] ?? null;
    const labels = { 'eniipam.io/class': cls.metadata.name };
    if (!existing) {
      const clean = Object.fromEntries(
        Object.entries(spec).filter(([, v]) => v !== null && v !== undefined),
      ) as ENIPoolSpec;
      const created = await this.deps.store.createPool({
        apiVersion: API_VERSION,
        kind: 'ENIPool',
        metadata: { name: node.name, labels },
        spec: clean,
      });
      if (created) this.deps.logger.info({ node: node.name, class: cls.metadata.name }, 'created ENIPool');
      return;
    }
    const differs = Object.entries(spec).some(
      ([k, v]) => v !== null && !sameJson(v, (existing.spec as Record<string, unknown>)[k]),
    );
    const dropped = POLICY_FIELDS.some((f) => spec[f] === null && existing.spec[f] !== undefined);
    if (differs || dropped || existing.metadata.annotations?.[MISMATCH_ANNOTATION]) {
      // Planned on the cached pool: refused if the pool changed since (the user may have just taken it over).
      await this.deps.store.patchPool(node.name, {
        metadata: {
          labels,
          annotations: { [MISMATCH_ANNOTATION]: null },
          resourceVersion: existing.metadata.resourceVersion,
        },
        spec,
      });
      if (existing.spec.className !== cls.metadata.name)
        this.deps.logger.info(
          { node: node.name, class: cls.metadata.name, was: existing.spec.className },
          'ENIPool now follows another class',
        );
    }
  }
}
