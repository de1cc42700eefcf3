import http from 'node:http';
import type { Lease } from './allocator.js';
import type { CniAnswer, CniRequest } from './cni.js';

export interface AgentResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** One request to the agent's API on its unix socket. */
export function agentRequest(
  socket: string,
  method: string,
  path: string,
  body: unknown,
  timeoutMs = 10_000,
): Promise<AgentResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath: socket, path, method, headers: { 'content-type': 'application/json' }, timeout: timeoutMs },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () =>
      req.destroy(new Error(`the eni-ipam agent at ${socket} did not answer ${method} ${path} within ${timeoutMs} ms`)),
    );
    req.on('error', (e) =>
      reject(
        new Error(`cannot reach the eni-ipam agent at ${socket}: ${(e as NodeJS.ErrnoException).code ?? e.message}`),
      ),
    );
    req.end(body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body));
  });
}

const json = (r: AgentResponse): Record<string, unknown> => {
  try {
    return JSON.parse(r.text || '{}') as Record<string, unknown>;
  } catch {
    return { message: r.text };
  }
};

/** A client of the agent's API, for programs that stand in for the runtime (the demo, the benchmarks, tests). */
export const agentClient = {
  async allocate(
    socket: string,
    req: { containerId: string; ifName: string; pod: string },
    timeoutMs = 10_000,
  ): Promise<Lease | 'pool-empty'> {
    const r = await agentRequest(socket, 'POST', '/v1/allocate', req, timeoutMs);
    if (r.status === 503) return 'pool-empty';
    if (r.status !== 200)
      throw new Error(
        `allocation for ${req.containerId} at ${socket} failed: HTTP ${r.status} ${String(json(r).message ?? '')}`,
      );
    return json(r).lease as Lease;
  },
  async release(socket: string, containerId: string, ifName: string, timeoutMs = 10_000): Promise<void> {
    const r = await agentRequest(socket, 'POST', '/v1/release', { containerId, ifName }, timeoutMs);
    if (r.status !== 200)
      throw new Error(
        `release of ${containerId} at ${socket} failed: HTTP ${r.status} ${String(json(r).message ?? '')}`,
      );
  },
  /** A raw CNI call through POST /v1/cni: what eni-ipam-cni prints and its exit code. */
  async cni(socket: string, req: CniRequest, timeoutMs = 10_000): Promise<CniAnswer> {
    const r = await agentRequest(socket, 'POST', '/v1/cni', req, timeoutMs);
    if (r.status !== 200)
      throw new Error(`CNI call at ${socket} failed: HTTP ${r.status} ${String(json(r).message ?? '')}`);
    return { stdout: r.text, exitCode: Number(r.headers['x-cni-exit-code']) };
  },
};
