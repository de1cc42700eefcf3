import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { once } from 'node:events';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { WebSocketServer } from 'ws';
import { StatusError } from '../../kube/core/errors.js';
import type { KubeObject } from '../../kube/core/types.js';
import { CHANNEL_PROTOCOLS, serveChannels } from '../../kube/pods/channel-protocol.js';
import type { ExecRequest, ExecSession } from '../../kube/pods/pod-exec.js';
import type { CertKey } from '../../control-plane/pki.js';

/**
 * The kubelet's own HTTPS API, which kube-apiserver proxies `pods/exec` and `pods/log` to:
 * `/exec/<ns>/<pod>/<container>?command=..&input=1&output=1&error=1&tty=1` (a WebSocket with a
 * channel.k8s.io subprotocol) and `/containerLogs/<ns>/<pod>/<container>`. Only the API
 * server's kubelet-client certificate is let in, as a kubelet with webhook authentication off
 * and x509 on lets in its API server.
 */
export interface KubeletBackend {
  pod(namespace: string, name: string): KubeObject | undefined;
  prepareExec(pod: KubeObject, request: ExecRequest): ExecSession;
  serveLog(pod: KubeObject, query: URLSearchParams, res: ServerResponse): Promise<void>;
}

export interface KubeletServer {
  port: number;
  close(): Promise<void>;
}

const API_SERVER_CLIENT = 'kube-apiserver-kubelet-client';
const flag = (q: URLSearchParams, name: string) => ['true', '1'].includes(q.get(name) ?? '');

function fail(res: ServerResponse, e: unknown): void {
  const err = e instanceof StatusError ? e : new StatusError(500, 'InternalError', (e as Error).message);
  if (!res.headersSent) res.writeHead(err.code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(err.toStatus()));
}

function refuse(socket: Duplex, e: unknown): void {
  const err = e instanceof StatusError ? e : new StatusError(500, 'InternalError', (e as Error).message);
  const body = JSON.stringify(err.toStatus());
  socket.end(
    `HTTP/1.1 ${err.code} ${STATUS_CODES[err.code] ?? ''}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** `/<verb>/<ns>/<pod>/<container>` (or with the pod's uid before the container). */
function target(path: string, verb: string, backend: KubeletBackend) {
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] !== verb || parts.length < 4) throw new StatusError(404, 'NotFound', `no kubelet route ${path}`);
  const [, namespace, name] = parts as [string, string, string];
  const container = parts.at(-1)!;
  const pod = backend.pod(namespace, name);
  if (!pod) throw new StatusError(404, 'NotFound', `pod ${namespace}/${name} is not on this node`);
  return { pod, container };
}

const fromApiServer = (req: IncomingMessage): boolean => {
  const s = req.socket as TLSSocket;
  return s.authorized && String(s.getPeerCertificate()?.subject?.CN ?? '') === API_SERVER_CLIENT;
};

export async function startKubeletServer(o: {
  serving: CertKey;
  ca: string;
  backend: KubeletBackend;
  host?: string;
}): Promise<KubeletServer> {
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    handleProtocols: (offered) => CHANNEL_PROTOCOLS.find((p) => offered.has(p)) ?? false,
  });
  const server: Server = createServer(
    { cert: o.serving.cert, key: o.serving.key, ca: o.ca, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const url = new URL(req.url ?? '/', 'https://kubelet');
      if (url.pathname === '/healthz') return void res.end('ok');
      if (!fromApiServer(req)) return fail(res, new StatusError(401, 'Unauthorized', 'Unauthorized'));
      try {
        const { pod, container } = target(url.pathname, 'containerLogs', o.backend);
        url.searchParams.set('container', container);
        o.backend.serveLog(pod, url.searchParams, res).catch((e) => fail(res, e));
      } catch (e) {
        fail(res, e);
      }
    },
  );
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    try {
      if (!fromApiServer(req)) throw new StatusError(401, 'Unauthorized', 'Unauthorized');
      const url = new URL(req.url ?? '/', 'https://kubelet');
      const { pod, container } = target(url.pathname, 'exec', o.backend);
      const q = url.searchParams;
      const request: ExecRequest = {
        container,
        command: q.getAll('command'),
        stdin: flag(q, 'input'),
        stdout: flag(q, 'output'),
        stderr: flag(q, 'error'),
        tty: flag(q, 'tty'),
      };
      const session = o.backend.prepareExec(pod, request);
      wss.handleUpgrade(req, socket, head, (ws) => serveChannels(ws, request, session));
    } catch (e) {
      refuse(socket, e);
    }
  });
  server.listen(0, o.host ?? '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
