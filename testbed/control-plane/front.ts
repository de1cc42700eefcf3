import { once } from 'node:events';
import { Agent, createServer, request, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import {
  KubeFaultRules,
  parseKubeFaultSpec,
  type KubeFaultRule,
  type KubeFaultRuleState,
} from '../kube/core/faults.js';
import type { AuditEntry, AuditFilter } from './audit.js';
import { StatusError } from '../kube/core/errors.js';
import type { CertKey } from './pki.js';
import { requestInfoOf } from './request-info.js';

/**
 * A proxy in front of the real kube-apiserver through which tests inject Kubernetes faults
 * (refused requests, held ones, closed watches, a refused port) without a hook inside the
 * server. It terminates TLS with the API server's own serving certificate and forwards each
 * request as an authenticating front proxy does: a caller's client certificate becomes
 * X-Remote-User and X-Remote-Group (kube-apiserver trusts them from the front's certificate
 * only, --requestheader-client-ca-file); a bearer token passes through for the API server to
 * check. Everything else, authorization and admission included, is the API server's.
 */
export interface Front {
  url: string;
  port: number;
  setFaultRules(rules: KubeFaultRule[]): void;
  clearFaultRules(): void;
  faultRules(): KubeFaultRuleState[];
  /** Ends every open watch cleanly (clients resume from their last resourceVersion). */
  closeWatches(): void;
  /** Answers the next `n` watches with 410 Expired (clients must relist). */
  expireNextWatches(n: number): void;
  /** Refuses connections for a while (the listener is closed and open connections reset, then it listens again). */
  refuseConnections(ms: number): Promise<void>;
  openWatches(): number;
  /** Requests seen, by `<verb> <resource>[/<subresource>]` (resource qualified by its group, as `list enipools.eniipam.io`). */
  requests(): Record<string, number>;
  close(): Promise<void>;
}

export interface FrontOptions {
  host: string;
  port: number;
  /** The API server behind it. */
  upstream: { host: string; port: number };
  ca: string;
  serving: CertKey;
  /** The certificate kube-apiserver trusts for X-Remote-* headers. */
  frontProxyClient: CertKey;
  /** The API server's audit log, served at GET /_emulator/audit. */
  audit(filter: AuditFilter): AuditEntry[];
}

export const ADMIN = '/_emulator/';

/**
 * GET, PUT and DELETE /_emulator/faults (the fault rules, and `unreachableMs`) and GET
 * /_emulator/audit?user=U&since=MS, for the fault suite's processes and `eni-ipam emulate kube` users.
 */
export async function admin(
  req: IncomingMessage,
  res: ServerResponse,
  rules: KubeFaultRules,
  o: { audit: FrontOptions['audit']; refuse: (ms: number) => Promise<void> },
): Promise<void> {
  const json = (status: number, body: unknown) =>
    void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const url = new URL(req.url ?? '/', 'https://front');
  const route = `${req.method} ${url.pathname.slice(ADMIN.length)}`;
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  if (route === 'GET faults') return json(200, { rules: rules.list() });
  if (route === 'GET audit') {
    const since = url.searchParams.get('since');
    const user = url.searchParams.get('user') ?? undefined;
    return json(200, { items: o.audit({ user, since: since ? Number(since) : undefined }) });
  }
  if (route === 'DELETE faults') return json(200, (rules.clear(), { rules: [] }));
  if (route === 'PUT faults') {
    let spec;
    try {
      spec = parseKubeFaultSpec(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'));
    } catch (e) {
      return json(400, {
        error: e instanceof SyntaxError ? `the body is not JSON: ${e.message}` : (e as Error).message,
      });
    }
    rules.set(spec.rules ?? []);
    json(200, { rules: rules.list(), unreachableMs: spec.unreachableMs });
    // Answer first: the listener goes away with the connection this answer travels on.
    if (spec.unreachableMs)
      res.on('finish', () => setTimeout(() => void o.refuse(spec.unreachableMs!).catch(() => undefined), 20));
    return;
  }
  json(404, { error: `no admin route ${route}; try GET, PUT or DELETE faults, or GET audit` });
}

/** The identity a verified client certificate names: CN the user, each O a group. */
function certIdentity(socket: TLSSocket): { user: string; groups: string[] } | undefined {
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerCertificate();
  const cn = cert?.subject?.CN;
  if (!cn) return undefined;
  const o = cert.subject.O;
  return { user: String(cn), groups: o === undefined ? [] : Array.isArray(o) ? o.map(String) : [String(o)] };
}

/** The headers sent on: the caller's, less hop-by-hop ones and any X-Remote-* it made up. */
function forwardedHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || k.startsWith('x-remote-') || k === 'host') continue;
    out[k] = v;
  }
  const who = certIdentity(req.socket as TLSSocket);
  if (who) {
    delete out.authorization;
    out['x-remote-user'] = who.user;
    if (who.groups.length) out['x-remote-group'] = who.groups;
  }
  return out;
}

