/* eslint-disable @typescript-eslint/no-explicit-any */
import type { KubeObject } from '../../kube/core/types.js';

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

/** A host port a container asks for: its hostIP (0.0.0.0 when absent), protocol (TCP when absent) and port. */
interface HostPort {
  ip: string;
  protocol: string;
  port: number;
}

/**
 * The host ports a pod holds on its node, as the NodePorts filter reads them: every port of its
 * containers (and of its restartable init containers) with a hostPort above 0.
 */
export function hostPorts(podSpec: any): HostPort[] {
  const containers: any[] = [
    ...(podSpec?.initContainers ?? []).filter((c: any) => c.restartPolicy === 'Always'),
    ...(podSpec?.containers ?? []),
  ];
  return containers.flatMap((c) =>
    (c.ports ?? [])
      .filter((p: any) => Number(p.hostPort) > 0)
      .map((p: any) => ({ ip: p.hostIP || '0.0.0.0', protocol: p.protocol ?? 'TCP', port: Number(p.hostPort) })),
  );
}

const portsClash = (a: HostPort, b: HostPort) =>
  a.port === b.port && a.protocol === b.protocol && (a.ip === b.ip || a.ip === '0.0.0.0' || b.ip === '0.0.0.0');

/** Resources the emulated nodes do not account (no kubelet reports them): only extended resources are fitted. */
const NATIVE = /^(cpu|memory|ephemeral-storage|pods|hugepages-.*|storage)$/;

/**
 * The extended resources (a vendor's `domain/name`, e.g. eniipam.io/eni) a pod requests, as the
 * NodeResourcesFit filter sums them: each container's request (its limit when it sets no
 * request: extended resources cannot be overcommitted), and the larger of that and any one init
 * container's.
 */
export function extendedRequests(podSpec: any): Map<string, number> {
  const of = (c: any): Record<string, unknown> => ({
    ...(c.resources?.limits ?? {}),
    ...(c.resources?.requests ?? {}),
  });
  const out = new Map<string, number>();
  for (const c of podSpec?.containers ?? [])
    for (const [k, v] of Object.entries(of(c)))
      if (!NATIVE.test(k) && k.includes('/')) out.set(k, (out.get(k) ?? 0) + Number(v));
  for (const c of podSpec?.initContainers ?? [])
    for (const [k, v] of Object.entries(of(c)))
      if (!NATIVE.test(k) && k.includes('/')) out.set(k, Math.max(out.get(k) ?? 0, Number(v)));
  return out;
}

/** The taint the node lifecycle controller puts on a node whose Ready condition is not True. */
export const NOT_READY_TAINT = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' };

/**
 * Why a pod cannot go to a node, or undefined when it fits, in the scheduler's filter order:
 * taints with NoSchedule or NoExecute effects the pod does not tolerate (`extraTaints` too),
 * then nodeSelector and required node affinity, then extended resources (the node's allocatable
 * less what its pods request), then host ports another pod of the node
 * (`podsOnNode`: every pod bound to it that has not finished, terminating ones included)
 * already holds.
 */
export function unfitReason(
  podSpec: any,
  node: KubeObject,
  o: { ignoreUnschedulable?: boolean; extraTaints?: any[]; podsOnNode?: KubeObject[] } = {},
): string | undefined {
  const taints: any[] = [...(node.spec?.taints ?? [])];
  for (const extra of o.extraTaints ?? [])
    if (!taints.some((t) => t.key === extra.key && t.effect === extra.effect)) taints.push(extra);
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
  // NodeResourcesFit, for extended resources: what the node's pods request leaves enough of its allocatable.
  for (const [name, want] of extendedRequests(podSpec)) {
    const allocatable = Number(node.status?.allocatable?.[name] ?? 0);
    const held = (o.podsOnNode ?? []).reduce((n, p) => n + (extendedRequests(p.spec).get(name) ?? 0), 0);
    if (held + want > allocatable) return `Insufficient ${name}`;
  }
  const wanted = hostPorts(podSpec);
  if (wanted.length) {
    const held = (o.podsOnNode ?? []).flatMap((p) => hostPorts(p.spec));
    if (wanted.some((w) => held.some((h) => portsClash(w, h))))
      return "didn't have free ports for the requested pod ports";
  }
  return undefined;
}

export const nodeReady = (n: KubeObject): boolean =>
  (n.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
