/* eslint-disable @typescript-eslint/no-explicit-any -- API objects are plain JSON here */
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../../src/observability/logger.js';
import type { KubeObject } from '../../kube/core/types.js';
import { rawApi, type RawApi } from './raw-api.js';

/** What a kubelet reads and writes of the API: its pods, what they reference, their status and Events. */
export interface KubeletObjects {
  get(kind: 'pods' | 'secrets' | 'configmaps', namespace: string | undefined, name: string): KubeObject | undefined;
  list(kind: 'pods'): KubeObject[];
  onChange(kinds: ['pods'], fn: () => void): () => void;
  create(kind: 'events', obj: KubeObject): unknown;
  delete(
    kind: 'pods',
    namespace: string | undefined,
    name: string,
    opts?: { gracePeriodSeconds?: number; uid?: string },
  ): void;
  updateStatus(kind: 'pods', namespace: string | undefined, name: string, status: unknown): unknown;
  /** Reads what the pod references (Secrets, ConfigMaps), so that `get` answers them. */
  prepare?(pod: KubeObject): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const key = (kind: string, namespace: string | undefined, name: string) => `${kind}/${namespace ?? ''}/${name}`;

/**
 * The Secrets and ConfigMaps a pod's volumes and environment name (its service-account volume
 * among them: the ServiceAccount admission plugin adds it to the pod as a projected volume).
 */
function references(pod: KubeObject): Array<{ kind: 'secrets' | 'configmaps'; name: string }> {
  const out: Array<{ kind: 'secrets' | 'configmaps'; name: string }> = [];
  const volume = (v: any) => {
    if (v.secret?.secretName) out.push({ kind: 'secrets', name: v.secret.secretName });
    if (v.configMap?.name) out.push({ kind: 'configmaps', name: v.configMap.name });
    for (const s of v.projected?.sources ?? [])
      volume({ secret: s.secret && { secretName: s.secret.name }, configMap: s.configMap });
  };
  for (const v of pod.spec?.volumes ?? []) volume(v);
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const f of c.envFrom ?? []) {
      if (f.secretRef) out.push({ kind: 'secrets', name: f.secretRef.name });
      if (f.configMapRef) out.push({ kind: 'configmaps', name: f.configMapRef.name });
    }
    for (const e of c.env ?? []) {
      if (e.valueFrom?.secretKeyRef) out.push({ kind: 'secrets', name: e.valueFrom.secretKeyRef.name });
      if (e.valueFrom?.configMapKeyRef) out.push({ kind: 'configmaps', name: e.valueFrom.configMapKeyRef.name });
    }
  }
  return out;
}

/**
 * A kubelet's view of the API server, with the node's own credentials (`system:node:<name>`,
 * so the Node authorizer and NodeRestriction bound it as they bound a real kubelet): the pods
 * bound to the node (listed, then watched), what they reference (read per pod, as the kubelet's
 * secret manager reads it), and the writes a kubelet makes (pod status, deletion, Events).
 */
export class NodeApi implements KubeletObjects {
  readonly api: RawApi;
  private readonly pods = new Map<string, KubeObject>();
  private readonly refs = new Map<string, KubeObject | null>();
  private readonly listeners = new Set<() => void>();
  private stopped = false;
  private watching?: AbortController;
  private loop?: Promise<void>;
  synced = false;

  constructor(
    private readonly kc: KubeConfig,
    private readonly node: string,
    private readonly log: Logger,
  ) {
    this.api = rawApi(kc);
  }

  /** Lists and watches the node's pods until stopped; resolves once the first list is in. */
  async start(): Promise<void> {
    this.loop = this.listWatch();
    while (!this.synced && !this.stopped) await sleep(20);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.watching?.abort();
    await this.loop;
  }

