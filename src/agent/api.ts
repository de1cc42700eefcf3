import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Agent } from './agent.js';
import type { Lease } from './allocator.js';
import { socketTransport } from './cni-plugin.js';

async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  const parsed: unknown = JSON.parse(text || '{}');
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new SyntaxError('the body must be a JSON object');
  return parsed as Record<string, unknown>;
}

const str = (o: Record<string, unknown>, k: string, required = true): string | undefined => {
  const v = o[k];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string' || !v) throw new TypeError(`"${k}" must be a non-empty string`);
  return v;
};

/**
 * The agent's local API on a unix socket: POST /v1/allocate {containerId, ifName, pod},
 * POST /v1/release {containerId, ifName?}, GET /v1/allocations. The CNI plugin calls it.
 */
export async function serveAgentApi(agent: Agent, socketPath: string): Promise<Server> {
  const send = (res: ServerResponse, status: number, payload: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
  const server = createServer((req, res) => {
    void (async () => {
      try {
        const route = `${req.method} ${(req.url ?? '').split('?')[0]}`;
        if (route === 'POST /v1/allocate') {
          const b = await body(req);
          const lease = agent.allocate({ containerId: str(b, 'containerId')!, ifName: str(b, 'ifName')!, pod: str(b, 'pod')! });
          if (lease === 'pool-empty') return send(res, 503, { error: 'pool-empty', message: 'the node has no free pod IP right now; the operator is adding some, try again shortly' });
          return send(res, 200, { lease });
        }
        if (route === 'POST /v1/release') {
          const b = await body(req);
          return send(res, 200, { released: agent.release(str(b, 'containerId')!, str(b, 'ifName', false)) });
        }
        if (route === 'GET /v1/allocations') return send(res, 200, { allocations: agent.list() });
        return send(res, 404, { error: 'not-found', message: `no route ${route}` });
      } catch (e) {
        const bad = e instanceof SyntaxError || e instanceof TypeError;
        send(res, bad ? 400 : 500, { error: bad ? 'bad-request' : 'internal', message: (e as Error).message });
      }
    })();
  });
  mkdirSync(dirname(socketPath), { recursive: true });
  rmSync(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return server;
}

/** A client of the API above, for programs that stand in for the CNI plugin (the demo, the benchmarks). */
export const agentClient = {
  async allocate(socket: string, req: { containerId: string; ifName: string; pod: string }, timeoutMs = 10_000): Promise<Lease | 'pool-empty'> {
    const r = await socketTransport.request(socket, 'POST', '/v1/allocate', req, timeoutMs);
    if (r.status === 503) return 'pool-empty';
    if (r.status !== 200) throw new Error(`allocation for ${req.containerId} at ${socket} failed: HTTP ${r.status} ${String(r.body.message ?? '')}`);
    return r.body.lease as Lease;
  },
  async release(socket: string, containerId: string, ifName: string, timeoutMs = 10_000): Promise<void> {
    const r = await socketTransport.request(socket, 'POST', '/v1/release', { containerId, ifName }, timeoutMs);
    if (r.status !== 200) throw new Error(`release of ${containerId} at ${socket} failed: HTTP ${r.status} ${String(r.body.message ?? '')}`);
  },
};
