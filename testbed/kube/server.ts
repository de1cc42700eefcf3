import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditLog } from './core/audit.js';
import { authEndpoint } from './auth/auth-endpoints.js';
import { requestUser, type Authentication } from './auth/authn.js';
import { authorize, forbidden, type Attributes } from './auth/rbac.js';
import type { ServiceAccountTokens } from './auth/tokens.js';
import {
  apiGroupDoc,
  apiGroupList,
  apiResourceList,
  apiVersions,
  openApiDoc,
  openApiIndex,
  versionInfo,
} from './discovery/discovery.js';
import { StatusError, methodNotAllowed } from './core/errors.js';
import { faultInfo, type KubeFaultRules } from './core/faults.js';
import { Writer, type Request, type Result } from './core/handlers.js';
import { OPENAPI_V2_PROTOBUF, openApiV2, openApiV2Protobuf } from './discovery/openapi-v2.js';
import { decodeProtobufObject, PROTOBUF_MEDIA_TYPE } from './core/protobuf.js';
import { execAttributes, execTarget, prepareExec } from './pods/pod-exec.js';
import { parsePodProxyTarget, proxyToPod } from './pods/pod-proxy.js';
import { getOne, listPage } from './core/reads.js';
import { scaleRequest } from './core/scale.js';
import type { Store } from './core/store.js';
import { toTable } from './core/table.js';
import { groupVersion, type ResourceType } from './core/types.js';
import { startWatch, type OpenWatch } from './core/watch.js';

export interface KubeFaults {
  /** Answer this share of requests (watches excluded) with this code: 429 (with Retry-After) or 500. */
  errors?: { code: 429 | 500; rate: number; retryAfterSeconds?: number };
  latencyMs?: number;
}

export interface ServerState {
  store: Store;
  faults: KubeFaults;
  faultRules: KubeFaultRules;
  /** Watches to answer with an in-stream 410 Expired. */
  expireWatches: number;
  watches: Set<OpenWatch>;
  requests: Record<string, number>;
  bookmarkIntervalMs: number;
  /** Issues service-account tokens (TokenRequest), whether or not they are required. */
  tokens: ServiceAccountTokens;
  /** When set, requests are authenticated and authorized with RBAC; otherwise everyone is the admin. */
  auth?: Authentication;
  /** Every resource request with its user and answer, as an audit log keeps them. */
  audit: AuditLog;
}

/** A list or watch of one object by `fieldSelector=metadata.name=NAME` is authorized as a request for that name. */
const nameFromFieldSelector = (q: URLSearchParams): string | undefined =>
  /^metadata\.name==?([^,]+)$/.exec(q.get('fieldSelector') ?? '')?.[1];
/**
 * Paths under /api/VERSION/ and /apis/GROUP/VERSION/ name resources; every other path is a
 * non-resource URL for RBAC.
 */
const isResourcePath = (segs: string[]) =>
  (segs[0] === 'api' && segs.length >= 3) || (segs[0] === 'apis' && segs.length >= 4);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Route {
  t: ResourceType;
  version: string;
  namespace?: string;
  name?: string;
  subresource?: string;
}

/** Maps a resource path (`/api/v1/namespaces/ns/pods/p/status`, `/apis/g/v/foos`) to its kind. */
function route(store: Store, group: string, version: string, segs: string[]): Route | undefined {
  let namespace: string | undefined;
  let rest = segs;
  const isNamespaceItself =
    group === '' &&
    segs[0] === 'namespaces' &&
    (segs.length <= 2 || (segs.length === 3 && ['status', 'finalize'].includes(segs[2]!)));
  if (segs[0] === 'namespaces' && !isNamespaceItself) {
    namespace = segs[1];
    rest = segs.slice(2);
  }
  const [resource, name, subresource, ...extra] = rest;
  if (!resource || extra.length) return undefined;
  const t = [...store.types.values()].find(
    (x) => x.group === group && x.resource === resource && x.versions.includes(version),
  );
  if (!t) return undefined;
  if (namespace !== undefined && !t.namespaced) return undefined;
  if (subresource && !((subresource === 'status' && t.statusSubresource) || (subresource === 'scale' && t.scale)))
    return undefined;
  return { t, version, namespace, name, subresource };
}

/** `pods/NAME/log`: the output the pod's kubelet captured, as text (followed when asked). */
async function podLog(
  store: Store,
  namespace: string,
  name: string,
  query: URLSearchParams,
  res: ServerResponse,
): Promise<void> {
  const t = store.types.get('pods')!;
  const pod = store.get(t, namespace, name);
  if (!pod) throw new StatusError(404, 'NotFound', `pods "${name}" not found`, { name, kind: 'pods' });
  if (!store.hooks.podLog || !pod.spec?.nodeName) {
    throw new StatusError(
      400,
      'BadRequest',
      `container "${query.get('container') ?? pod.spec?.containers?.[0]?.name ?? ''}" in pod "${name}" ` +
        'is waiting to start: no node runs this pod',
    );
  }
  await store.hooks.podLog(pod, query, res);
}

