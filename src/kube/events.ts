import { apiErrorMessage, ignoreNotFound } from './errors.js';
import { CoreV1Api, type CoreV1Event, type KubeConfig } from '@kubernetes/client-node';
import { systemClock, type Clock } from '../clock.js';
import type { Logger } from '../observability/logger.js';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  name: string;
  uid?: string;
  namespace?: string;
}

/**
 * Where the API server keeps Events about cluster-scoped objects (pools, classes, nodes): its
 * validation refuses any other namespace for an Event whose involvedObject has none (422
 * "involvedObject.namespace: ... does not match event.namespace"), as client-go's recorder knows.
 */
export const CLUSTER_SCOPED_EVENTS_NAMESPACE = 'default';

/**
 * Records core/v1 Events on objects, so `kubectl describe` explains each decision. A repeat of
 * the same reason and message on the same object within ten minutes bumps the count of the
 * existing Event instead of creating another (`fold: false`: a recorder whose Events never repeat
 * only creates, and needs no right to patch). Failures to record are logged, never raised.
 */
export class EventRecorder {
  private readonly api: CoreV1Api;
  private readonly recent = new Map<string, { name: string; count: number; at: number; first: string }>();

  constructor(
    kc: KubeConfig,
    private readonly component: string,
    private readonly logger: Logger,
    private readonly options: {
      fold?: boolean;
      /** `reason`: a repeat of the reason folds whatever its message, which the Event then shows (client-go's aggregation). */
      foldBy?: 'message' | 'reason';
      clock?: Clock;
    } = {},
  ) {
    this.api = kc.makeApiClient(CoreV1Api);
  }

  async record(target: EventTarget, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const namespace = target.namespace ?? CLUSTER_SCOPED_EVENTS_NAMESPACE;
    // Same-named objects in two namespaces, or a pod made again under its old name, are other objects.
    const byReason = this.options.foldBy === 'reason';
    const key = `${namespace}/${target.kind}/${target.name}/${target.uid ?? ''}/${reason}${byReason ? '' : `/${message}`}`;
    const now = new Date((this.options.clock ?? systemClock).now());
    const stamp = now.toISOString().replace(/\.\d{3}Z$/, 'Z');
    try {
      const prev = this.options.fold === false ? undefined : this.recent.get(key);
      if (prev && now.getTime() - prev.at < 10 * 60_000) {
        prev.count++;
        prev.at = now.getTime();
        const folded = this.api
          .patchNamespacedEvent({
            name: prev.name,
            namespace,
            body: [
              { op: 'replace', path: '/count', value: prev.count },
              { op: 'replace', path: '/lastTimestamp', value: stamp },
              ...(byReason ? [{ op: 'replace', path: '/message', value: message }] : []),
            ],
          })
          .then(() => true);
        // The Event expired or was deleted (404): say it again in a new one rather than not at all.
        if ((await ignoreNotFound(folded)) !== undefined) return;
        this.recent.delete(key);
      }
      const body: CoreV1Event = {
        metadata: { generateName: `${target.name}.`, namespace },
        involvedObject: {
          apiVersion: target.apiVersion,
          kind: target.kind,
          name: target.name,
          uid: target.uid,
          namespace: target.namespace,
        },
        type,
        reason,
        message,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: this.component },
        reportingComponent: this.component,
      };
      const created = await this.api.createNamespacedEvent({ namespace, body });
      this.recent.set(key, { name: created.metadata!.name!, count: 1, at: now.getTime(), first: stamp });
      if (this.recent.size > 10_000) this.recent.delete(this.recent.keys().next().value!);
    } catch (e) {
      this.logger.warn({ reason, object: target.name, err: apiErrorMessage(e) }, 'could not record an Event');
    }
  }
}
