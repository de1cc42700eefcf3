import { ListWatch, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.js';
import { detachStrings } from './detach.js';
import { apiErrorMessage } from './errors.js';

/** Any object with metadata: typed built-ins, or custom objects as plain JSON. */
export type Watched = { metadata?: { name?: string; namespace?: string } };

export interface InformerOptions<T extends Watched> {
  kc: KubeConfig;
  /** The collection path, e.g. /apis/eniipam.io/v1alpha1/enipools. */
  path: string;
  list: () => Promise<{ metadata?: { resourceVersion?: string }; items: T[] }>;
  labelSelector?: string;
  fieldSelector?: string;
  /** Server-side watch timeout; each watch is closed and resumed after about this long. */
  watchTimeoutSeconds?: number;
  logger: Logger;
  /** Called for every change, with the object's key (`ns/name` or `name`). */
  onChange?: (type: 'add' | 'update' | 'delete', obj: T) => void;
}

/**
 * A Watch that asks for bookmarks and a server-side timeout (client-node 1.4.0 asks for
 * neither, so a quiet watch can hang for good) and notes when it last heard anything.
 */
class TimedWatch extends Watch {
  lastEvent = Date.now();

  constructor(
    kc: KubeConfig,
    private readonly timeoutSeconds: number,
  ) {
    super(kc);
  }

  /** Called for every event a watch delivers (a working watch ends a run of failures). */
  onEvent?: () => void;

  override watch(
    path: string,
    queryParams: Record<string, unknown>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    this.lastEvent = Date.now();
    const jitter = Math.floor(Math.random() * this.timeoutSeconds * 0.2);
    return super.watch(
      path,
      { ...queryParams, allowWatchBookmarks: true, timeoutSeconds: this.timeoutSeconds + jitter },
      (phase, obj, raw) => {
        this.lastEvent = Date.now();
        this.onEvent?.();
        callback(phase, obj, raw);
      },
      done,
    );
  }
}

export const objectKey = (o: Watched): string =>
  o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : (o.metadata?.name ?? '');

/**
 * A client-node ListWatch hardened as kube-api.md §1.5 says: server-side timeouts and
 * bookmarks, a watchdog that restarts a watch that heard nothing for twice its timeout, and
 * restarts with jittered exponential backoff after errors (1.4.0 stops for good on any
 * error but a 410).
 */
export class Informer<T extends Watched> {
  private readonly lw: ListWatch<KubernetesObject>;
  private readonly watch: TimedWatch;
  private stopped = true;
  private failures = 0;
  private restartTimer?: NodeJS.Timeout;
  private watchdog?: NodeJS.Timeout;
  private readonly timeoutSeconds: number;
  /** True once a LIST has succeeded; never true on an empty cache that a failed LIST left. */
  synced = false;
  private readonly syncWaiters: Array<() => void> = [];

  constructor(private readonly o: InformerOptions<T>) {
    this.timeoutSeconds = o.watchTimeoutSeconds ?? 240;
    this.watch = new TimedWatch(o.kc, this.timeoutSeconds);
    this.watch.onEvent = () => (this.failures = 0);
    // ListWatch only reads metadata; custom objects keep their JSON shape.
    // client-node reports a failed LIST only through its error event and resolves start()
    // anyway, so success is noted here: the cache is synced only after a LIST succeeded, and
    // the backoff keeps growing until one does.
    const list = async () => {
      const r = await o.list();
      this.failures = 0;
      // Once ListWatch has stored the items (it does so right after this returns).
      setImmediate(() => this.markSynced());
      return r;
    };
    this.lw = new ListWatch<KubernetesObject>(
      o.path,
      this.watch,
      list as never,
      false,
      o.labelSelector,
      o.fieldSelector,
    );
    // The cached object is detached from the list or event it was parsed from (see detach.ts).
    this.lw.on('add', (obj) => o.onChange?.('add', detachStrings(obj) as T));
    this.lw.on('update', (obj) => o.onChange?.('update', detachStrings(obj) as T));
    this.lw.on('delete', (obj) => o.onChange?.('delete', obj as T));
    this.lw.on('error', (err) => this.restartLater(err));
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.startOnce();
    this.watchdog = setInterval(() => {
      if (!this.stopped && Date.now() - this.watch.lastEvent > 2 * (this.timeoutSeconds * 1.2) * 1000) {
        this.o.logger.warn({ path: this.o.path }, 'watch heard nothing for too long; restarting it');
        void this.lw.stop().then(() => this.startOnce());
      }
    }, 10_000);
    this.watchdog.unref();
  }

  private async startOnce(): Promise<void> {
    try {
      await this.lw.start();
    } catch (e) {
      this.restartLater(e);
    }
  }

  private markSynced(): void {
    if (this.synced) return;
    this.synced = true;
    this.syncWaiters.splice(0).forEach((w) => w());
  }

  /** Resolves once the first LIST has succeeded (it may never: callers bound the wait). */
  untilSynced(): Promise<void> {
    return this.synced ? Promise.resolve() : new Promise((r) => this.syncWaiters.push(r));
  }

  private restartLater(err: unknown): void {
    if (this.stopped) return;
    this.failures++;
    const delay = Math.min(60_000, 1000 * 2 ** Math.min(this.failures - 1, 10)) * (0.5 + Math.random() / 2);
    this.o.logger.warn(
      { path: this.o.path, err: apiErrorMessage(err), retryInMs: Math.round(delay) },
      'watch failed; restarting',
    );
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.startOnce(), delay);
    this.restartTimer.unref();
  }

  list(namespace?: string): readonly T[] {
    return this.lw.list(namespace) as unknown as T[];
  }

  get(name: string, namespace?: string): T | undefined {
    return this.lw.get(name, namespace) as T | undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    clearInterval(this.watchdog);
    await this.lw.stop();
  }
}
