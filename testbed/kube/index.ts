import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { AuditLog, type AuditEntry, type AuditFilter } from './core/audit.js';
import { KubeFaultRules, type KubeFaultRule, type KubeFaultRuleState } from './core/faults.js';
import { kubeconfigFor } from './auth/kubeconfig.js';
import { ADMIN, admin } from '../control-plane/front.js';
import { makeClusterPki, type ClusterPki } from './auth/pki.js';
import { bootstrapPolicy } from './auth/rbac.js';
import { upgradeHandler } from './pods/pod-exec.js';
import { keysPathFor, loadKeys, saveKeys } from './auth/saved-keys.js';
import { kubeHandler, type KubeFaults, type ServerState } from './server.js';
import { Store } from './core/store.js';
import { ServiceAccountTokens, type IssuedToken, type TokenRequestInput } from './auth/tokens.js';
import type { KubeObject } from './core/types.js';

export type { KubeFaults } from './server.js';
export type { AuditEntry, AuditFilter } from './core/audit.js';
export type { KubeFaultRule, KubeFaultRuleState, KubeFaultSpec } from './core/faults.js';
export type { KubeObject } from './core/types.js';
export type { ExecRequest, ExecSession, ExecStreams, TerminalSize } from './pods/pod-exec.js';
export type { IssuedToken, TokenRequestInput } from './auth/tokens.js';
export { TOKEN_ISSUER } from './auth/tokens.js';

export interface KubeEmulatorOptions {
  host?: string;
  port?: number;
  /** Persist objects here and load them at start; the CA and signing key go beside it (STATE.keys.json). */
  statePath?: string;
  /** Write the kubeconfig here. */
  kubeconfigPath?: string;
  /** Events kept for watches that resume (older resourceVersions get 410 Expired). */
  historyLimit?: number;
  bookmarkIntervalMs?: number;
  /**
   * Serve HTTPS with a CA made at start (kubeconfig gets certificate-authority-data; with
   * kubeconfigPath, the CA is also written beside it as ca.crt). `sans`: addresses or DNS names the
   * serving certificate covers besides 127.0.0.1, ::1, localhost and kubernetes.default.svc[...].
   */
  tls?: boolean | { sans?: string[] };
  /**
   * Authenticate requests (admin kubeconfig credentials, service-account tokens; anyone else is
   * system:anonymous) and authorize them with RBAC. Needs tls. Off by default: every request is the admin.
   */
  auth?: boolean;
}

export interface KubeEmulator {
  url: string;
  /** A kubeconfig (YAML) for this server. */
  kubeconfig: string;
  kubeconfigPath?: string;
  store: Store;
  /** PEM of the cluster CA (with tls): what pods mount as ca.crt. */
  caCert?: string;
  /** Where ca.crt was written (with tls and kubeconfigPath). */
  caPath?: string;
  /** The admin's bearer token (cluster-admin through system:masters). */
  adminToken: string;
  /**
   * Mints a service-account token as the TokenRequest API does (for a projected volume: bind it to
   * the pod with `boundObject: { kind: 'Pod', name, uid }`). Throws when the service account or
   * the bound object does not exist.
   */
  issueServiceAccountToken(input: TokenRequestInput): IssuedToken;
  /** The user a service-account token of this cluster names (checked as the API server does), or undefined. */
  verifyServiceAccountToken(token: string, audiences: string[]): string | undefined;
  /** The service-account issuer's public keys (what `/openid/v1/jwks` serves), to verify its tokens elsewhere. */
  serviceAccountJwks(): { keys: Array<Record<string, string>> };
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
  /**
   * The resource requests answered so far, newest last, with the user, the RBAC attributes and the
   * answer's code (as kube-apiserver's audit log at level Metadata). Also GET /_emulator/audit?user=U&since=MS.
   */
  audit(filter?: AuditFilter): AuditEntry[];
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
      metadata: {
        name,
        uid: crypto.randomUUID(),
        creationTimestamp: now(),
        labels: { 'kubernetes.io/metadata.name': name },
        resourceVersion: store.nextRv(),
      },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    };
    store.put(ns, o);
  }
}

/** Adds the bootstrap RBAC objects a real API server keeps (idempotent, so a loaded state keeps its edits). */
function seedPolicy(store: Store): void {
  for (const o of bootstrapPolicy()) {
    const t = store.types.get(
      `${o.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings'}.rbac.authorization.k8s.io`,
    )!;
    if (store.get(t, undefined, o.metadata.name!)) continue;
    Object.assign(o.metadata, { uid: crypto.randomUUID(), creationTimestamp: now(), resourceVersion: store.nextRv() });
    store.put(t, o);
  }
}