const notFoundPath = () => new StatusError(404, 'NotFound', 'the server could not find the requested resource');

export function kubeHandler(s: ServerState) {
  const { store } = s;
  const writer = new Writer(store);

  const json = (
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string | string[]> = {},
  ) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };

  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://kube');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const method = req.method ?? 'GET';
    const accept = String(req.headers.accept ?? '');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = chunks.length ? Buffer.concat(chunks) : undefined;
    const sentType = String(req.headers['content-type'] ?? 'application/json');
    // Typed clients (kubectl create, Helm's release Secrets) send protobuf; the handlers see its JSON.
    // Decoded only once the request is authenticated and authorized, as the API server does.
    let decoded: { body?: string; contentType: string } | undefined;
    const requestBody = () =>
      (decoded ??=
        raw && sentType.startsWith(PROTOBUF_MEDIA_TYPE)
          ? { body: JSON.stringify(decodeProtobufObject(raw)), contentType: 'application/json' }
          : { body: raw?.toString('utf8'), contentType: sentType });
    try {
      if (s.faults.latencyMs) await sleep(s.faults.latencyMs);
      const user = requestUser(s.auth, store, req);
      const allow = (a: Attributes) => {
        s.audit.record(res, user, a);
        if (s.auth && !authorize(store, user, a)) throw forbidden(user, a);
      };
      const segs = path.split('/').filter(Boolean);
      if (!isResourcePath(segs))
        allow({ resourceRequest: false, verb: method === 'HEAD' ? 'get' : method.toLowerCase(), path });
      const special = authEndpoint(
        { store, tokens: s.tokens, user, allow },
        segs,
        method,
        () => requestBody().body,
        String(req.headers.host ?? 'localhost'),
      );
      if (special) return json(res, special.status, special.body);
      if (path === '/version') return json(res, 200, versionInfo());
      if (['/healthz', '/readyz', '/livez'].includes(path))
        return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      if (path === '/api') return json(res, 200, apiVersions(String(req.headers.host ?? '')));
      if (path === '/apis') return json(res, 200, apiGroupList(store));
      if (path === '/openapi/v2') {
        const doc = openApiV2(store);
        if (!accept.includes(OPENAPI_V2_PROTOBUF)) return json(res, 200, doc);
        // As the API server does: Go's mime parser refuses the '@' of the requested type.
        return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(openApiV2Protobuf(doc));
      }
      if (path === '/openapi/v3') return json(res, 200, openApiIndex(store));
      if (path.startsWith('/openapi/v3/')) {
        const [kind, a, b] = path.slice('/openapi/v3/'.length).split('/');
        const doc =
          kind === 'api' && a
            ? openApiDoc(store, '', a)
            : kind === 'apis' && a && b
              ? openApiDoc(store, a, b)
              : undefined;
        if (!doc || !Object.keys(doc.paths).length) throw notFoundPath();
        return json(res, 200, doc);
      }
      let group: string;
      let version: string;
      let rest: string[];
      if (segs[0] === 'api' && segs[1]) [group, version, rest] = ['', segs[1], segs.slice(2)];
      else if (segs[0] === 'apis' && segs[1] && segs[2]) [group, version, rest] = [segs[1], segs[2], segs.slice(3)];
      else if (segs[0] === 'apis' && segs[1]) {
        const g = apiGroupDoc(store, segs[1]);
        if (!g) throw notFoundPath();
        return json(res, 200, g);
      } else throw notFoundPath();
      if (rest.length === 0) {
        const list = apiResourceList(store, group, version);
        if (!list) throw notFoundPath();
        return json(res, 200, list);
      }
      if (
        group === '' &&
        method === 'GET' &&
        rest.length === 5 &&
        rest[0] === 'namespaces' &&
        rest[2] === 'pods' &&
        rest[4] === 'log'
      ) {
        allow({
          resourceRequest: true,
          verb: 'get',
          apiGroup: '',
          resource: 'pods',
          subresource: 'log',
          name: rest[3]!,
          namespace: rest[1]!,
        });
        return await podLog(store, rest[1]!, rest[3]!, url.searchParams, res);
      }
      if (
        group === '' &&
        method === 'GET' &&
        rest.length >= 5 &&
        rest[0] === 'namespaces' &&
        rest[2] === 'pods' &&
        rest[4] === 'proxy'
      ) {
        const target = parsePodProxyTarget(rest[3]!);
        allow({
          resourceRequest: true,
          verb: 'get',
          apiGroup: '',
          resource: 'pods',
          subresource: 'proxy',
          name: target.name,
          namespace: rest[1]!,
        });
        return await proxyToPod(store, rest[1]!, target, rest.slice(5).join('/'), url.search, res);
      }
      const exec = execTarget(path);
      if (exec) {
        allow(execAttributes(exec));
        // Checked as for an upgrade, so that a mistake is named before the missing upgrade is.
        prepareExec(store, exec, url.searchParams);
        throw new StatusError(400, 'BadRequest', 'Upgrade request required');
      }
      const r = route(store, group, version, rest);
      if (!r) throw notFoundPath();
      const isWatch = url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1';
      const verb =
        method === 'GET'
          ? isWatch
            ? 'watch'
            : r.name
              ? 'get'
              : 'list'
          : method === 'DELETE' && !r.name
            ? 'deletecollection'
            : method.toLowerCase();
      allow({
        resourceRequest: true,
        verb: verb === 'post' ? 'create' : verb === 'put' ? 'update' : verb,
        apiGroup: r.t.group,
        resource: r.t.resource,
        subresource: r.subresource,
        name: r.name ?? nameFromFieldSelector(url.searchParams),
        namespace: r.namespace ?? (r.t.resource === 'namespaces' && group === '' ? r.name : undefined),
      });
      const statKey =
        `${verb} ${r.t.group ? `${r.t.resource}.${r.t.group}` : r.t.resource}` +
        (r.subresource ? `/${r.subresource}` : '');
      s.requests[statKey] = (s.requests[statKey] ?? 0) + 1;
      if (await s.faultRules.apply(res, faultInfo(verb, r, path, store.rv))) return;
      const fault = s.faults.errors;
      if (fault && verb !== 'watch' && Math.random() < fault.rate) {
        if (fault.code === 429) {
          const after = fault.retryAfterSeconds ?? 1;
          throw new StatusError(
            429,
            'TooManyRequests',
            'The server has received too many requests and has asked us to try again later',
            { retryAfterSeconds: after },
          );
        }
        throw new StatusError(500, 'InternalError', 'Internal error occurred: injected fault');
      }
      const request: Request = { ...r, query: url.searchParams, ...requestBody() };
      const asTable = accept.includes('as=Table');
      let result: Result;
      if (r.subresource === 'scale' && ['get', 'put', 'patch'].includes(verb)) {
        result = scaleRequest(store, writer, request, method);
        return json(res, result.status, result.body);
      }
      switch (verb) {
        case 'watch': {
          const expire = s.expireWatches > 0;
          if (expire) s.expireWatches--;
          let w: OpenWatch | undefined = undefined;
          w = startWatch(
            store,
            res,
            {
              t: r.t,
              version,
              namespace: r.namespace,
              query: url.searchParams,
              asTable,
              bookmarkIntervalMs: s.bookmarkIntervalMs,
              expire,
            },
            () => {
              if (w) s.watches.delete(w);
            },
          );
          if (!res.writableEnded) s.watches.add(w);
          return;
        }
        case 'get':
          result = getOne(store, request);
          if (asTable)
            result = {
              ...result,
              body: toTable(
                r.t,
                version,
                [result.body as never],
                {
                  resourceVersion: (result.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
                },
                { includeObject: url.searchParams.get('includeObject') ?? 'Metadata', headers: true },
              ),
            };
          break;
        case 'list': {
          const page = listPage(store, request);
          const meta = {
            resourceVersion: page.resourceVersion,
            continue: page.continue,
            remainingItemCount: page.remaining,
          };
          result = {
            status: 200,
            body: asTable
              ? toTable(r.t, version, page.items, meta, {
                  includeObject: url.searchParams.get('includeObject') ?? 'Metadata',
                  headers: true,
                })
              : { kind: r.t.listKind, apiVersion: groupVersion(r.t.group, version), metadata: meta, items: page.items },
          };
          break;
        }
        case 'post':
          if (r.name || r.subresource) throw methodNotAllowed('POST is not allowed on a named resource');
          result = writer.create(request);
          break;
        case 'put':
          if (!r.name) throw methodNotAllowed('PUT needs a resource name');
          result = writer.update(request);
          break;
        case 'patch':
          if (!r.name) throw methodNotAllowed('PATCH needs a resource name');
          result = writer.patch(request);
          break;
        case 'delete':
          result = writer.delete(request);
          break;
        case 'deletecollection':
          result = writer.deleteCollection(request);
          break;
        default:
          throw methodNotAllowed(`the server does not allow this method on the requested resource: ${method}`);
      }
      const headers: Record<string, string | string[]> = {};
      if (result.warnings?.length) headers.warning = result.warnings.map((w) => `299 - "${w.replace(/"/g, '\\"')}"`);
      json(res, result.status, result.body, headers);
    } catch (e) {
      if (!(e instanceof StatusError)) {
        console.error('kube emulator: internal error', e);
      }
      const err =
        e instanceof StatusError
          ? e
          : new StatusError(500, 'InternalError', `Internal error occurred: ${(e as Error).message}`);
      const headers: Record<string, string> = {};
      if (err.details?.retryAfterSeconds && err.code === 429)
        headers['retry-after'] = String(err.details.retryAfterSeconds);
      if (!res.headersSent) json(res, err.code, err.toStatus(), headers);
      else res.end();
    }
  };
}
