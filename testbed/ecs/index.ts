import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACTIONS } from './actions.js';
import { Authenticator } from './auth.js';
import { scaledClock, type ScaledClock } from './clock.js';
import { defaultWorld } from './default-world.js';
import { Faults, parseFaultSpec, type FaultSpec } from './faults.js';
import { validateFixture, type Fixture } from './fixture.js';
import { CallJournal, type CallRecord, type CallRecordQuery } from './journal.js';
import { metadataHandler } from './metadata.js';
import { ActionQuotas } from './quotas.js';
import { rpcHandler, type CallStats } from './server.js';
import type { OidcVerifier } from './sts.js';
import { World, type WorldSnapshot } from './world.js';

export { ACCOUNT_API_QUOTAS, defaultWorld } from './default-world.js';
export { nodeObject } from './node-object.js';
export { FixtureError, loadFixtureFile, validateFixture, type Fixture } from './fixture.js';
export type { FaultSpec } from './faults.js';
export type { WorldSnapshot } from './world.js';
export type { CallRecord, CallRecordQuery } from './journal.js';
export { signRpc } from './signature.js';

export interface EcsEmulatorOptions {
  fixture?: Fixture;
  host?: string;
  port?: number;
  /** Overrides the fixture's time scale. */
  timeScale?: number;
  faults?: FaultSpec;
  /** Takes an emulated cluster's service-account tokens for AssumeRoleWithOIDC (RRSA). */
  oidcVerifier?: OidcVerifier;
}

/** The control handle of a running emulator, for tests, benchmarks and the demo. */
export interface EcsEmulator {
  /** Base URL of the OpenAPI endpoint (ECS and VPC alike). */
  url: string;
  /** Base URL of the instance metadata paths (RAM role credentials). */
  metadataUrl: string;
  fixture: Fixture;
  clock: ScaledClock;
  world: World;
  setFaults(spec: FaultSpec): void;
  clearFaults(): void;
  stats(): CallStats;
  /** Successful calls of each action that changes the world (only actions called so far). */
  mutatingCalls(): Record<string, number>;
  resetStats(): void;
  /** Every call answered (or held) so far, filtered; also GET /_emulator/calls?since=MS&action=A&accessKeyId=K. */
  calls(q?: CallRecordQuery): CallRecord[];
  state(): WorldSnapshot;
  close(): Promise<void>;
}

const ADMIN = '/_emulator/';
const OWNER_ID = '1234567890123456';

export async function startEcsEmulator(opts: EcsEmulatorOptions = {}): Promise<EcsEmulator> {
  const fixture = validateFixture(structuredClone(opts.fixture ?? defaultWorld()));
  const clock = scaledClock(opts.timeScale ?? fixture.timeScale ?? 1);
  const faults = new Faults(opts.faults ?? fixture.faults);
  const world = new World(fixture, clock, faults);
  const auth = new Authenticator(fixture.credentials);
  const stats: CallStats = { calls: {}, total: 0 };
  const held = new Set<ServerResponse>();
  const journal = new CallJournal();
  const rpc = rpcHandler({
    oidcVerifier: opts.oidcVerifier,
    world,
    auth,
    quotas: new ActionQuotas(fixture.quotas?.api ?? {}),
    fixture,
    ownerId: OWNER_ID,
    stats,
    held,
    journal,
  });
  const metadata = metadataHandler(auth, fixture.ramRoles ?? []);

  const handle: Omit<EcsEmulator, 'url' | 'metadataUrl' | 'close'> = {
    fixture,
    clock,
    world,
    setFaults: (spec) => faults.set(spec),
    clearFaults: () => faults.set({}),
    stats: () => structuredClone(stats),
    mutatingCalls: () =>
      Object.fromEntries(
        Object.entries(stats.calls)
          .filter(([action]) => Object.values(ACTIONS).some((defs) => defs[action]?.mutating))
          .map(([action, byCode]) => [action, byCode.OK ?? 0]),
      ),
    resetStats: () => {
      stats.calls = {};
      stats.total = 0;
    },
    state: () => world.snapshot(),
    calls: (q) => journal.list(q),
  };

  const admin = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    const route = `${req.method} ${path.slice(ADMIN.length)}`;
    if (route === 'GET calls') {
      const q = new URL(req.url ?? '/', 'http://emulator').searchParams;
      const since = q.get('since');
      if (since !== null && !/^\d+$/.test(since))
        return json(400, { error: `since must be a time in milliseconds since the epoch, not "${since}"` });
      return json(200, {
        calls: handle.calls({
          since: since === null ? undefined : Number(since),
          action: q.get('action') ?? undefined,
          accessKeyId: q.get('accessKeyId') ?? undefined,
        }),
      });
    }
    if (route === 'GET stats') return json(200, handle.stats());
    if (route === 'POST stats/reset') return json(200, (handle.resetStats(), {}));
    if (route === 'GET state') return json(200, handle.state());
    const release = /^DELETE instances\/(i-[\w-]+)$/.exec(route);
    if (release) {
      try {
        world.releaseInstance(release[1]!);
        return json(200, {});
      } catch (e) {
        return json(404, { error: (e as Error).message });
      }
    }
    if (route === 'GET faults') return json(200, faults.current);
    if (route === 'DELETE faults') return json(200, (handle.clearFaults(), {}));
    if (route === 'PUT faults') {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      try {
        faults.set(parseFaultSpec(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
        return json(200, faults.current);
      } catch (e) {
        return json(400, { error: (e as Error).message });
      }
    }
    return json(404, {
      error:
        `no admin route ${route}; ` +
        'try GET stats, GET state, GET calls, GET/PUT/DELETE faults, POST stats/reset, DELETE instances/ID',
    });
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://emulator');
    const done = (p: Promise<void> | void) =>
      Promise.resolve(p).catch((e) => {
        console.error('ecs emulator: request failed', e);
        if (!res.headersSent) res.writeHead(500).end();
      });
    if (url.pathname.startsWith(ADMIN)) return void done(admin(req, res, url.pathname));
    if (url.pathname.startsWith('/latest/')) return void done(metadata(req, res, url.pathname));
    return void done(rpc(req, res, url));
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  const url = `http://${host}:${port}`;
  return {
    ...handle,
    url,
    metadataUrl: url,
    close: async () => {
      for (const res of held) res.destroy();
      held.clear();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
