import { ListWatch, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { systemClock, type Cancel, type Clock } from '../clock.js';
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
  /** For the watchdog and the restart back-off; the system's clock unless a test gives another. */
  clock?: Clock;
}

/**
 * A Watch that asks for bookmarks and a server-side timeout (client-node 1.4.0 asks for
 * neither, so a quiet watch can hang for good) and notes when it last heard anything.
 */
class TimedWatch extends Watch {
  lastEvent: number;

  constructor(
    kc: KubeConfig,
    private readonly timeoutSeconds: number,
    private readonly clock: Clock,
  ) {
    super(kc);
    this.lastEvent = clock.now();
  }

  /** Called for every event a watch delivers (a working watch ends a run of failures). */
  onEvent?: () => void;

  override watch(
    path: string,
    queryParams: Record<string, unknown>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    this.lastEvent = this.clock.now();
    const jitter = Math.floor(Math.random() * this.timeoutSeconds * 0.2);
    return super.watch(
      path,
      { ...queryParams, allowWatchBookmarks: true, timeoutSeconds: this.timeoutSeconds + jitter },
      (phase, obj, raw) => {
        this.lastEvent = this.clock.now();
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
  private cancelRestart?: Cancel;
  private cancelWatchdog?: Cancel;
  private readonly timeoutSeconds: number;
  private readonly clock: Clock;
  /** True once a LIST has succeeded; never true on an empty cache that a failed LIST left. */
  synced = false;
  private readonly syncWaiters: Array<() => void> = [];

  constructor(private readonly options: InformerOptions<T>) {
    this.timeoutSeconds = options.watchTimeoutSeconds ?? 240;
    this.clock = options.clock ?? systemClock;
    this.watch = new TimedWatch(options.kc, this.timeoutSeconds, this.clock);
    this.watch.onEvent = () => (this.failures = 0);
    // ListWatch only reads metadata; custom objects keep their JSON shape.
    // client-node reports a failed LIST only through its error event and resolves start()
    // anyway, so success is noted here: the cache is synced only after a LIST succeeded, and
    // the backoff keeps growing until one does.
    const list = async () => {
      const r = await options.list();
      this.failures = 0;
      // Once ListWatch has stored the items (it does so right after this returns).
      setImmediate(() => this.markSynced());
      return r;
    };
    this.lw = new ListWatch<KubernetesObject>(
      options.path,
      this.watch,
      list as never,
      false,
      options.labelSelector,
      options.fieldSelector,
    );
    // The cached object is detached from the list or event it was parsed from (see detach.ts).
    this.lw.on('add', (obj) => options.onChange?.('add', detachStrings(obj) as T));
    this.lw.on('update', (obj) => options.onChange?.('update', detachStrings(obj) as T));
    this.lw.on('delete', (obj) => options.onChange?.('delete', obj as T));
    this.lw.on('error', (err) => this.restartLater(err));
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.startOnce();
    if (!this.stopped) this.guard(); // stopped while it listed: nothing to guard
  }

  /** Every 10 s: a watch that heard nothing (not even a bookmark) for twice its longest timeout is restarted. */
  private guard(): void {
    this.cancelWatchdog = this.clock.after(10_000, () => {
      if (this.stopped) return;
      if (this.clock.now() - this.watch.lastEvent > 2 * (this.timeoutSeconds * 1.2) * 1000) {
        this.options.logger.warn({ path: this.options.path }, 'watch heard nothing for too long; restarting it');
        this.watch.lastEvent = this.clock.now();
        void this.lw.stop().then(() => this.startOnce());
      }
      this.guard();
    });
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
    this.options.logger.warn(
      { path: this.options.path, err: apiErrorMessage(err), retryInMs: Math.round(delay) },
      'watch failed; restarting',
    );
    this.cancelRestart?.();
    this.cancelRestart = this.clock.after(delay, () => void this.startOnce());
  }

  list(namespace?: string): readonly T[] {
    return this.lw.list(namespace) as unknown as T[];
  }

  get(name: string, namespace?: string): T | undefined {
    return this.lw.get(name, namespace) as T | undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelRestart?.();
    this.cancelWatchdog?.();
    await this.lw.stop();
  }
}
