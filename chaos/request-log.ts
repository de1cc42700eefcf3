import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request that went through, and the status it was answered with (none: no answer yet, or none came). */
export interface LoggedRequest {
  at: number;
  method: string;
  path: string;
  status?: number;
}

export interface RequestLog {
  /** `http://host:port`, for the client's kubeconfig. */
  url: string;
  readonly requests: LoggedRequest[];
  close(): Promise<void>;
}

/**
 * An HTTP proxy on one client's path to the API server that records every request it carries
 * (watches stream through): what one agent sent, counted apart from everyone else's.
 */
export async function startRequestLog(target: string): Promise<RequestLog> {
  const upstream = new URL(target);
  const requests: LoggedRequest[] = [];
  const server = http.createServer((req, res) => {
    const entry: LoggedRequest = { at: Date.now(), method: req.method ?? '', path: req.url ?? '' };
    requests.push(entry);
    // A connection per request (agent: false): nothing pooled outlives the client's own connection.
    const up = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        agent: false,
      },
      (answer) => {
        entry.status = answer.statusCode;
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // A watch's headers come before its first event: pass them on now, not with that event.
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    // The server unreachable: the client sees its connection reset, as without the proxy it is refused.
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
