/* eslint-disable @typescript-eslint/no-explicit-any */
import type { KubeObject } from '../../kube/types.js';

/** Whether a toleration tolerates a taint (an empty key with Exists tolerates everything). */
export function tolerates(t: any, taint: any): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if ((t.operator ?? 'Equal') === 'Exists') return !t.key || t.key === taint.key;
  return t.key === taint.key && (t.value ?? '') === (taint.value ?? '');
}

function termMatches(term: any, node: KubeObject): boolean {
  const labels = node.metadata.labels ?? {};
  const check = (e: any, value: string | undefined) => {
    const values: string[] = e.values ?? [];
    switch (e.operator) {
      case 'In':
        return value !== undefined && values.includes(value);
      case 'NotIn':
        return value === undefined || !values.includes(value);
      case 'Exists':
        return value !== undefined;
      case 'DoesNotExist':
        return value === undefined;
      case 'Gt':
        return value !== undefined && Number(value) > Number(values[0]);
      case 'Lt':
        return value !== undefined && Number(value) < Number(values[0]);
      default:
        return false;
    }
  };
  return (
    (term.matchExpressions ?? []).every((e: any) => check(e, labels[e.key])) &&
    (term.matchFields ?? []).every((e: any) => check(e, e.key === 'metadata.name' ? node.metadata.name : undefined))
  );
}

/**
 * Why a pod cannot go to a node, or undefined when it fits, in the scheduler's filter order:
 * taints with NoSchedule or NoExecute effects the pod does not tolerate, then nodeSelector
 * and required node affinity.
 */
export function unfitReason(
  podSpec: any,
  node: KubeObject,
  o: { ignoreUnschedulable?: boolean } = {},
): string | undefined {
  const taints: any[] = [...(node.spec?.taints ?? [])];
  if (node.spec?.unschedulable && !o.ignoreUnschedulable)
    taints.push({ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' });
  for (const taint of taints) {
    if (taint.effect !== 'NoSchedule' && taint.effect !== 'NoExecute') continue;
    if (!(podSpec?.tolerations ?? []).some((t: any) => tolerates(t, taint)))
      return `had untolerated taint {${taint.key}: ${taint.value ?? ''}}`;
  }
  for (const [k, v] of Object.entries(podSpec?.nodeSelector ?? {})) {
    if (node.metadata.labels?.[k] !== v) return "didn't match Pod's node affinity/selector";
  }
  const terms = podSpec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (terms?.length && !terms.some((t: any) => termMatches(t, node)))
    return "didn't match Pod's node affinity/selector";
  return undefined;
}

export const nodeReady = (n: KubeObject): boolean =>
  (n.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
