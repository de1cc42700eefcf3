import type { Store } from '../../kube/core/store.js';
import type { KubeObject, ResourceType } from '../../kube/core/types.js';
import type { Objects, OwnerReference } from '../objects.js';

/**
 * Background cascading deletion: an object whose every owner is gone (no object of the
 * owner's kind and name with the owner's uid) is deleted, as the garbage collector does
 * after `kubectl delete` or `helm uninstall` of a Deployment or DaemonSet.
 */
export function collectGarbage(objects: Objects): void {
  const store: Store = objects.store;
  const types = [...store.types.values()];
  const typeOf = (ref: OwnerReference): ResourceType | undefined => {
    const group = ref.apiVersion.includes('/') ? ref.apiVersion.split('/')[0] : '';
    return types.find((t) => t.kind === ref.kind && t.group === group);
  };
  for (const t of types) {
    for (const o of store.list(t)) {
      const refs = o.metadata.ownerReferences as OwnerReference[] | undefined;
      if (!refs?.length || o.metadata.deletionTimestamp) continue;
      const alive = refs.some((ref) => {
        const ot = typeOf(ref);
        if (!ot) return true; // an owner of a kind this server does not serve: leave it be
        const owner: KubeObject | undefined = store.get(ot, ot.namespaced ? o.metadata.namespace : undefined, ref.name);
        return owner?.metadata.uid === ref.uid;
      });
      if (!alive) deleteAny(objects, t, o);
    }
  }
}

function deleteAny(objects: Objects, t: ResourceType, o: KubeObject): void {
  const kind = (t.group ? `${t.resource}.${t.group}` : t.resource) as Parameters<Objects['delete']>[0];
  if (!objects.store.types.get(kind)) return;
  try {
    objects.delete(kind, o.metadata.namespace, o.metadata.name!, { uid: o.metadata.uid });
  } catch {
    // Another writer got there first; the next pass looks again.
  }
}
