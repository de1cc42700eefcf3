import type { ServerResponse } from 'node:http';
import { StatusError, badRequest } from './errors.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import { selects, type EventType, type Store, type Watcher } from './store.js';
import { toTable } from './table.js';
import { groupVersion, typeKey, type KubeObject, type ResourceType } from './types.js';

export interface WatchOptions {
  t: ResourceType;
  version: string;
  namespace?: string;
  query: URLSearchParams;
  asTable: boolean;
  bookmarkIntervalMs: number;
  /** Answer with an in-stream 410 instead of watching (a fault). */
  expire: boolean;
}

// Stored objects are immutable, so one serialization per object and version serves every watch.
const cache = new WeakMap<KubeObject, Map<string, string>>();
function serialized(obj: KubeObject, t: ResourceType, version: string): string {
  let perVersion = cache.get(obj);
  if (!perVersion) cache.set(obj, (perVersion = new Map()));
  let text = perVersion.get(version);
  if (text === undefined) {
    text = JSON.stringify({ ...obj, apiVersion: groupVersion(t.group, version), kind: t.kind });
    perVersion.set(version, text);
  }
  return text;
}

export interface OpenWatch {
  close(): void;
}

/**
 * Streams events as client-node and kubectl read them: headers at once, one JSON object per
 * line; synthetic ADDED events for an empty or "0" resourceVersion, else the events after it
 * (410 Expired in the stream when that is older than the kept history); BOOKMARKs when asked;
 * closed cleanly after timeoutSeconds (30-60 minutes when not asked, as the API server does).
 */
export function startWatch(store: Store, res: ServerResponse, o: WatchOptions, onClose: () => void): OpenWatch {
  const q = o.query;
  const labels = parseLabelSelector(q.get('labelSelector') ?? undefined);
  const fields = parseFieldSelector(q.get('fieldSelector') ?? undefined, o.t);
  const rvParam = q.get('resourceVersion') ?? '';
  if (rvParam && !/^\d+$/.test(rvParam)) throw badRequest(`invalid resource version "${rvParam}"`);
  const timeoutParam = q.get('timeoutSeconds');
  const timeoutMs = timeoutParam !== null ? Number(timeoutParam) * 1000 : (1800 + Math.random() * 1800) * 1000;
  const includeObject = q.get('includeObject') ?? 'Metadata';
  let headersSent = false;

  res.writeHead(200, {
    'content-type': o.asTable ? 'application/json;as=Table;v=v1;g=meta.k8s.io' : 'application/json',
    'cache-control': 'no-cache, private',
    'transfer-encoding': 'chunked',
  });
  res.flushHeaders();
  const line = (type: string, object: unknown) => res.write(`${JSON.stringify({ type, object })}\n`);
  const send = (type: EventType, obj: KubeObject) => {
    if (o.asTable) {
      const served = { ...obj, apiVersion: groupVersion(o.t.group, o.version), kind: o.t.kind };
      line(
        type,
        toTable(
          o.t,
          o.version,
          [served],
          { resourceVersion: obj.metadata.resourceVersion },
          { includeObject, headers: !headersSent },
        ),
      );
      headersSent = true;
    } else res.write(`{"type":"${type}","object":${serialized(obj, o.t, o.version)}}\n`);
  };
  const watcher: Watcher = {
    key: typeKey(o.t),
    namespace: o.t.namespaced ? o.namespace : undefined,
    labels,
    fields,
    send,
  };

  let closed = false;
  const timers: NodeJS.Timeout[] = [];
  const close = () => {
    if (closed) return;
    closed = true;
    timers.forEach(clearInterval);
    store.watchers.delete(watcher);
    res.end();
    onClose();
  };
  res.on('close', close);

  const expired = (message: string) => {
    line('ERROR', {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message,
      reason: 'Expired',
      code: 410,
    });
    close();
  };
  if (o.expire) {
    expired(`too old resource version: ${rvParam || 0} (${store.rv})`);
    return { close };
  }
  if (rvParam === '' || rvParam === '0') {
    for (const obj of store.list(o.t, watcher.namespace)) {
      if (selects(watcher, obj)) send('ADDED', obj);
    }
    if (q.get('sendInitialEvents') === 'true') {
      line('BOOKMARK', {
        kind: o.t.kind,
        apiVersion: groupVersion(o.t.group, o.version),
        metadata: { resourceVersion: String(store.rv), annotations: { 'k8s.io/initial-events-end': 'true' } },
      });
    }
  } else {
    try {
      store.replay(watcher, Number(rvParam));
    } catch (e) {
      if (e instanceof StatusError && e.code === 410) {
        expired(e.message);
        return { close };
      }
      throw e;
    }
  }
  store.watchers.add(watcher);
  if (q.get('allowWatchBookmarks') === 'true') {
    timers.push(
      setInterval(
        () =>
          line('BOOKMARK', {
            kind: o.t.kind,
            apiVersion: groupVersion(o.t.group, o.version),
            metadata: { resourceVersion: String(store.rv) },
          }),
        o.bookmarkIntervalMs,
      ),
    );
  }
  timers.push(setTimeout(close, timeoutMs));
  return { close };
}