/**
 * Mints a service-account token from an emulator, e.g. for a pod's projected
 * `serviceAccountToken` volume: `issueServiceAccountToken(emu, { namespace, serviceAccount,
 * audiences, expirationSeconds, boundObject: { kind: 'Pod', name, uid } })`.
 */
export const issueServiceAccountToken = (emu: KubeEmulator, input: TokenRequestInput): IssuedToken =>
  emu.issueServiceAccountToken(input);

export async function startKubeEmulator(opts: KubeEmulatorOptions = {}): Promise<KubeEmulator> {
  // kubectl and client-go send bearer tokens and client certificates only over HTTPS.
  if (opts.auth && !opts.tls)
    throw new Error('the Kubernetes emulator needs tls for auth: clients send credentials only over HTTPS');
  const store = new Store(opts.historyLimit ?? 10_000, opts.statePath);
  if (!store.load()) seed(store);
  if (opts.auth) seedPolicy(store);
  const keysPath = opts.statePath ? keysPathFor(opts.statePath) : undefined;
  const saved = keysPath ? loadKeys(keysPath) : {};
  const tokens = new ServiceAccountTokens(store, Date.now, saved.serviceAccountKey);
  const adminToken = opts.auth ? randomBytes(24).toString('base64url') : 'emulator-admin-token';
  const faultRules = new KubeFaultRules();
  const state: ServerState = {
    store,
    faults: {},
    faultRules,
    expireWatches: 0,
    watches: new Set(),
    requests: {},
    bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 60_000,
    tokens,
    auth: opts.auth ? { adminToken, tokens } : undefined,
    audit: new AuditLog(),
  };
  const handler = kubeHandler(state);
  const sockets = new Set<Socket>();
  // Set below, once the listener exists.
  let refuseConnections: (ms: number) => Promise<void> = async () => {};
  const adminRoutes = adminHandler(faultRules, state.audit, (ms) => refuseConnections(ms));
  const serve = (req: IncomingMessage, res: ServerResponse) =>
    void (req.url?.startsWith(ADMIN) ? adminRoutes(req, res) : handler(req, res));
  const pki: ClusterPki | undefined = opts.tls
    ? await makeClusterPki(typeof opts.tls === 'object' ? opts.tls.sans : [], saved.ca)
    : undefined;
  if (keysPath)
    saveKeys(keysPath, {
      ca: pki ? { cert: pki.caCert, key: pki.caKey } : saved.ca,
      serviceAccountKey: tokens.privateKeyPem(),
    });
  const server: Server = pki
    ? // Client certificates are asked for, not required: the API server also takes tokens and anonymous requests.
      createHttpsServer(
        { cert: pki.serverCert, key: pki.serverKey, ca: pki.caCert, requestCert: true, rejectUnauthorized: false },
        serve,
      )
    : createServer(serve);
  // pods/exec: WebSocket connections (kubectl exec).
  server.on('upgrade', upgradeHandler(state));
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
  const url = `${pki ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  // Clients reach an any-address listener on loopback, which the serving certificate covers.
  const clientHost = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  const clientUrl = `${pki ? 'https' : 'http'}://${clientHost.includes(':') ? `[${clientHost}]` : clientHost}:${port}`;
  const kubeconfig = kubeconfigFor(
    clientUrl,
    'default',
    pki ? { caCert: pki.caCert, clientCert: pki.adminCert, clientKey: pki.adminKey } : { token: adminToken },
  );
  if (opts.kubeconfigPath) writeFileSync(opts.kubeconfigPath, kubeconfig, { mode: 0o600 });
  const caPath = pki && opts.kubeconfigPath ? join(dirname(opts.kubeconfigPath), 'ca.crt') : undefined;
  if (caPath) writeFileSync(caPath, pki!.caCert);

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
    caCert: pki?.caCert,
    caPath,
    adminToken,
    issueServiceAccountToken: (input) => tokens.issue(input),
    verifyServiceAccountToken: (token, audiences) => tokens.verify(token, audiences)?.name,
    serviceAccountJwks: () => tokens.jwks(),
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
    audit: (f) => state.audit.list(f),
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

/** GET, PUT and DELETE /_emulator/faults and GET /_emulator/audit, as the control plane's front serves them. */
function adminHandler(rules: KubeFaultRules, audit: AuditLog, refuse: (ms: number) => Promise<void>) {
  return (req: IncomingMessage, res: ServerResponse) => admin(req, res, rules, { audit: (f) => audit.list(f), refuse });
}
