import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP forwarder to one target that a test can black-hole: connections stay open but nothing
 * passes either way, as on a dead network path (no reset, no FIN): the client only notices
 * through its own deadlines.
 */
export async function blackholeProxy(target: string): Promise<{ url: string; blackhole(): void; close(): Promise<void> }> {
  const t = new URL(target);
  let dead = false;
  const pairs = new Set<[Socket, Socket]>();
  const accepted = new Set<Socket>();
  const server: Server = createServer((client) => {
    accepted.add(client);
    client.on('close', () => accepted.delete(client)).on('error', () => undefined);
    if (dead) return; // accepted, never answered
    const upstream = connect(Number(t.port), t.hostname);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${t.protocol}//127.0.0.1:${port}`,
    blackhole() {
      dead = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    close: async () => {
      for (const pair of pairs) pair.forEach((s) => s.destroy());
      for (const s of accepted) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
