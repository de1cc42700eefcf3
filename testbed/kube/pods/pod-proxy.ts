import type { ServerResponse } from 'node:http';
import { StatusError } from '../core/errors.js';
import type { Store } from '../core/store.js';

/**
 * `GET /api/v1/namespaces/NS/pods/[SCHEME:]NAME[:PORT]/proxy/PATH`: the API server's proxy to a
 * pod's port (what `kubectl get --raw .../proxy/metrics` uses), over plain HTTP to the pod's IP.
 * The pod is named as `name`, `name:port` or `http:name:port` (https is not proxied here).
 */
export function parsePodProxyTarget(segment: string): { name: string; port?: number; scheme: string } {
  const parts = segment.split(':');
  const scheme = parts.length === 3 ? parts.shift()! : 'http';
  const [name, port] = parts as [string, string | undefined];
  if (port !== undefined && !/^\d+$/.test(port))
    throw new StatusError(400, 'BadRequest', `the pod's port "${port}" is not a number (named ports are not served)`);
  return { name, port: port === undefined ? undefined : Number(port), scheme };
}

export async function proxyToPod(
  store: Store,
  namespace: string,
  target: { name: string; port?: number; scheme: string },
  path: string,
  query: string,
  res: ServerResponse,
): Promise<void> {
  const pod = store.get(store.types.get('pods')!, namespace, target.name);
  if (!pod)
    throw new StatusError(404, 'NotFound', `pods "${target.name}" not found`, { name: target.name, kind: 'pods' });
  if (target.scheme !== 'http') throw new StatusError(400, 'BadRequest', `scheme ${target.scheme} is not proxied`);
  const podIP = (pod.status as { podIP?: string } | undefined)?.podIP;
  if (!podIP) throw new StatusError(503, 'ServiceUnavailable', `pod ${target.name} has no IP yet`);
  const port =
    target.port ??
    (pod.spec as { containers?: Array<{ ports?: Array<{ containerPort: number }> }> })?.containers?.[0]?.ports?.[0]
      ?.containerPort;
  if (!port) throw new StatusError(400, 'BadRequest', `pod ${target.name} names no port: ask for NAME:PORT`);
  let answer: Response;
  try {
    answer = await fetch(`http://${podIP.includes(':') ? `[${podIP}]` : podIP}:${port}/${path}${query}`, {
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    const why = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
    throw new StatusError(
      503,
      'ServiceUnavailable',
      `error trying to reach service: dial tcp ${podIP}:${port}: ${why}`,
    );
  }
  const body = Buffer.from(await answer.arrayBuffer());
  res
    .writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/octet-stream' })
    .end(body);
}
