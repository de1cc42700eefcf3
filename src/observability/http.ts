import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface HealthChecks {
  /** The process is alive and its loops turn. */
  live(): boolean;
  /** Caches are synced and the instance is a leader or a warm follower. */
  ready(): boolean;
}

/** Where to listen: an IP address or a host name (IPv6 without brackets), and a port (0: any free one). */
export interface ListenAddress {
  host: string;
  port: number;
}

/** Listening on the metrics or the health address failed; `cause` is Node's error (its `code`: EADDRINUSE...). */
export class ListenError extends Error {
  constructor(
    readonly role: 'metrics' | 'health',
    readonly address: ListenAddress,
    readonly cause: NodeJS.ErrnoException,
  ) {
    super(`cannot serve ${role} on ${address.host}:${address.port}: ${cause.message}`);
  }
}

/** Serves /metrics from a registry and /healthz, /readyz from checks; returns the bound address. */
export async function serveObservability(
  { host, port }: ListenAddress,
  registry: Registry | undefined,
  checks: HealthChecks,
): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics' && registry) {
      registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text))
        .catch((e) => res.writeHead(500).end(String(e)));
      return;
    }
    if (path === '/healthz' || path === '/livez')
      return void res
        .writeHead(checks.live() ? 200 : 503, { 'content-type': 'text/plain' })
        .end(checks.live() ? 'ok' : 'not live');
    if (path === '/readyz')
      return void res
        .writeHead(checks.ready() ? 200 : 503, { 'content-type': 'text/plain' })
        .end(checks.ready() ? 'ok' : 'not ready');
    res.writeHead(404).end('not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const a = server.address() as AddressInfo;
  return { server, url: `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}` };
}

/**
 * Metrics and health on their two addresses (one server when they are the same). A failure to
 * listen on either is a ListenError naming which, with nothing left listening.
 */
export async function serveMetricsAndHealth(
  metricsAddr: ListenAddress,
  healthAddr: ListenAddress,
  registry: Registry,
  checks: HealthChecks,
) {
  const metrics = await serveObservability(metricsAddr, registry, checks).catch((e: NodeJS.ErrnoException) => {
    throw new ListenError('metrics', metricsAddr, e);
  });
  const same = healthAddr.host === metricsAddr.host && healthAddr.port === metricsAddr.port;
  const health = same
    ? metrics
    : await serveObservability(healthAddr, undefined, checks).catch((e: NodeJS.ErrnoException) => {
        metrics.server.close();
        throw new ListenError('health', healthAddr, e);
      });
  return {
    metricsUrl: `${metrics.url}/metrics`,
    healthUrl: `${health.url}/healthz`,
    close: () => {
      metrics.server.close();
      if (health !== metrics) health.server.close();
    },
  };
}
