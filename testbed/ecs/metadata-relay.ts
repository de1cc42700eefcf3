import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the relay served. */
export interface MetadataRequest {
  method: string;
  path: string;
  /** When it arrived (epoch ms). */
  at: number;
}

export interface MetadataRelay {
  /** `http://host:port`, for `--metadata-endpoint` or `ramRoleCredentials({ metadataEndpoint })`. */
  url: string;
  /** Every answer is held this long before it is sent (what a metadata service under load does). */
  latencyMs: number;
  /** Answer every request with this HTTP status instead of relaying it (0: relay). */
  failWith: number;
  /** Requests served so far, in order of arrival. */
  readonly requests: MetadataRequest[];
  /** The AccessKeyIds of the RAM-role credentials it handed out (to tell whose calls are whose). */
  readonly accessKeyIds: Set<string>;
  close(): Promise<void>;
}

/** Headers of the metadata protocol (hardened mode) that are relayed. */
const RELAYED = ['x-aliyun-ecs-metadata-token', 'x-aliyun-ecs-metadata-token-ttl-seconds'];

/**
 * A relay in front of an ECS instance metadata service (the emulator's): settable latency and
 * failures, a record of the requests it served and of the credentials it handed out. One per
 * process under test, as each instance has its own metadata service.
 */
export async function startMetadataRelay(target: string, o: { latencyMs?: number } = {}): Promise<MetadataRelay> {
  const base = target.replace(/\/$/, '');
  const held = new Set<{ timer: NodeJS.Timeout; res: ServerResponse }>();
  const hold = (ms: number, res: ServerResponse) =>
    new Promise<void>((resolve) => {
      const entry = { res, timer: setTimeout(() => (held.delete(entry), resolve()), ms) };
      held.add(entry);
    });
  const server = createServer((req, res) => {
    relay.requests.push({ method: req.method ?? 'GET', path: req.url ?? '/', at: Date.now() });
    void (async () => {
      if (relay.latencyMs > 0) await hold(relay.latencyMs, res);
      if (relay.failWith) return void res.writeHead(relay.failWith, { 'content-type': 'text/plain' }).end('fault');
      const headers: Record<string, string> = {};
      for (const h of RELAYED) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h];
      const answer = await fetch(`${base}${req.url ?? '/'}`, { method: req.method, headers });
      const body = await answer.text();
      if (answer.headers.get('content-type')?.includes('json')) {
        const id = (JSON.parse(body) as { AccessKeyId?: unknown }).AccessKeyId;
        if (typeof id === 'string') relay.accessKeyIds.add(id);
      }
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' }).end(body);
    })().catch((e: Error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`relay: ${e.message}`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const relay: MetadataRelay = {
    url: `http://127.0.0.1:${port}`,
    latencyMs: o.latencyMs ?? 0,
    failWith: 0,
    requests: [],
    accessKeyIds: new Set(),
    close: async () => {
      for (const h of held) {
        clearTimeout(h.timer);
        h.res.destroy();
      }
      held.clear();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return relay;
}
