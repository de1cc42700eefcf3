import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * pass: bytes flow both ways. blackhole: connections stay open and nothing moves either way
 * (what a dead network path does: the peer neither answers nor resets; new connections are
 * accepted and wait); bytes sent meanwhile are held, as TCP retransmits them, and delivered if
 * the path heals. refuse: the port refuses connections and open ones are reset.
 */
export type NetMode = 'pass' | 'blackhole' | 'refuse';

export interface FaultProxy {
  host: string;
  port: number;
  /** `http://host:port`, for a client that talks HTTP through the proxy. */
  url: string;
  readonly mode: NetMode;
  setMode(mode: NetMode): Promise<void>;
  /** Connections open through the proxy. */
  connections(): number;
  close(): Promise<void>;
}

interface Link {
  client: Socket;
  upstream?: Socket;
}

/** A TCP proxy for one process's connection to a server, with a switch for the path's faults. */
export async function startFaultProxy(
  target: { host: string; port: number },
  opts: { host?: string; mode?: NetMode } = {},
): Promise<FaultProxy> {
  let mode: NetMode = opts.mode ?? 'pass';
  const links = new Set<Link>();
  const host = opts.host ?? '127.0.0.1';

  const flow = (l: Link) => {
    if (!l.upstream) {
      l.upstream = connect(target.port, target.host);
      l.upstream.on('error', () => l.client.destroy());
      l.upstream.on('close', () => l.client.destroy());
    }
    l.client.pipe(l.upstream);
    l.upstream.pipe(l.client);
    l.client.resume();
    l.upstream.resume();
  };
  const hold = (l: Link) => {
    l.client.unpipe();
    l.client.pause();
    if (l.upstream) {
      l.upstream.unpipe();
      l.upstream.pause();
    }
  };

  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    const l: Link = { client };
    links.add(l);
    client.on('error', () => l.upstream?.destroy());
    client.on('close', () => {
      l.upstream?.destroy();
      links.delete(l);
    });
    if (mode === 'pass') flow(l);
    // In a blackhole the connection waits, paused, until the path heals.
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const { port } = server.address() as AddressInfo;

  const resetAll = () => {
    for (const l of links) {
      l.client.resetAndDestroy();
      l.upstream?.destroy();
    }
    links.clear();
  };

  return {
    host,
    port,
    url: `http://${host}:${port}`,
    get mode() {
      return mode;
    },
    async setMode(next) {
      const was = mode;
      if (next === was) return;
      mode = next;
      if (next === 'refuse') {
        await new Promise<void>((r) => {
          server.close(() => r());
          resetAll();
        });
        return;
      }
      if (was === 'refuse') await listen(port);
      for (const l of links) (next === 'pass' ? flow : hold)(l);
    },
    connections: () => links.size,
    async close() {
      resetAll();
      if (server.listening) await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
