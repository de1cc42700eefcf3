import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { KubeFaultRules, parseKubeFaultSpec, type KubeFaultRule, type KubeFaultRuleState } from './faults.js';
import { kubeconfigFor } from './kubeconfig.js';
import { kubeHandler, type KubeFaults, type ServerState } from './server.js';
import { Store } from './store.js';
import type { KubeObject } from './types.js';

export type { KubeFaults } from './server.js';
export type { KubeFaultRule, KubeFaultRuleState, KubeFaultSpec } from './faults.js';
export type { KubeObject } from './types.js';

export interface KubeEmulatorOptions {
  host?: string;
  port?: number;
  /** Persist objects here and load them at start. */
  statePath?: string;
  /** Write the kubeconfig here. */
  kubeconfigPath?: string;
  /** Events kept for watches that resume (older resourceVersions get 410 Expired). */
  historyLimit?: number;
  bookmarkIntervalMs?: number;
}

export interface KubeEmulator {
  url: string;
  /** A kubeconfig (YAML) for this server. */
  kubeconfig: string;
  kubeconfigPath?: string;
  store: Store;
  setFaults(f: KubeFaults): void;
  /** Replaces the fault rules (see KubeFaultRule); also PUT /_emulator/faults {"rules": [...]}. */
  setFaultRules(rules: KubeFaultRule[]): void;
  /** Removes every rule; requests they hold are reset. Also DELETE /_emulator/faults. */
  clearFaultRules(): void;
  /** The rules with how often each acted. Also GET /_emulator/faults. */
  faultRules(): KubeFaultRuleState[];
  /** Ends every open watch cleanly (clients resume from their last resourceVersion). */
  closeWatches(): void;
  /** Answers the next `n` watches with 410 Expired (clients must relist). */
  expireNextWatches(n: number): void;
  /** Forgets the event history: any watch resuming from an older resourceVersion gets 410. */
  compact(): void;
  /** Refuses connections for a while (the listener is closed, then reopened on the same port). */
  refuseConnections(ms: number): Promise<void>;
  requests(): Record<string, number>;
  openWatches(): number;
  close(): Promise<void>;
}

const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

function seed(store: Store): void {
  const ns = store.types.get('namespaces')!;
  for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
    const o: KubeObject = {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name, uid: crypto.randomUUID(), creationTimestamp: now(), labels: { 'kubernetes.io/metadata.name': name }, resourceVersion: store.nextRv() },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    };
    store.put(ns, o);
  }
}

export async function startKubeEmulator(opts: KubeEmulatorOptions = {}): Promise<KubeEmulator> {
  const store = new Store(opts.historyLimit ?? 10_000, opts.statePath);
  if (!store.load()) seed(store);
  const faultRules = new KubeFaultRules();
  const state: ServerState = { store, faults: {}, faultRules, expireWatches: 0, watches: new Set(), requests: {}, bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000 };
  const handler = kubeHandler(state);
  const sockets = new Set<Socket>();
  // Set below, once the listener exists.
  let refuseConnections: (ms: number) => Promise<void> = async () => {};
  const admin = adminHandler(faultRules, (ms) => refuseConnections(ms));
  const server: Server = createServer((req, res) => void (req.url?.startsWith(ADMIN) ? admin(req, res) : handler(req, res)));
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.keepAliveTimeout = 30_000;
  const listen = (port: number, host: string) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  const host = opts.host ?? '127.0.0.1';
  await listen(opts.port ?? 0, host);
  const { port } = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const kubeconfig = kubeconfigFor(url);
  if (opts.kubeconfigPath) writeFileSync(opts.kubeconfigPath, kubeconfig, { mode: 0o600 });

  const closeWatches = () => {
    for (const w of [...state.watches]) w.close();
  };
  refuseConnections = async (ms) => {
    closeWatches();
    await new Promise<void>((r) => {
      server.close(() => r());
      for (const s of sockets) s.destroy();
    });
    setTimeout(() => void listen(port, host), ms).unref();
  };
  return {
    url,
    kubeconfig,
    kubeconfigPath: opts.kubeconfigPath,
    store,
    setFaults: (f) => {
      state.faults = f;
    },
    closeWatches,
    expireNextWatches: (n) => {
      state.expireWatches = n;
    },
    compact: () => store.compact(),
    setFaultRules: (rules) => faultRules.set(rules),
    clearFaultRules: () => faultRules.clear(),
    faultRules: () => faultRules.list(),
    refuseConnections: (ms) => refuseConnections(ms),
    requests: () => ({ ...state.requests }),
    openWatches: () => state.watches.size,
    close: async () => {
      faultRules.clear();
      closeWatches();
      store.save();
      await new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      });
    },
  };
}

const ADMIN = '/_emulator/';

/** GET, PUT and DELETE /_emulator/faults: the fault rules over HTTP, for `eni-ipam emulate kube` users. */
function adminHandler(rules: KubeFaultRules, refuse: (ms: number) => Promise<void>) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const json = (status: number, body: unknown) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    const route = `${req.method} ${new URL(req.url ?? '/', 'http://kube').pathname.slice(ADMIN.length)}`;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (route === 'GET faults') return json(200, { rules: rules.list() });
    if (route === 'DELETE faults') return json(200, (rules.clear(), { rules: [] }));
    if (route === 'PUT faults') {
      let spec;
      try {
        spec = parseKubeFaultSpec(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'));
      } catch (e) {
        return json(400, { error: e instanceof SyntaxError ? `the body is not JSON: ${e.message}` : (e as Error).message });
      }
      rules.set(spec.rules ?? []);
      json(200, { rules: rules.list(), unreachableMs: spec.unreachableMs });
      // Answer first: the listener goes away with the connection this answer travels on.
      if (spec.unreachableMs) res.on('finish', () => setTimeout(() => void refuse(spec.unreachableMs!), 20));
      return;
    }
    json(404, { error: `no admin route ${route}; try GET, PUT or DELETE faults` });
  };
}
