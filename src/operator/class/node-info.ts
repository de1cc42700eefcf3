import type { V1Node } from '@kubernetes/client-node';
import type { LabelSelector } from '../../api/types.js';

export interface NodeInfo {
  name: string;
  instanceId?: string;
  instanceType?: string;
  zoneId?: string;
  internalIp?: string;
  labels: Record<string, string>;
}

/**
 * Reads the ECS instance of a Node: providerID `<region>.<instance>` (with or without
 * `alicloud://`), standard labels.
 */
export function nodeInfo(node: V1Node): NodeInfo {
  const labels = node.metadata?.labels ?? {};
  const provider = node.spec?.providerID ?? '';
  const m = /(?:^|[./])(i-[0-9a-z-]+)$/.exec(provider);
  return {
    name: node.metadata?.name ?? '',
    instanceId: m?.[1],
    instanceType: labels['node.kubernetes.io/instance-type'] ?? labels['beta.kubernetes.io/instance-type'],
    zoneId: labels['topology.kubernetes.io/zone'] ?? labels['failure-domain.beta.kubernetes.io/zone'],
    internalIp: node.status?.addresses?.find((a) => a.type === 'InternalIP')?.address,
    labels,
  };
}

/** A standard LabelSelector against labels; an empty selector selects everything. */
export function selectorMatches(sel: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!sel) return true;
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const values = e.values ?? [];
    const ok =
      e.operator === 'In'
        ? has && values.includes(labels[e.key]!)
        : e.operator === 'NotIn'
          ? !has || !values.includes(labels[e.key]!)
          : e.operator === 'Exists'
            ? has
            : !has;
    if (!ok) return false;
  }
  return true;
}

/** The class that governs a node: the highest priority among those that select it, ties to the first name. */
export function winningClass<
  C extends { metadata: { name: string }; spec: { priority?: number; nodeSelector?: LabelSelector } },
>(classes: readonly C[], labels: Record<string, string>): C | undefined {
  return classes
    .filter((c) => selectorMatches(c.spec.nodeSelector, labels))
    .sort((a, b) => (b.spec.priority ?? 0) - (a.spec.priority ?? 0) || (a.metadata.name < b.metadata.name ? -1 : 1))[0];
}