export async function startFront(o: FrontOptions): Promise<Front> {
  const rules = new KubeFaultRules();
  const watches = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  let expireNext = 0;
  const counts: Record<string, number> = {};
  const agent = new Agent({
    ca: o.ca,
    cert: o.frontProxyClient.cert,
    key: o.frontProxyClient.key,
    keepAlive: true,
    maxSockets: Infinity,
  });

  const forward = (req: IncomingMessage, res: ServerResponse) => {
    const up = request(
      {
        host: o.upstream.host,
        port: o.upstream.port,
        method: req.method,
        path: req.url,
        headers: forwardedHeaders(req),
        agent,
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        res.flushHeaders();
        upRes.pipe(res);
        res.on('close', () => upRes.destroy());
      },
    );
    up.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`front: the API server did not answer: ${e.message}\n`);
    });
    req.pipe(up);
    req.on('aborted', () => up.destroy());
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.url?.startsWith(ADMIN)) {
      // The test harness's routes: the cluster's admins only (a client certificate in system:masters).
      if (!certIdentity(req.socket as TLSSocket)?.groups.includes('system:masters'))
        return void res
          .writeHead(403, { 'content-type': 'text/plain' })
          .end('the /_emulator/ routes need an admin client certificate\n');
      return admin(req, res, rules, { audit: o.audit, refuse: refuseConnections });
    }
    const info = requestInfoOf(req.method ?? 'GET', req.url ?? '/');
    if (info) {
      const key = `${info.verb} ${info.group ? `${info.resource}.${info.group}` : info.resource}${info.subresource ? `/${info.subresource}` : ''}`;
      counts[key] = (counts[key] ?? 0) + 1;
      if (info.verb === 'watch' && expireNext > 0) {
        expireNext--;
        const expired = new StatusError(410, 'Expired', 'too old resource version: 1 (2)');
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: expired.toStatus() })}\n`);
        return;
      }
      try {
        if (await rules.apply(res, info)) return;
      } catch (e) {
        if (!(e instanceof StatusError)) throw e;
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (e.code === 429) headers['retry-after'] = String(e.details?.retryAfterSeconds ?? 1);
        res.writeHead(e.code, headers);
        res.end(JSON.stringify(e.toStatus()));
        return;
      }
      if (info.verb === 'watch') {
        watches.add(res);
        res.on('close', () => watches.delete(res));
      }
    }
    forward(req, res);
  };

  /**
   * exec, attach and port-forward upgrade the connection: once kube-apiserver answers 101, the
   * front passes the bytes through. Nothing more of the caller's goes up before that answer, and
   * any other answer ends both connections: a connection carrying the front's certificate must
   * never take a second request the front has not read (it would go up as whoever it claims).
   */
  const upgrade = (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const up = tlsConnect({
      host: o.upstream.host,
      port: o.upstream.port,
      ca: o.ca,
      cert: o.frontProxyClient.cert,
      key: o.frontProxyClient.key,
      servername: 'localhost',
    });
    up.on('secureConnect', () => {
      const headers = forwardedHeaders(req);
      const lines = [`${req.method} ${req.url} HTTP/1.1`, `host: ${o.upstream.host}:${o.upstream.port}`];
      for (const [k, v] of Object.entries(headers)) for (const one of [v].flat()) lines.push(`${k}: ${one}`);
      up.write(`${lines.join('\r\n')}\r\n\r\n`);
      let answer = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        answer = Buffer.concat([answer, chunk]);
        const end = answer.indexOf('\r\n\r\n');
        if (end < 0) return;
        up.off('data', onData);
        const answerHead = answer.toString('latin1', 0, end);
        if (!/^HTTP\/1\.[01] 101 /.test(answerHead)) {
          // Refused (or not an upgrade): relay this one answer, then close both connections.
          const length = /\r\ncontent-length: *(\d+)/i.exec(answerHead);
          // Bytes of the answer still to relay: its head and body (a length), else until the last chunk.
          let left = length ? end + 4 + Number(length[1]) : Infinity;
          const relay = (chunk: Buffer) => {
            socket.write(chunk);
            left -= chunk.length;
            const last = chunk.subarray(-5).toString('latin1') === '0\r\n\r\n';
            if (left <= 0 || (!length && last)) {
              socket.end();
              up.destroy();
            }
          };
          relay(answer);
          up.on('data', relay);
          return;
        }
        socket.write(answer);
        if (head.length) up.write(head);
        up.pipe(socket);
        socket.pipe(up);
      };
      up.on('data', onData);
    });
    up.on('error', () => socket.destroy());
    socket.on('error', () => up.destroy());
    socket.on('close', () => up.destroy());
  };

  const server: Server = createServer(
    { cert: o.serving.cert, key: o.serving.key, ca: o.ca, requestCert: true, rejectUnauthorized: false },
    (req, res) => void handle(req, res).catch(() => res.destroy()),
  );
  server.on('upgrade', upgrade);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.listen(o.port, o.host);
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;

  const resetAll = () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
  };
  let refusing = false;
  let closing = false;
  async function refuseConnections(ms: number) {
    if (refusing || closing) return;
    refusing = true;
    const closed = new Promise((r) => server.close(r));
    resetAll();
    await closed;
    await new Promise((r) => setTimeout(r, ms));
    refusing = false;
    if (closing) return;
    server.listen(port, o.host);
    await once(server, 'listening');
  }

  return {
    url: `https://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}`,
    port,
    setFaultRules: (r) => rules.set(r),
    clearFaultRules: () => rules.clear(),
    faultRules: () => rules.list(),
    closeWatches() {
      for (const w of [...watches]) w.end();
      watches.clear();
    },
    expireNextWatches(n) {
      expireNext += n;
    },
    refuseConnections,
    openWatches: () => watches.size,
    requests: () => ({ ...counts }),
    async close() {
      closing = true;
      rules.clear();
      const closed = new Promise((r) => server.close(r));
      resetAll();
      await closed;
      agent.destroy();
    },
  };
}
