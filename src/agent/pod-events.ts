import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../clock.js';
import { apiErrorMessage } from '../kube/errors.js';
import { EventRecorder } from '../kube/events.js';
import type { Logger } from '../observability/logger.js';

/** The pod of a CNI call: `namespace/name` from CNI_ARGS, and its UID when the runtime passed K8S_POD_UID. */
export interface PodRef {
  pod: string;
  podUid?: string;
}

export interface PodEventPolicy {
  /** A pod's Event is written again at most this often while its reason stays the same (repeats fold into its count, the message the latest). */
  intervalMs: number;
  /** A changed reason is written at once, but at most this often per pod. */
  changedGapMs: number;
  /** Node-wide: a burst of this many writes, then `perSecond`. */
  burst: number;
  perSecond: number;
  /** Pods remembered; the longest unheard-of goes first. */
  maxPods: number;
}

export const DEFAULT_POD_EVENT_POLICY: PodEventPolicy = {
  intervalMs: 30_000,
  changedGapMs: 5_000,
  burst: 25,
  perSecond: 1,
  maxPods: 2_000,
};

/** The default policy with another interval (a change of reason is never held back longer than it). */
export const podEventPolicy = (intervalMs: number): PodEventPolicy => ({
  ...DEFAULT_POD_EVENT_POLICY,
  intervalMs,
  changedGapMs: Math.min(DEFAULT_POD_EVENT_POLICY.changedGapMs, intervalMs),
});

interface Told {
  at: number;
  reason: string;
  /** When the pod first waited (for the Event that says it got an address). */
  since: number;
}

/**
 * Which pod Events to write now. A runtime retries a failed ADD for as long as the pod exists, so
 * without this a node of waiting pods would write an Event per retry: per pod, a reason is said
 * once and then at most once per interval (the recorder folds repeats into one Event's count, with
 * the latest message); a new reason is said at once, but not more often than the gap; a clock
 * stepped back holds nothing back; and the node as a whole is held to
 * a token bucket, so the API server never sees a storm from one node. Pure: time is passed in.
 */
export class PodEventGate {
  private readonly told = new Map<string, Told>();
  private tokens: number;
  private refilledAt?: number;

  constructor(private readonly policy: PodEventPolicy) {
    this.tokens = policy.burst;
  }

  /**
   * Whether to write this pod's warning of `reason` now; remembers it when so. Only the reason
   * counts: its message carries live numbers (IPs in use, coming), which change on every retry.
   */
  admit(pod: string, reason: string, now: number): boolean {
    const prev = this.told.get(pod);
    if (prev) {
      const since = now - prev.at;
      // A clock stepped back holds nothing back.
      if (since >= 0 && since < (prev.reason === reason ? this.policy.intervalMs : this.policy.changedGapMs))
        return false;
    }
    if (!this.take(now)) return false;
    this.told.delete(pod); // re-inserted last: the map's order is the order pods were last heard of
    this.told.set(pod, { at: now, reason, since: prev && prev.since <= now ? prev.since : now });
    while (this.told.size > this.policy.maxPods) this.told.delete(this.told.keys().next().value!);
    return true;
  }

  /** The pod got its address: when it began to wait, if a warning was written for it (and forgets it). */
  served(pod: string, now: number): number | undefined {
    const prev = this.told.get(pod);
    if (!prev) return undefined;
    this.told.delete(pod);
    return this.take(now) ? prev.since : undefined;
  }

  private take(now: number): boolean {
    // A clock stepped back refills nothing and takes nothing away.
    if (this.refilledAt !== undefined)
      this.tokens = Math.min(
        this.policy.burst,
        this.tokens + (Math.max(0, now - this.refilledAt) * this.policy.perSecond) / 1000,
      );
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/**
 * Events on the pods whose ADD waits or fails, where users look first (`kubectl describe pod`):
 * what the pod waits for, in the pool's own words, and the address once it has one. Written in the
 * pod's namespace against its UID (kubectl matches on it): from K8S_POD_UID, or else looked up.
 * Failures to record are logged, never raised: an Event is never worth a failed ADD.
 */
export class PodEvents {
  private readonly gate: PodEventGate;
  private readonly recorder: EventRecorder;
  private readonly core: CoreV1Api;

  constructor(
    kc: KubeConfig,
    private readonly o: { node: string; clock: Clock; logger: Logger; policy?: PodEventPolicy },
  ) {
    this.gate = new PodEventGate(o.policy ?? DEFAULT_POD_EVENT_POLICY);
    this.recorder = new EventRecorder(kc, 'eni-ipam-agent', o.logger, { clock: o.clock, foldBy: 'reason' });
    this.core = kc.makeApiClient(CoreV1Api);
  }

  /** The ADD found no address, or its datapath failed (reason, message: what it waits for and why). */
  waiting(ref: PodRef, reason: string, message: string): void {
    if (!named(ref.pod) || !this.gate.admit(key(ref), reason, this.o.clock.now())) return;
    void this.record(ref, 'Warning', reason, message);
  }

  /** The ADD answered an address: said only for a pod that was told it waits. */
  served(ref: PodRef, ip: string, eniId: string): void {
    if (!named(ref.pod)) return;
    const since = this.gate.served(key(ref), this.o.clock.now());
    if (since === undefined) return;
    const waited = Math.max(0, Math.round((this.o.clock.now() - since) / 1000));
    void this.record(ref, 'Normal', 'PodIPAssigned', `${ip} (ENI ${eniId}) on node ${this.o.node}, after ${waited} s`);
  }

  private async record(ref: PodRef, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const [namespace, name] = ref.pod.split('/') as [string, string];
    const uid = ref.podUid ?? (await this.uidOf(namespace, name));
    if (!uid) return;
    await this.recorder.record({ apiVersion: 'v1', kind: 'Pod', namespace, name, uid }, type, reason, message);
  }

  /** Through a list by name (the agent may list pods; it has no right to get one). */
  private async uidOf(namespace: string, name: string): Promise<string | undefined> {
    try {
      const list = await this.core.listNamespacedPod({ namespace, fieldSelector: `metadata.name=${name}` });
      return list.items[0]?.metadata?.uid;
    } catch (e) {
      this.o.logger.warn(
        { node: this.o.node, pod: `${namespace}/${name}`, err: apiErrorMessage(e) },
        'cannot find the pod to record an Event on',
      );
      return undefined;
    }
  }
}

/** A call without K8S_POD_NAMESPACE and K8S_POD_NAME names no pod to tell. */
const named = (pod: string) => !pod.startsWith('unknown/') && pod.split('/').length === 2;
const key = (ref: PodRef) => `${ref.pod}/${ref.podUid ?? ''}`;
