import type { ServerResponse } from 'node:http';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { gone } from './errors.js';
import type { ExecRequest, ExecSession } from '../pods/pod-exec.js';
import { builtinTypes, crdType } from './resources.js';
import { matchesFields, matchesLabels, type FieldSelector, type LabelSelector } from './selectors.js';
import { typeKey, type KubeObject, type ResourceType } from './types.js';

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface StoredEvent {
  rv: number;
  type: EventType;
  key: string;
  object: KubeObject;
  previous?: KubeObject;
}

export interface Watcher {
  key: string;
  namespace?: string;
  labels: LabelSelector;
  fields: FieldSelector;
  send(type: EventType, object: KubeObject): void;
}

export interface StoreHooks {
  /** Whether a node runs a kubelet: deleting a pod bound to it then terminates the pod gracefully. */
  kubeletRuns?: (nodeName: string) => boolean;
  /** Serves `pods/log` from the kubelet that runs the pod (throws a StatusError when it cannot). */
  podLog?: (pod: KubeObject, query: URLSearchParams, res: ServerResponse) => Promise<void>;
  /**
   * Prepares `pods/exec` on the kubelet that runs the pod: the session that runs the command once
   * the connection is upgraded (throws a StatusError when it cannot, say the container is not running).
   */
  podExec?: (pod: KubeObject, request: ExecRequest) => ExecSession;
}

const objectKey = (o: KubeObject): string => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/**
 * All objects, one resourceVersion counter for every kind (like an etcd revision), a bounded
 * history of events for watches that resume, and the watches themselves. Stored objects are
 * never mutated: every write stores a new object, so the history can share them.
 */
export class Store {
  /** What the emulated nodes tell the API server (set by their runtimes). */
  readonly hooks: StoreHooks = {};
  readonly types = new Map<string, ResourceType>();
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private readonly history: StoredEvent[] = [];
  private historyStart = 0;
  readonly watchers = new Set<Watcher>();
  rv = 1;
  private saveTimer?: NodeJS.Timeout;

  constructor(
    private readonly historyLimit: number,
    private readonly statePath?: string,
  ) {
    for (const t of builtinTypes()) this.register(t);
  }

  register(t: ResourceType): void {
    this.types.set(typeKey(t), t);
    if (!this.objects.has(typeKey(t))) this.objects.set(typeKey(t), new Map());
  }

  unregister(t: ResourceType): void {
    this.types.delete(typeKey(t));
    this.objects.delete(typeKey(t));
  }

  get(t: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.objects.get(typeKey(t))?.get(`${t.namespaced ? (namespace ?? '') : ''}/${name}`);
  }

  /** Objects of a kind in key order (namespace, then name), as etcd returns them. */
  list(t: ResourceType, namespace?: string): KubeObject[] {
    const all = [...(this.objects.get(typeKey(t))?.entries() ?? [])]
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([, o]) => o);
    return namespace && t.namespaced ? all.filter((o) => o.metadata.namespace === namespace) : all;
  }

  nextRv(): string {
    return String(++this.rv);
  }

  /** Stores `obj` (its resourceVersion already set from nextRv), tells the watches, and answers it as stored. */
  put(t: ResourceType, obj: KubeObject, previous?: KubeObject): KubeObject {
    // A custom resource is held as unstructured JSON, which Go writes with its keys sorted: what a
    // client sends comes back in another key order (a client comparing JSON texts sees a change).
    if (!t.builtin) obj = sortedKeys(obj);
    this.objects.get(typeKey(t))!.set(objectKey(obj), obj);
    this.record({
      rv: Number(obj.metadata.resourceVersion),
      type: previous ? 'MODIFIED' : 'ADDED',
      key: typeKey(t),
      object: obj,
      previous,
    });
    return obj;
  }

  /** Removes an object; `last` is its final state with a fresh resourceVersion. */
  remove(t: ResourceType, last: KubeObject): void {
    this.objects.get(typeKey(t))!.delete(objectKey(last));
    this.record({ rv: Number(last.metadata.resourceVersion), type: 'DELETED', key: typeKey(t), object: last });
  }

  private record(e: StoredEvent): void {
    this.history.push(e);
    if (this.history.length > this.historyLimit) {
      const drop = this.history.length - this.historyLimit;
      this.history.splice(0, drop);
    }
    this.historyStart = this.history[0]!.rv - 1;
    for (const w of this.watchers) if (w.key === e.key) deliver(w, e);
    this.scheduleSave();
  }

  /** Replays what happened after `rv` to a new watch; 410 when that is older than the kept history. */
  replay(w: Watcher, rv: number): void {
    if (rv < this.historyStart) throw gone(`too old resource version: ${rv} (${this.historyStart + 1})`);
    for (const e of this.history) if (e.rv > rv && e.key === w.key) deliver(w, e);
  }

  /** Forgets the kept history, so that every resumed watch gets 410 Expired. */
  compact(): void {
    this.history.length = 0;
    this.historyStart = this.rv;
  }

  private scheduleSave(): void {
    if (!this.statePath || this.saveTimer) return;
    this.saveTimer = setTimeout(() => this.save(), 100);
    this.saveTimer.unref();
  }

  save(): void {
    if (this.saveTimer) clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    if (!this.statePath) return;
    const objects: Record<string, KubeObject[]> = {};
    for (const [k, m] of this.objects) if (m.size) objects[k] = [...m.values()];
    const tmp = `${this.statePath}.tmp`;
    writeFileSync(tmp, JSON.stringify({ rv: this.rv, objects }));
    renameSync(tmp, this.statePath);
  }

  /** Loads a saved state: CRDs first, so that their kinds exist before their objects. */
  load(): boolean {
    if (!this.statePath) return false;
    let data: { rv: number; objects: Record<string, KubeObject[]> };
    try {
      data = JSON.parse(readFileSync(this.statePath, 'utf8'));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw new Error(`cannot read state ${this.statePath}: ${(e as Error).message}`);
    }
    const crdKey = 'customresourcedefinitions.apiextensions.k8s.io';
    for (const crd of data.objects[crdKey] ?? []) this.register(crdType(crd));
    for (const [k, items] of Object.entries(data.objects)) {
      const m = this.objects.get(k);
      if (!m) continue;
      for (const o of items) m.set(objectKey(o), o);
    }
    this.rv = data.rv;
    this.historyStart = this.rv;
    return true;
  }
}

/** Whether a watch's namespace and selectors take in an object. */
export function selects(w: Watcher, o: KubeObject | undefined): boolean {
  if (!o) return false;
  if (w.namespace && o.metadata.namespace !== w.namespace) return false;
  return matchesLabels(w.labels, o.metadata.labels) && matchesFields(w.fields, o);
}

/** An event as a watch with selectors sees it: objects entering or leaving the selection are ADDED or DELETED. */
function deliver(w: Watcher, e: StoredEvent): void {
  if (e.type === 'DELETED') {
    if (selects(w, e.object)) w.send('DELETED', e.object);
    return;
  }
  const now = selects(w, e.object);
  const before = selects(w, e.previous);
  if (now && before) w.send('MODIFIED', e.object);
  else if (now) w.send('ADDED', e.object);
  else if (before) w.send('DELETED', e.object);
}

/** A JSON value with every object's keys in sorted order, as Go's encoding/json writes a map. */
function sortedKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map(sortedKeys) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value).sort()) out[k] = sortedKeys((value as Record<string, unknown>)[k]);
  return out as T;
}
