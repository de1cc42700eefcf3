import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { WebSocketServer } from 'ws';
import { CHANNEL_PROTOCOLS, serveChannels } from './channel-protocol.js';
import { StatusError } from '../core/errors.js';
import { requestUser } from '../auth/authn.js';
import { authorize, forbidden, type Attributes } from '../auth/rbac.js';
import type { ServerState } from '../server.js';
import type { Store } from '../core/store.js';
import type { KubeObject } from '../core/types.js';

/** A command to run in a pod's container: the query of `pods/NAME/exec`. */
export interface ExecRequest {
  container: string;
  command: string[];
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

export interface TerminalSize {
  width: number;
  height: number;
}

/** The client's side of an exec, as the API server carries it. */
export interface ExecStreams {
  /** What the client sends; ends when it closes its stdin (v5.channel.k8s.io). Only with `stdin`. */
  stdin?: Readable;
  stdout?: (chunk: Buffer) => void;
  stderr?: (chunk: Buffer) => void;
  /** Calls `listener` with each terminal size the client sends (with `tty`). */
  onResize(listener: (size: TerminalSize) => void): void;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/** A command ready to run in a container (the kubelet has found it running): resolves with its exit code. */
export type ExecSession = (streams: ExecStreams) => Promise<number>;

/** The pod an exec path names: `/api/v1/namespaces/NS/pods/NAME/exec`. */
export function execTarget(path: string): { namespace: string; name: string } | undefined {
  const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/exec\/?$/.exec(path);
  return m ? { namespace: decodeURIComponent(m[1]!), name: decodeURIComponent(m[2]!) } : undefined;
}

/** What an exec is authorized as: `create` on `pods/exec` (whatever the method, as for SPDY's POST). */
export const execAttributes = (t: { namespace: string; name: string }): Attributes => ({
  resourceRequest: true,
  verb: 'create',
  apiGroup: '',
  resource: 'pods',
  subresource: 'exec',
  name: t.name,
  namespace: t.namespace,
});

const flag = (q: URLSearchParams, name: string) => ['true', '1'].includes(q.get(name) ?? '');
const badRequest = (message: string) => new StatusError(400, 'BadRequest', message);

/** The exec's options from its query, checked against the pod as the API server checks them. */
export function execRequest(pod: KubeObject, query: URLSearchParams): ExecRequest {
  const name = pod.metadata.name!;
  const mains: string[] = (pod.spec?.containers ?? []).map((c: { name: string }) => c.name);
  const all = [...mains, ...(pod.spec?.initContainers ?? []).map((c: { name: string }) => c.name)];
  let container = query.get('container') ?? '';
  if (!container) {
    if (mains.length !== 1)
      throw badRequest(`a container name must be specified for pod ${name}, choose one of: [${mains.join(' ')}]`);
    container = mains[0]!;
  }
  if (!all.includes(container)) throw badRequest(`container ${container} is not valid for pod ${name}`);
  const request: ExecRequest = {
    container,
    command: query.getAll('command'),
    stdin: flag(query, 'stdin'),
    stdout: flag(query, 'stdout'),
    stderr: flag(query, 'stderr'),
    tty: flag(query, 'tty'),
  };
  if (!request.command.length)
    throw badRequest('exec needs a command: ?command=ARG for each of its words (kubectl exec POD -- COMMAND)');
  if (!request.stdin && !request.stdout && !request.stderr)
    throw badRequest('you must specify at least 1 of stdin, stdout, stderr');
  if (request.tty && request.stderr) throw badRequest('tty and stderr cannot both be true (a terminal has one output)');
  const phase = (pod.status as { phase?: string } | undefined)?.phase;
  if (phase === 'Succeeded' || phase === 'Failed')
    throw badRequest(`cannot exec into a container in a completed pod; current phase is ${phase}`);
  if (!pod.spec?.nodeName) throw badRequest(`pod ${name} does not have a host assigned`);
  return request;
}

/** The pod, the request and the kubelet's session for an exec, or the StatusError that refuses it. */
export function prepareExec(
  store: Store,
  target: { namespace: string; name: string },
  query: URLSearchParams,
): { request: ExecRequest; session: ExecSession } {
  const pod = store.get(store.types.get('pods')!, target.namespace, target.name);
  if (!pod)
    throw new StatusError(404, 'NotFound', `pods "${target.name}" not found`, { name: target.name, kind: 'pods' });
  const request = execRequest(pod, query);
  if (!store.hooks.podExec)
    throw badRequest(`container ${request.container} in pod ${target.name} cannot run commands: no node runs this pod`);
  return { request, session: store.hooks.podExec(pod, request) };
}

/** Answers an upgrade request with an error and closes the connection (no upgrade happens). */
function refuse(socket: Duplex, err: StatusError): void {
  const body = JSON.stringify(err.toStatus());
  socket.end(
    `HTTP/1.1 ${err.code} ${STATUS_CODES[err.code] ?? ''}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * Upgrade requests: `pods/NAME/exec` over a WebSocket with a channel.k8s.io subprotocol (what
 * kubectl 1.30+ and client-node speak), authorized as `create` on `pods/exec`. An upgrade to
 * SPDY/3.1 (kubectl's fallback) is refused with the reason, and so is any other.
 */
export function upgradeHandler(s: ServerState): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    handleProtocols: (offered) => CHANNEL_PROTOCOLS.find((p) => offered.has(p)) ?? false,
  });
  return (req, socket, head) => {
    socket.on('error', () => undefined);
    const url = new URL(req.url ?? '/', 'http://kube');
    const kind = String(req.headers.upgrade ?? '').toLowerCase();
    try {
      const target = execTarget(url.pathname);
      if (!target) throw badRequest(`${url.pathname} cannot be upgraded: only pods/NAME/exec is (over a WebSocket)`);
      const user = requestUser(s.auth, s.store, req);
      const attributes = execAttributes(target);
      const allowed = !s.auth || authorize(s.store, user, attributes);
      let prepared: ReturnType<typeof prepareExec> | undefined;
      let refusal: StatusError | undefined;
      try {
        if (!allowed) throw forbidden(user, attributes);
        prepared = prepareExec(s.store, target, url.searchParams);
        if (kind !== 'websocket')
          throw badRequest(
            `upgrade to ${req.headers.upgrade} is not served: pods/exec is served over a WebSocket ` +
              `(${CHANNEL_PROTOCOLS.join(', ')}), which kubectl 1.30 and later use unless ` +
              'KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false',
          );
      } catch (e) {
        refusal = e instanceof StatusError ? e : new StatusError(500, 'InternalError', (e as Error).message);
      }
      s.audit.recordCode(user, attributes, refusal ? refusal.code : 101);
      const offered = String(req.headers['sec-websocket-protocol'] ?? '')
        .split(',')
        .map((p) => p.trim());
      const protocol = CHANNEL_PROTOCOLS.find((p) => offered.includes(p));
      const key = `create pods/exec (${kind === 'websocket' ? (protocol ?? 'no subprotocol') : req.headers.upgrade})`;
      s.requests[key] = (s.requests[key] ?? 0) + 1;
      if (refusal) throw refusal;
      if (!protocol)
        throw badRequest(
          `none of the WebSocket subprotocols offered (${offered.filter(Boolean).join(', ') || 'none'}) is served: ` +
            `pods/exec speaks ${CHANNEL_PROTOCOLS.join(' and ')}`,
        );
      const { request, session } = prepared!;
      wss.handleUpgrade(req, socket, head, (ws) => serveChannels(ws, request, session));
    } catch (e) {
      refuse(socket, e instanceof StatusError ? e : new StatusError(500, 'InternalError', (e as Error).message));
    }
  };
}
