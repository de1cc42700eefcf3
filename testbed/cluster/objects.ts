/* eslint-disable @typescript-eslint/no-explicit-any */
import { StatusError } from '../kube/core/errors.js';
import { Writer, type Request } from '../kube/core/handlers.js';
import { parseLabelSelector } from '../kube/core/selectors.js';
import type { Store, Watcher } from '../kube/core/store.js';
import { typeKey, type KubeObject, type ResourceType } from '../kube/core/types.js';

/** The kinds the cluster's controllers and node runtimes read and write. */
export type Kind =
  | 'namespaces'
  | 'pods'
  | 'nodes'
  | 'replicasets.apps'
  | 'deployments.apps'
  | 'daemonsets.apps'
  | 'secrets'
  | 'configmaps'
  | 'services'
  | 'events'
  | 'serviceaccounts';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/**
 * The API server's objects as in-process controllers see them: reads straight from the
 * store, writes through the API server's own write path (resourceVersions, generation,
 * the status subresource, graceful pod deletion), and change notifications as a watch
 * delivers them.
 */
export class Objects {
  private readonly writer: Writer;

  constructor(readonly store: Store) {
    this.writer = new Writer(store);
  }

  type(kind: Kind): ResourceType {
    const t = this.store.types.get(kind);
    if (!t) throw new Error(`the Kubernetes emulator serves no ${kind}`);
    return t;
  }

  get(kind: Kind, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.store.get(this.type(kind), namespace, name);
  }

  list(kind: Kind, namespace?: string): KubeObject[] {
    return this.store.list(this.type(kind), namespace);
  }

  private request(
    kind: Kind,
    o: { namespace?: string; name?: string; subresource?: string; body?: unknown; query?: Record<string, string> },
  ): Request {
    const t = this.type(kind);
    return {
      t,
      version: t.versions[0]!,
      namespace: o.namespace,
      name: o.name,
      subresource: o.subresource,
      query: new URLSearchParams({ fieldManager: 'kube-controller-manager', ...o.query }),
      body: o.body === undefined ? undefined : JSON.stringify(o.body),
      contentType: 'application/json',
    };
  }

  create(kind: Kind, obj: KubeObject): KubeObject {
    return this.writer.create(this.request(kind, { namespace: obj.metadata.namespace, body: obj })).body as KubeObject;
  }

  /**
   * Replaces an object (the resourceVersion it carries is a precondition); undefined on a conflict
   * or when it is gone.
   */
  update(kind: Kind, obj: KubeObject): KubeObject | undefined {
    return this.tolerate(
      () =>
        this.writer.update(
          this.request(kind, { namespace: obj.metadata.namespace, name: obj.metadata.name, body: obj }),
        ).body as KubeObject,
    );
  }

  /** Writes the status of the stored object, whatever its resourceVersion. */
  updateStatus(kind: Kind, namespace: string | undefined, name: string, status: unknown): KubeObject | undefined {
    const cur = this.get(kind, namespace, name);
    if (!cur) return undefined;
    if (JSON.stringify(cur.status) === JSON.stringify(status)) return cur;
    return this.tolerate(
      () =>
        this.writer.update(this.request(kind, { namespace, name, subresource: 'status', body: { ...cur, status } }))
          .body as KubeObject,
    );
  }

  /**
   * Deletes as a client would (pods on a node with a runtime terminate gracefully);
   * gracePeriodSeconds 0 removes at once.
   */
  delete(
    kind: Kind,
    namespace: string | undefined,
    name: string,
    opts: { gracePeriodSeconds?: number; uid?: string } = {},
  ): void {
    const body = {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      gracePeriodSeconds: opts.gracePeriodSeconds,
      preconditions: opts.uid ? { uid: opts.uid } : undefined,
    };
    this.tolerate(() => this.writer.delete(this.request(kind, { namespace, name, body })));
  }

  /** Calls `fn` on every change to objects of these kinds. */
  onChange(kinds: Kind[], fn: (kind: Kind, type: string, o: KubeObject) => void): () => void {
    const watchers: Watcher[] = kinds.map((kind) => ({
      key: typeKey(this.type(kind)),
      labels: [],
      fields: [],
      send: (type, o) => fn(kind, type, o),
    }));
    for (const w of watchers) this.store.watchers.add(w);
    return () => watchers.forEach((w) => this.store.watchers.delete(w));
  }

  /** Conflicts and vanished objects are the normal races of controllers: the next pass retries. */
  private tolerate<T>(fn: () => T): T | undefined {
    try {
      return fn();
    } catch (e) {
      if (e instanceof StatusError && (e.code === 409 || e.code === 404)) return undefined;
      throw e;
    }
  }
}

/** Whether a label selector (`matchLabels` and `matchExpressions`) takes in these labels. */
export function selectorMatches(selector: any, labels: Record<string, string> | undefined): boolean {
  if (!selector) return false;
  const l = labels ?? {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(l, e.key);
    const values: string[] = e.values ?? [];
    if (e.operator === 'In' && !(has && values.includes(l[e.key]!))) return false;
    if (e.operator === 'NotIn' && has && values.includes(l[e.key]!)) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

/** A selector as the `labelSelector` query string (what `status.selector` shows). */
export function selectorString(selector: any): string {
  const parts = Object.entries(selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${String(v)}`);
  for (const e of selector?.matchExpressions ?? []) {
    if (e.operator === 'In') parts.push(`${e.key} in (${(e.values ?? []).join(',')})`);
    if (e.operator === 'NotIn') parts.push(`${e.key} notin (${(e.values ?? []).join(',')})`);
    if (e.operator === 'Exists') parts.push(e.key);
    if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
  }
  parseLabelSelector(parts.join(','));
  return parts.join(',');
}

export const controllerOf = (o: KubeObject): OwnerReference | undefined =>
  (o.metadata.ownerReferences as OwnerReference[] | undefined)?.find((r) => r.controller);

export const ownerRef = (owner: KubeObject): OwnerReference => ({
  apiVersion: owner.apiVersion!,
  kind: owner.kind!,
  name: owner.metadata.name!,
  uid: owner.metadata.uid!,
  controller: true,
  blockOwnerDeletion: true,
});

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

/** Whether a pod counts as ready (its Ready condition) and available (ready for minReadySeconds). */
export function podReady(p: KubeObject): boolean {
  return (p.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');
}

export function podAvailable(p: KubeObject, minReadySeconds: number, at = Date.now()): boolean {
  const c = (p.status?.conditions ?? []).find((x: any) => x.type === 'Ready' && x.status === 'True');
  if (!c) return false;
  return minReadySeconds <= 0 || at - Date.parse(c.lastTransitionTime) >= minReadySeconds * 1000;
}

/** Active pods: not terminating and not finished. */
export const podActive = (p: KubeObject): boolean =>
  !p.metadata.deletionTimestamp && !['Succeeded', 'Failed'].includes(p.status?.phase);
