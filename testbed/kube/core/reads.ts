import { StatusError, badRequest, notFound } from './errors.js';
import { served, type Request, type Result } from './handlers.js';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.js';
import type { Store } from './store.js';
import type { KubeObject } from './types.js';

/** GET of one object. */
export function getOne(store: Store, req: Request): Result {
  const o = store.get(req.t, req.namespace, req.name!);
  if (!o) throw notFound(req.t, req.name!);
  return { status: 200, body: served(o, req.t, req.version) };
}

/** A list with selectors, chunking and resourceVersion semantics. */
export function listPage(
  store: Store,
  req: Request,
): { items: KubeObject[]; resourceVersion: string; continue?: string; remaining?: number } {
  const q = req.query;
  const labels = parseLabelSelector(q.get('labelSelector') ?? undefined);
  const fields = parseFieldSelector(q.get('fieldSelector') ?? undefined, req.t);
  const rv = q.get('resourceVersion');
  const match = q.get('resourceVersionMatch');
  if (match && !['Exact', 'NotOlderThan'].includes(match))
    throw badRequest(`resourceVersionMatch must be Exact or NotOlderThan, not "${match}"`);
  if (match && !rv) throw badRequest('resourceVersionMatch is forbidden unless resourceVersion is provided');
  if (rv && !/^\d+$/.test(rv)) throw badRequest(`invalid resource version "${rv}"`);
  if (rv && Number(rv) > store.rv && rv !== '0') {
    throw new StatusError(504, 'Timeout', `Too large resource version: ${rv}, current: ${store.rv}`, {
      retryAfterSeconds: 1,
    });
  }
  if (match === 'Exact' && rv && Number(rv) !== store.rv) {
    throw new StatusError(
      410,
      'Expired',
      `too old resource version: ${rv} (${store.rv}); this server serves only its latest state`,
    );
  }
  let items = store
    .list(req.t, req.namespace)
    .filter((o) => matchesLabels(labels, o.metadata.labels) && matchesFields(fields, o));
  const token = q.get('continue');
  let snapshotRv = String(store.rv);
  if (token) {
    let parsed: { rv: string; after: string };
    try {
      parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    } catch {
      throw badRequest('invalid continue token');
    }
    snapshotRv = parsed.rv;
    items = items.filter((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}` > parsed.after);
  }
  const limit = Number(q.get('limit') ?? 0);
  if (limit > 0 && items.length > limit) {
    const page = items.slice(0, limit);
    const last = page[page.length - 1]!;
    const next = Buffer.from(
      JSON.stringify({ rv: snapshotRv, after: `${last.metadata.namespace ?? ''}/${last.metadata.name}` }),
    ).toString('base64url');
    return {
      items: page.map((o) => served(o, req.t, req.version)),
      resourceVersion: snapshotRv,
      continue: next,
      remaining: items.length - limit,
    };
  }
  return { items: items.map((o) => served(o, req.t, req.version)), resourceVersion: snapshotRv };
}
