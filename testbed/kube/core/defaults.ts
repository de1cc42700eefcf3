/* eslint-disable @typescript-eslint/no-explicit-any */

import type { Store } from './store.js';
import type { KubeObject, ResourceType } from './types.js';

const SERVICE_RANGE = { base: (10 << 24) | (96 << 16), size: 1 << 16 };
const ipString = (n: number) => [24, 16, 8, 0].map((s) => (n >>> s) & 255).join('.');

/**
 * Guaranteed (every container's CPU and memory limits equal its requests), Burstable (some request
 * or limit), else BestEffort.
 */
function qosClass(spec: any): string {
  const containers: any[] = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
  const r = (c: any, kind: 'requests' | 'limits', res: string) => c.resources?.[kind]?.[res];
  const guaranteed =
    containers.length > 0 &&
    containers.every((c) =>
      ['cpu', 'memory'].every(
        (res) =>
          r(c, 'limits', res) !== undefined && (r(c, 'requests', res) ?? r(c, 'limits', res)) === r(c, 'limits', res),
      ),
    );
  if (guaranteed) return 'Guaranteed';
  return containers.some(
    (c) => Object.keys(c.resources?.requests ?? {}).length || Object.keys(c.resources?.limits ?? {}).length,
  )
    ? 'Burstable'
    : 'BestEffort';
}

/**
 * The defaults the API server fills in on create for the built-in kinds that need them to
 * work: a Service gets a cluster IP from 10.96.0.0/16 (Helm's --wait waits for one), a Pod
 * starts Pending with its scheduling defaults (and, in the host network, hostPorts), Deployments
 * and DaemonSets get their strategies.
 */
export function applyBuiltinDefaults(store: Store, t: ResourceType, o: KubeObject): void {
  if (!t.builtin) return;
  const key = t.group ? `${t.resource}.${t.group}` : t.resource;
  if (key === 'services') {
    o.spec ??= {};
    o.spec.type ??= 'ClusterIP';
    if (o.spec.type !== 'ExternalName' && !o.spec.clusterIP) {
      const used = new Set(store.list(t).map((s) => s.spec?.clusterIP));
      for (let i = 10; i < SERVICE_RANGE.size - 1; i++) {
        const ip = ipString(SERVICE_RANGE.base + i);
        if (!used.has(ip)) {
          o.spec.clusterIP = ip;
          break;
        }
      }
    }
    if (o.spec.clusterIP) o.spec.clusterIPs ??= [o.spec.clusterIP];
    o.spec.sessionAffinity ??= 'None';
  }
  if (key === 'pods') {
    o.spec ??= {};
    o.spec.restartPolicy ??= 'Always';
    o.spec.terminationGracePeriodSeconds ??= 30;
    o.spec.dnsPolicy ??= 'ClusterFirst';
    o.spec.schedulerName ??= 'default-scheduler';
    o.spec.serviceAccountName ??= o.spec.serviceAccount ?? 'default';
    // In the host network a container port is a port of the node: its hostPort is the
    // containerPort (on Pods only, not on pod templates, since Kubernetes 1.28).
    if (o.spec.hostNetwork)
      for (const c of [...(o.spec.initContainers ?? []), ...(o.spec.containers ?? [])])
        for (const port of c.ports ?? []) if (!port.hostPort) port.hostPort = port.containerPort;
    o.status = { phase: 'Pending', qosClass: qosClass(o.spec), ...o.status };
  }
  if (key === 'deployments.apps') {
    o.spec ??= {};
    o.spec.replicas ??= 1;
    o.spec.revisionHistoryLimit ??= 10;
    o.spec.progressDeadlineSeconds ??= 600;
    o.spec.strategy ??= { type: 'RollingUpdate' };
    if (o.spec.strategy.type === 'RollingUpdate')
      o.spec.strategy.rollingUpdate = { maxSurge: '25%', maxUnavailable: '25%', ...o.spec.strategy.rollingUpdate };
  }
  if (key === 'daemonsets.apps') {
    o.spec ??= {};
    o.spec.revisionHistoryLimit ??= 10;
    o.spec.updateStrategy ??= { type: 'RollingUpdate' };
    if (o.spec.updateStrategy.type === 'RollingUpdate')
      o.spec.updateStrategy.rollingUpdate = { maxUnavailable: 1, maxSurge: 0, ...o.spec.updateStrategy.rollingUpdate };
  }
}