  private async listWatch(): Promise<void> {
    const selector = `fieldSelector=${encodeURIComponent(`spec.nodeName=${this.node}`)}`;
    while (!this.stopped) {
      const list = await this.api('GET', `/api/v1/pods?${selector}`).catch((e: Error) => ({
        status: 0,
        body: e.message,
      }));
      if (list.status !== 200 || !Array.isArray(list.body?.items)) {
        this.log.warn({ status: list.status, body: list.body }, 'cannot list the node’s pods; trying again');
        await sleep(1000);
        continue;
      }
      this.pods.clear();
      for (const p of list.body.items as KubeObject[])
        this.pods.set(p.metadata.uid!, { apiVersion: 'v1', kind: 'Pod', ...p });
      this.synced = true;
      this.notify();
      let rv: string = list.body.metadata.resourceVersion;
      // Watch from the list's version; a watch that ends resumes from the last version seen, an expired one relists.
      for (let expired = false; !expired && !this.stopped;) {
        expired = await new Promise<boolean>((resolve) => {
          let gone = false;
          void new Watch(this.kc)
            .watch(
              '/api/v1/pods',
              {
                fieldSelector: `spec.nodeName=${this.node}`,
                resourceVersion: rv,
                allowWatchBookmarks: true,
                timeoutSeconds: 240,
              },
              (type, obj: any) => {
                if (type === 'ERROR') return void (gone = true);
                if (obj?.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
                if (type === 'BOOKMARK') return;
                if (type === 'DELETED') this.pods.delete(obj.metadata.uid);
                else this.pods.set(obj.metadata.uid, obj);
                this.notify();
              },
              // An error ending the watch (a 410, a refused or broken connection): list again.
              (err: unknown) => resolve(gone || !!err),
            )
            .then(
              (c) => {
                this.watching = c;
                if (this.stopped) c.abort();
              },
              () => resolve(true),
            );
        });
        if (!expired && !this.stopped) await sleep(50);
      }
    }
  }

  private notify(): void {
    for (const l of this.listeners) l();
  }

  get(kind: 'pods' | 'secrets' | 'configmaps', namespace: string | undefined, name: string) {
    if (kind === 'pods')
      return [...this.pods.values()].find((p) => p.metadata.namespace === namespace && p.metadata.name === name);
    return this.refs.get(key(kind, namespace, name)) ?? undefined;
  }

  list(): KubeObject[] {
    return [...this.pods.values()];
  }

  onChange(_kinds: ['pods'], fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  async prepare(pod: KubeObject): Promise<void> {
    const ns = pod.metadata.namespace!;
    for (const { kind, name } of references(pod)) {
      const r = await this.api('GET', `/api/v1/namespaces/${ns}/${kind}/${name}`);
      if (r.status === 200) this.refs.set(key(kind, ns, name), r.body);
      else if (r.status === 404) this.refs.set(key(kind, ns, name), null);
      else this.log.warn({ kind, name, status: r.status, body: r.body }, 'cannot read what a pod references');
    }
  }

  create(_kind: 'events', obj: KubeObject): void {
    void this.write('POST', `/api/v1/namespaces/${obj.metadata.namespace}/events`, obj);
  }

  delete(
    _kind: 'pods',
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
    void this.write('DELETE', `/api/v1/namespaces/${namespace}/pods/${name}`, body);
  }

  updateStatus(_kind: 'pods', namespace: string | undefined, name: string, status: any): void {
    const cur = this.get('pods', namespace, name);
    if (cur && JSON.stringify(cur.status) === JSON.stringify(status)) return;
    // The whole status, as the kubelet sends it; merge patch replaces its lists, and null removes what went.
    const removed = Object.fromEntries(
      Object.keys(cur?.status ?? {})
        .filter((k) => !(k in status))
        .map((k) => [k, null]),
    );
    void this.write(
      'PATCH',
      `/api/v1/namespaces/${namespace}/pods/${name}/status`,
      { status: { ...removed, ...status } },
      'application/merge-patch+json',
    );
  }

  /** A write whose failure is logged: a conflict or a vanished object is the next sync's to retry. */
  private async write(method: string, path: string, body: unknown, contentType?: string): Promise<void> {
    try {
      const r = await this.api(method, path, body, contentType);
      if (r.status >= 300 && r.status !== 404 && r.status !== 409)
        this.log.warn({ method, path, status: r.status, answer: r.body?.message ?? r.body }, 'kubelet write refused');
    } catch (e) {
      this.log.warn({ method, path, err: e }, 'kubelet write failed');
    }
  }
}
