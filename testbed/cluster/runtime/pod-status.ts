/* eslint-disable @typescript-eslint/no-explicit-any */
import type { ChildProcess } from 'node:child_process';
import type { KubeObject } from '../../kube/core/types.js';
import type { KubeletObjects } from './node-api.js';
import type { ContainerSpec, LogBuffer } from './container.js';
import type { PodSandbox } from './pod-sandbox.js';
import type { TokenFile } from './volumes.js';

export const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

/** A condition list with one condition set; its lastTransitionTime moves only when the status changes. */
export function setCondition(
  conditions: any[] | undefined,
  c: { type: string; status: string; reason?: string; message?: string },
  extra: Record<string, string> = {},
): any[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((x) => x.type === c.type);
  const old = i >= 0 ? list[i] : undefined;
  const t = now();
  const next = { ...extra, ...c, lastTransitionTime: old && old.status === c.status ? old.lastTransitionTime : t };
  if (old && old.status === next.status && old.reason === next.reason && old.message === next.message) return list;
  if (i >= 0) list[i] = { ...old, ...next };
  else list.push(next);
  return list;
}

/** One container as the kubelet runs it. */
export interface ContainerRun {
  spec: any;
  init: boolean;
  log: LogBuffer;
  previous?: LogBuffer;
  proc?: ChildProcess;
  restartCount: number;
  state: any;
  lastState: any;
  ready: boolean;
  started: boolean;
  backoffMs: number;
  timers: NodeJS.Timeout[];
  exited?: Promise<number>;
  /** How the running process was started (user, env...): commands run in it (`kubectl exec`) the same way. */
  process?: ContainerSpec;
  /** Commands running in it (`kubectl exec`): they end with it. */
  execs: Set<ChildProcess>;
}

/** One pod as the kubelet runs it. */
export interface PodRun {
  uid: string;
  pod: KubeObject;
  netns?: string;
  /** The sandbox made for a pod outside the host network (its namespace and networks). */
  sandbox?: PodSandbox;
  /** Failed sandboxes whose teardown (DEL) failed: removed again before the next one, and with the pod. */
  leftovers: PodSandbox[];
  /** Settles when a sandbox being made is made or has failed. */
  sandboxing?: Promise<unknown>;
  podIP?: string;
  /** All of the pod's addresses (dual stack), IPv4 first. */
  podIPs?: string[];
  podDir: string;
  startTime: string;
  initialized: boolean;
  containers: Map<string, ContainerRun>;
  tokens: TokenFile[];
  tokenTimers: NodeJS.Timeout[];
  terminating: boolean;
  gone: boolean;
  /** Why the pod cannot start (shown on its containers while it waits). */
  waiting?: { reason: string; message: string };
  /** Set when every container has finished for good (restartPolicy Never or OnFailure). */
  finalPhase?: 'Succeeded' | 'Failed';
  statusTimer?: NodeJS.Timeout;
}

/** A pod's status from what the kubelet knows: phase, conditions, addresses, container states. */
export function podStatus(run: PodRun, pod: KubeObject, node: string, hostIP: string): any {
  const view = (c: ContainerRun) => ({
    name: c.spec.name,
    state: run.waiting && !c.proc ? { waiting: run.waiting } : c.state,
    lastState: c.lastState,
    ready: c.ready,
    restartCount: c.restartCount,
    image: c.spec.image,
    imageID: '',
    containerID: c.proc?.pid ? `emulated://${node}/${c.proc.pid}` : undefined,
    started: c.init ? undefined : c.started,
  });
  const inits = [...run.containers.values()].filter((c) => c.init);
  const mains = [...run.containers.values()].filter((c) => !c.init);
  const ready = run.initialized && mains.length > 0 && mains.every((c) => c.ready);
  const phase =
    run.finalPhase ??
    (run.initialized && mains.some((c) => c.proc || c.state.terminated || c.lastState.terminated)
      ? 'Running'
      : 'Pending');
  // Pods bound by their controller (DaemonSets) never went through the scheduler's condition.
  let conditions = setCondition(pod.status?.conditions, { type: 'PodScheduled', status: 'True' });
  conditions = setCondition(conditions, { type: 'PodReadyToStartContainers', status: run.netns ? 'True' : 'False' });
  conditions = setCondition(
    conditions,
    run.initialized || !inits.length
      ? { type: 'Initialized', status: 'True' }
      : {
          type: 'Initialized',
          status: 'False',
          reason: 'ContainersNotInitialized',
          message: `containers with incomplete status: [${inits
            .filter((c) => !c.state.terminated || c.state.terminated.exitCode !== 0)
            .map((c) => c.spec.name)
            .join(' ')}]`,
        },
  );
  const notReady = mains.filter((c) => !c.ready).map((c) => c.spec.name);
  const readyCond = ready
    ? { status: 'True' }
    : {
        status: 'False',
        reason: 'ContainersNotReady',
        message: `containers with unready status: [${notReady.join(' ')}]`,
      };
  conditions = setCondition(conditions, { type: 'ContainersReady', ...readyCond });
  conditions = setCondition(conditions, { type: 'Ready', ...readyCond });
  return {
    ...pod.status,
    phase,
    conditions,
    hostIP,
    hostIPs: [{ ip: hostIP }],
    podIP: run.podIP,
    podIPs: (run.podIPs ?? (run.podIP ? [run.podIP] : undefined))?.map((ip) => ({ ip })),
    startTime: run.startTime,
    initContainerStatuses: inits.length ? inits.map(view) : undefined,
    containerStatuses: mains.map(view),
  };
}

/** An Event about a pod, as the kubelet reports it. */
export function recordPodEvent(
  objects: Pick<KubeletObjects, 'create'>,
  pod: KubeObject,
  node: string,
  type: 'Normal' | 'Warning',
  reason: string,
  message: string,
): void {
  const at = now();
  {
    objects.create('events', {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: {
        name: `${pod.metadata.name}.${Date.now().toString(16)}${Math.random().toString(16).slice(2, 6)}`,
        namespace: pod.metadata.namespace,
      },
      involvedObject: {
        kind: 'Pod',
        namespace: pod.metadata.namespace,
        name: pod.metadata.name,
        uid: pod.metadata.uid,
        apiVersion: 'v1',
      },
      reason,
      message,
      type,
      source: { component: 'kubelet', host: node },
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
      reportingComponent: 'kubelet',
      reportingInstance: node,
    });
  }
}
