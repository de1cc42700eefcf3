import type { KubeObject } from '../../kube/core/types.js';
import { controllerOf, podActive, podAvailable, podReady, type Objects } from '../objects.js';
import { unfitReason } from './node-fit.js';
import { podFromTemplate } from './replicaset.js';
import { scaled, templateHash } from './rollout-math.js';

const HASH = 'controller-revision-hash';

/**
 * One pod of each DaemonSet on every Node that matches its nodeSelector and affinity and
 * whose taints it tolerates (unschedulable nodes included, as the real controller does);
 * RollingUpdate replaces outdated pods within maxUnavailable, OnDelete only replaces
 * deleted ones. Status as kubectl rollout status and helm --wait read it.
 */
export function reconcileDaemonSets(objects: Objects): void {
  const nodes = objects.list('nodes');
  for (const ds of objects.list('daemonsets.apps')) {
    if (ds.metadata.deletionTimestamp) continue;
    const hash = templateHash(ds.spec?.template);
    const all = objects.list('pods', ds.metadata.namespace).filter((p) => controllerOf(p)?.uid === ds.metadata.uid);
    const onNode = (n: string) => all.filter((p) => p.spec?.nodeName === n);
    const wanted = nodes.filter(
      (n) => !n.metadata.deletionTimestamp && !unfitReason(ds.spec?.template?.spec, n, { ignoreUnschedulable: true }),
    );
    const wantedNames = new Set(wanted.map((n) => n.metadata.name!));
    const minReady = ds.spec?.minReadySeconds ?? 0;
    const updated = (p: KubeObject) => p.metadata.labels?.[HASH] === hash;

    for (const p of all)
      if (podActive(p) && !wantedNames.has(p.spec?.nodeName))
        objects.delete('pods', p.metadata.namespace, p.metadata.name!);
    for (const n of wanted) {
      const pods = onNode(n.metadata.name!);
      const active = pods.filter(podActive);
      if (!pods.some((p) => !podActive(p) && p.metadata.deletionTimestamp) && active.length === 0) {
        objects.create(
          'pods',
          podFromTemplate(
            ds,
            ds.spec.template,
            { [HASH]: hash, 'pod-template-generation': String(ds.metadata.generation ?? 1) },
            n.metadata.name,
          ),
        );
      }
      // Two pods on one node (a race): keep the updated, oldest one.
      const sorted = [...active].sort(
        (a, b) =>
          Number(updated(b)) - Number(updated(a)) ||
          Date.parse(a.metadata.creationTimestamp ?? '') - Date.parse(b.metadata.creationTimestamp ?? ''),
      );
      for (const extra of sorted.slice(1)) objects.delete('pods', extra.metadata.namespace, extra.metadata.name!);
    }

    if ((ds.spec?.updateStrategy?.type ?? 'RollingUpdate') === 'RollingUpdate') {
      const maxUnavailable = Math.max(
        1,
        scaled(ds.spec?.updateStrategy?.rollingUpdate?.maxUnavailable, wanted.length, true, 1),
      );
      const current = (n: KubeObject) => onNode(n.metadata.name!).filter(podActive)[0];
      let unavailable = wanted.filter((n) => {
        const p = current(n);
        return !p || !podAvailable(p, minReady);
      }).length;
      for (const n of wanted) {
        const p = current(n);
        if (!p || updated(p)) continue;
        if (!podAvailable(p, minReady)) {
          objects.delete('pods', p.metadata.namespace, p.metadata.name!);
        } else if (unavailable < maxUnavailable) {
          objects.delete('pods', p.metadata.namespace, p.metadata.name!);
          unavailable++;
        }
      }
    }

    const fresh = objects
      .list('pods', ds.metadata.namespace)
      .filter((p) => controllerOf(p)?.uid === ds.metadata.uid && podActive(p));
    const scheduled = wanted.filter((n) => fresh.some((p) => p.spec?.nodeName === n.metadata.name));
    const podOn = (n: KubeObject) => fresh.find((p) => p.spec?.nodeName === n.metadata.name);
    const available = wanted.filter((n) => {
      const p = podOn(n);
      return p && podAvailable(p, minReady);
    }).length;
    objects.updateStatus('daemonsets.apps', ds.metadata.namespace, ds.metadata.name!, {
      currentNumberScheduled: scheduled.length,
      numberMisscheduled: fresh.filter((p) => !wantedNames.has(p.spec?.nodeName)).length,
      desiredNumberScheduled: wanted.length,
      numberReady: wanted.filter((n) => {
        const p = podOn(n);
        return p && podReady(p);
      }).length,
      observedGeneration: ds.metadata.generation,
      updatedNumberScheduled: wanted.filter((n) => {
        const p = podOn(n);
        return p && updated(p);
      }).length,
      numberAvailable: available,
      numberUnavailable: wanted.length - available,
    });
  }
}
