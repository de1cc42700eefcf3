import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { chmodSync, chownSync, lstatSync, mkdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import type { Agent } from './agent.js';
import { answerCni } from './cni.js';
import { DatapathError } from './datapath/node-routing.js';

/** Request bodies above this are refused with 413 (a CNI request is a few KiB). */
export const MAX_BODY_BYTES = 1024 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
  ) {
    super(message);
  }
}

const badRequest = (message: string) => new HttpError(400, 'bad-request', message);

async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
  const tooLarge = () => new HttpError(413, 'too-large', `the request body exceeds ${MAX_BODY_BYTES} bytes`);
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY_BYTES) throw tooLarge();
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text || '{}');
  } catch (e) {
    throw badRequest(`the body is not valid JSON: ${(e as Error).message}`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw badRequest('the body must be a JSON object');
  return parsed as Record<string, unknown>;
}

function str(o: Record<string, unknown>, k: string, required = true): string | undefined {
  const v = o[k];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string' || !v) throw badRequest(`"${k}" must be a non-empty string`);
  return v;
}

/** The body of POST /v1/cni: {env: {CNI_COMMAND, ...}, stdin: "<network configuration>"}. */
function cniRequest(b: Record<string, unknown>): { env: Record<string, string>; stdin: string } {
  const env = b.env;
  if (!env || typeof env !== 'object' || Array.isArray(env))
    throw badRequest('"env" must be an object of the CNI_* variables');
  for (const [k, v] of Object.entries(env)) if (typeof v !== 'string') throw badRequest(`"env.${k}" must be a string`);
  if (typeof b.stdin !== 'string')
    throw badRequest('"stdin" must be a string: the network configuration the plugin read');
  return { env: env as Record<string, string>, stdin: b.stdin };
}

export interface ApiOptions {
  /** Group (id) allowed to use the socket: mode 0660 with this group instead of 0600. */
  socketGid?: number;
}

/** A live process answers on the socket: it is not this agent's to take. */
export class SocketInUseError extends Error {}

/** Whether something accepts connections on the socket (a stale one refuses them). */
function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const c = connect(socketPath);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ECONNREFUSED' || e.code === 'ENOENT') resolve(false);
      else reject(new Error(`cannot tell whether an agent serves ${socketPath}: ${e.message}`));
    });
  });
}

/**
 * Makes way for this agent's socket: a stale one left by an earlier agent (nobody accepts on it)
 * is removed; one a live process serves is left alone and refused, as is anything that is not a
 * socket. Call it before anything else touches the node's state.
 */
export async function clearStaleSocket(socketPath: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(socketPath).isSocket();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  if (!isSocket)
    throw new Error(`${socketPath} exists and is not a socket; refusing to replace it (choose another --socket)`);
  if (await answers(socketPath))
    throw new SocketInUseError(
      `another process (an eni-ipam agent?) serves ${socketPath}; one agent runs per node: ` +
        'stop that one first, or give this one its own --socket and --state-dir',
    );
  rmSync(socketPath);
}

/**
 * The agent's local API on a unix socket: POST /v1/cni {env, stdin} answers exactly what
 * eni-ipam-cni prints (the body) and its exit code (header x-cni-exit-code); POST /v1/allocate
 * {containerId, ifName, pod}, POST /v1/release {containerId, ifName?} and GET /v1/allocations
 * serve programs that stand in for the runtime. The socket is mode 0600 (0660 with a group)
 * whatever the umask: whoever can write to it can take and release pod addresses.
 */
export async function serveAgentApi(agent: Agent, socketPath: string, o: ApiOptions = {}): Promise<Server> {
  const send = (res: ServerResponse, status: number, payload: unknown) => {
    const text = JSON.stringify(payload);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
  };
  const server = createServer((req, res) => {
    void (async () => {
      try {
        const route = `${req.method} ${(req.url ?? '').split('?')[0]}`;
        if (route === 'POST /v1/cni') {
          const answer = await answerCni(agent, cniRequest(await body(req)));
          await agent.persisted();
          res
            .writeHead(200, {
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(answer.stdout),
              'x-cni-exit-code': String(answer.exitCode),
            })
            .end(answer.stdout);
          return;
        }
        if (route === 'POST /v1/allocate') {
          const b = await body(req);
          let lease: Awaited<ReturnType<Agent['addPod']>>;
          const podUid = str(b, 'podUid', false);
          try {
            lease = await agent.addPod({
              containerId: str(b, 'containerId')!,
              ifName: str(b, 'ifName')!,
              pod: str(b, 'pod')!,
              ...(podUid ? { podUid } : {}),
            });
          } catch (e) {
            if (!(e instanceof DatapathError)) throw e;
            return send(res, 503, { error: 'datapath', eniId: e.eniId, reason: e.reason, message: e.message });
          }
          if (lease === 'pool-empty')
            return send(res, 503, {
              error: 'pool-empty',
              reason: agent.whyEmpty(),
              message: `the node has no free pod IP right now: ${agent.whyEmpty()}; try again shortly`,
            });
          await agent.persisted();
          return send(res, 200, { lease });
        }
        if (route === 'POST /v1/release') {
          const b = await body(req);
          const released = await agent.removePod(str(b, 'containerId')!, str(b, 'ifName', false));
          await agent.persisted();
          return send(res, 200, { released });
        }
        if (route === 'GET /v1/allocations') return send(res, 200, { allocations: agent.list() });
        return send(res, 404, {
          error: 'not-found',
          message:
            `no route ${route}; ` +
            'the agent serves POST /v1/cni, POST /v1/allocate, POST /v1/release and GET /v1/allocations',
        });
      } catch (e) {
        if (e instanceof HttpError) {
          // An unread body (413) is not drained: the connection closes after the answer.
          if (e.status === 413) res.setHeader('connection', 'close');
          return send(res, e.status, { error: e.error, message: e.message });
        }
        send(res, 500, { error: 'internal', message: (e as Error).message });
      }
    })();
  });
  mkdirSync(dirname(socketPath), { recursive: true, mode: 0o755 });
  await clearStaleSocket(socketPath);
  const mode = o.socketGid === undefined ? 0o600 : 0o660;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // bind(2) creates the socket file under the umask: restrict it for that one synchronous call, so
    // it is never open to others, not even between bind and the chmod below.
    const umask = process.umask(0o177);
    try {
      server.listen(socketPath, () => resolve());
    } finally {
      process.umask(umask);
    }
  });
  if (o.socketGid !== undefined) chownSync(socketPath, process.getuid?.() ?? 0, o.socketGid);
  chmodSync(socketPath, mode);
  return server;
}
