import type { Logger } from '../../../src/observability/logger.js';
import type { Objects } from '../objects.js';
import { reconcileDaemonSets } from './daemonset.js';
import { reconcileDeployments } from './deployment.js';
import { collectGarbage } from './garbage-collector.js';
import { reconcileReplicaSets } from './replicaset.js';
import { reconcileNamespaceDefaults } from './namespace-defaults.js';
import { schedulePods } from './scheduler.js';

export interface Controllers {
  stop(): void;
}

/**
 * The workload controllers a kube-controller-manager and kube-scheduler run, in process
 * next to the emulated API server: namespace defaults (the `default` ServiceAccount, the
 * root CA ConfigMap), garbage collection, Deployments, ReplicaSets, DaemonSets and
 * scheduling. A pass runs shortly after any change to their kinds, and every second
 * (minReadySeconds and retries need time to pass).
 */
export function startControllers(objects: Objects, logger: Logger, o: { caCert?: string } = {}): Controllers {
  let scheduled: NodeJS.Timeout | undefined;
  let running = false;
  const pass = () => {
    scheduled = undefined;
    if (running) return;
    running = true;
    try {
      for (const [name, step] of [
        ['namespace-defaults', (x: Objects) => reconcileNamespaceDefaults(x, o.caCert)],
        ['garbage-collector', collectGarbage],
        ['deployment', reconcileDeployments],
        ['replicaset', reconcileReplicaSets],
        ['daemonset', reconcileDaemonSets],
        ['scheduler', schedulePods],
      ] as const) {
        try {
          step(objects);
        } catch (e) {
          logger.error({ controller: name, err: e }, 'controller pass failed');
        }
      }
    } finally {
      running = false;
    }
  };
  const soon = () => {
    scheduled ??= setTimeout(pass, 10);
  };
  const unsubscribe = objects.onChange(
    ['namespaces', 'pods', 'nodes', 'replicasets.apps', 'deployments.apps', 'daemonsets.apps'],
    soon,
  );
  const tick = setInterval(pass, 1000);
  tick.unref();
  soon();
  return {
    stop() {
      unsubscribe();
      clearInterval(tick);
      if (scheduled) clearTimeout(scheduled);
    },
  };
}
