import type { KubeObject } from '../../kube/core/types.js';
import { controllerOf, podActive, setCondition, type Objects } from '../objects.js';
import { NOT_READY_TAINT, nodeReady, unfitReason } from './node-fit.js';

/** Pods that hold a node's resources and ports: bound and not finished (terminating ones still run). */
const holdsNode = (p: KubeObject): boolean =>
  Boolean(p.spec?.nodeName) && !['Succeeded', 'Failed'].includes(p.status?.phase);

/**
 * Binds pending pods to Nodes: a node must be schedulable, carry no taint the pod does not
 * tolerate (a node that is not Ready counts as tainted `node.kubernetes.io/not-ready:NoSchedule`,
 * as the node lifecycle controller taints it), match the pod's nodeSelector and required
 * affinity, and have the host ports the pod asks for free (the NodePorts filter); among those,
 * the one with the fewest pods of the same owner, then the fewest pods (a spread). A pod no
 * node fits gets PodScheduled=False with the scheduler's message.
 */
export function schedulePods(objects: Objects): void {
  const pending = objects
    .list('pods')
    .filter(
      (p) =>
        !p.spec?.nodeName && podActive(p) && (p.spec?.schedulerName ?? 'default-scheduler') === 'default-scheduler',
    );
  if (!pending.length) return;
  const nodes = objects.list('nodes').filter((n) => !n.metadata.deletionTimestamp);
  for (const pod of pending) {
    const reasons = new Map<string, number>();
    const fits: KubeObject[] = [];
    // Read again for every pod: the pods bound just before hold their ports.
    const holding = objects.list('pods').filter(holdsNode);
    for (const n of nodes) {
      const why = unfitReason(pod.spec, n, {
        extraTaints: nodeReady(n) ? [] : [NOT_READY_TAINT],
        podsOnNode: holding.filter((p) => p.spec.nodeName === n.metadata.name),
      });
      if (why) reasons.set(why, (reasons.get(why) ?? 0) + 1);
      else fits.push(n);
    }
    if (!fits.length) {
      const detail = [...reasons]
        .sort((a, b) => (a[0] < b[0] ? -1 : 1))
        .map(([why, count]) => `${count} node(s) ${why}`)
        .join(', ');
      const message = `0/${nodes.length} nodes are available${detail ? `: ${detail}` : ''}. preemption: not eligible.`;
      objects.updateStatus('pods', pod.metadata.namespace, pod.metadata.name!, {
        ...pod.status,
        phase: 'Pending',
        conditions: setCondition(pod.status?.conditions, {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message,
        }),
      });
      continue;
    }
    const all = objects.list('pods').filter(podActive);
    const owner = controllerOf(pod)?.uid;
    const load = (n: KubeObject) => {
      const here = all.filter((p) => p.spec?.nodeName === n.metadata.name);
      return [owner ? here.filter((p) => controllerOf(p)?.uid === owner).length : 0, here.length];
    };
    const best = fits
      .map((n) => ({ n, l: load(n) }))
      .sort((a, b) => a.l[0]! - b.l[0]! || a.l[1]! - b.l[1]! || (a.n.metadata.name! < b.n.metadata.name! ? -1 : 1))[0]!
      .n;
    const bound = objects.update('pods', { ...pod, spec: { ...pod.spec, nodeName: best.metadata.name } });
    if (!bound) continue;
    objects.updateStatus('pods', pod.metadata.namespace, pod.metadata.name!, {
      ...bound.status,
      phase: bound.status?.phase ?? 'Pending',
      conditions: setCondition(bound.status?.conditions, { type: 'PodScheduled', status: 'True' }),
    });
  }
}
