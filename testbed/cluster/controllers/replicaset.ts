/* eslint-disable @typescript-eslint/no-explicit-any */
import type { KubeObject } from '../../kube/core/types.js';
import {
  controllerOf,
  ownerRef,
  podActive,
  podAvailable,
  podReady,
  selectorMatches,
  type Objects,
} from '../objects.js';
import { nameSuffix } from './rollout-math.js';

/** The active pods a ReplicaSet or DaemonSet controls. */
export function ownedPods(objects: Objects, owner: KubeObject): KubeObject[] {
  return objects.list('pods', owner.metadata.namespace).filter((p) => controllerOf(p)?.uid === owner.metadata.uid);
}

/** A new pod from an owner's template, as the controllers create them (generateName, controller reference). */
export function podFromTemplate(
  owner: KubeObject,
  template: any,
  extraLabels: Record<string, string> = {},
  nodeName?: string,
): KubeObject {
  const t = structuredClone(template ?? {});
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${owner.metadata.name}-${nameSuffix()}`,
      generateName: `${owner.metadata.name}-`,
      namespace: owner.metadata.namespace,
      labels: { ...(t.metadata?.labels ?? {}), ...extraLabels },
      annotations: t.metadata?.annotations,
      ownerReferences: [ownerRef(owner)],
    },
    spec: nodeName ? { ...t.spec, nodeName } : t.spec,
  };
}

/** Which pods go first when scaling down: unscheduled, then not ready, then the newest. */
function deletionOrder(a: KubeObject, b: KubeObject): number {
  const rank = (p: KubeObject) => (p.spec?.nodeName ? 0 : 2) + (podReady(p) ? 0 : 1);
  return (
    rank(b) - rank(a) ||
    Date.parse(b.metadata.creationTimestamp ?? '') - Date.parse(a.metadata.creationTimestamp ?? '') ||
    (b.metadata.name! < a.metadata.name! ? -1 : 1)
  );
}

/**
 * Keeps `spec.replicas` pods of each ReplicaSet's template, and its status: replicas,
 * fullyLabeledReplicas, readyReplicas, availableReplicas, observedGeneration.
 */
export function reconcileReplicaSets(objects: Objects): void {
  for (const rs of objects.list('replicasets.apps')) {
    if (rs.metadata.deletionTimestamp) continue;
    const pods = ownedPods(objects, rs);
    const active = pods.filter(podActive);
    const want = rs.spec?.replicas ?? 1;
    if (active.length < want) {
      for (let i = active.length; i < want; i++) objects.create('pods', podFromTemplate(rs, rs.spec.template));
    } else if (active.length > want) {
      for (const p of [...active].sort(deletionOrder).slice(0, active.length - want))
        objects.delete('pods', p.metadata.namespace, p.metadata.name!);
    }
    const now = objects
      .list('pods', rs.metadata.namespace)
      .filter((p) => controllerOf(p)?.uid === rs.metadata.uid && podActive(p));
    const minReady = rs.spec?.minReadySeconds ?? 0;
    objects.updateStatus('replicasets.apps', rs.metadata.namespace, rs.metadata.name!, {
      replicas: now.length,
      fullyLabeledReplicas: now.filter((p) =>
        selectorMatches({ matchLabels: rs.spec?.template?.metadata?.labels ?? {} }, p.metadata.labels),
      ).length,
      readyReplicas: now.filter(podReady).length,
      availableReplicas: now.filter((p) => podAvailable(p, minReady)).length,
      observedGeneration: rs.metadata.generation,
    });
  }
}
