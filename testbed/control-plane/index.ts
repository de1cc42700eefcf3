import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kubeconfigFor } from '../kube/auth/kubeconfig.js';
import { readAudit, AUDIT_POLICY, type AuditEntry, type AuditFilter } from './audit.js';
import { startFront, type Front } from './front.js';
import { httpsJson, type RestAnswer } from './https-json.js';
import { serviceAccountTokenVerifier } from './service-account-tokens.js';
import { controlPlanePki, FRONT_PROXY_CLIENT, nodeClientCert, pkiPath, type ControlPlanePki } from './pki-files.js';
import { ensureUpstream, freePort, runUpstream, untilReady, type RunningProgram } from './upstream.js';

export type { AuditEntry, AuditFilter } from './audit.js';
export type { RestAnswer } from './https-json.js';
export type { KubeFaultRule, KubeFaultRuleState } from '../kube/core/faults.js';

/**
 * A real Kubernetes control plane on this machine: etcd and kube-apiserver from upstream
 * releases (built by `npm run tools`), and on demand kube-controller-manager and
 * kube-scheduler, with TLS everywhere, certificate and service-account authentication, the Node
 * authorizer and RBAC, and admission as a cluster has it (NodeRestriction among the defaults).
 * Clients reach it through a front (front.ts) that injects faults on request.
 */
export interface ControlPlaneOptions {
  /** Where etcd's data, the PKI, kubeconfigs and logs go; reused when it holds an earlier run's. Default: a fresh temporary folder, removed on close. */
  workDir?: string;
  /** The front's address (default 127.0.0.1, a free port). */
  host?: string;
  port?: number;
  /**
   * Run kube-controller-manager: `true` for all its controllers (workloads, garbage collection,
   * namespaces, ServiceAccounts and their tokens, EndpointSlices, nodes), or the names of some
   * (as its --controllers flag takes them). With `serviceaccount`, start waits for the `default`
   * namespace's ServiceAccount, without which no pod is admitted.
   */
  controllers?: boolean | string[];
  /** Run kube-scheduler. */
  scheduler?: boolean;
  /** Addresses and names the serving certificate covers besides loopback and the in-cluster names. */
  sans?: string[];
  /** The address kube-apiserver publishes for the `kubernetes` Service (default 127.0.0.1). */
  advertiseAddress?: string;
  serviceCidr?: string;
  /** The pod network kube-controller-manager allocates node CIDRs from (with controllers). */
  clusterCidr?: string;
}

/** The faults tests inject, and the requests seen: the front's (front.ts). */
type FrontControls = Pick<
  Front,
  | 'setFaultRules'
  | 'clearFaultRules'
  | 'faultRules'
  | 'closeWatches'
  | 'expireNextWatches'
  | 'refuseConnections'
  | 'openWatches'
  | 'requests'
>;

export interface ControlPlane extends FrontControls {
  /** The front's URL: what every client uses. */
  url: string;
  /** kube-apiserver's own URL (no faults). */
  apiserverUrl: string;
  /** The admin kubeconfig (`kubernetes-admin` in `system:masters`), YAML. */
  kubeconfig: string;
  kubeconfigPath: string;
  caCert: string;
  caPath: string;
  workDir: string;
  pki: ControlPlanePki;
  /** A kubelet's kubeconfig (`system:node:<name>`), for the Node authorizer and NodeRestriction. */
  nodeKubeconfig(node: string): Promise<string>;
  /** The subject of a service-account token this control plane issued for one of `audiences`, or undefined. */
  verifyServiceAccountToken(token: string, audiences: string[]): string | undefined;
  /** The API server's audit log (level Metadata), oldest first. */
  audit(filter?: AuditFilter): AuditEntry[];
  /** Creates CRDs and waits until the API server serves each (Established). */
  createCrds(crds: object[]): Promise<void>;
  /** Admin requests through the front: `{status, body}` (JSON parsed when it is). */
  rest(method: string, path: string, body?: unknown, contentType?: string): Promise<RestAnswer>;
  close(): Promise<void>;
}

const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

function apiserverArgs(o: {
  pki: ControlPlanePki;
  etcd: string;
  port: number;
  advertise: string;
  serviceCidr: string;
  auditPolicy: string;
  auditLog: string;
}): string[] {
  const p = (w: Parameters<typeof pkiPath>[1], e: 'crt' | 'key') => pkiPath(o.pki, w, e);
  return [
    `--etcd-servers=${o.etcd}`,
    // Loopback alone, unless the `kubernetes` Service's endpoint is to reach it from elsewhere.
    `--bind-address=${o.advertise.startsWith('127.') ? '127.0.0.1' : '0.0.0.0'}`,
    `--secure-port=${o.port}`,
    `--advertise-address=${o.advertise}`,
    `--tls-cert-file=${p('apiserver', 'crt')}`,
    `--tls-private-key-file=${p('apiserver', 'key')}`,
    `--client-ca-file=${p('ca', 'crt')}`,
    `--kubelet-client-certificate=${p('apiserverKubeletClient', 'crt')}`,
    `--kubelet-client-key=${p('apiserverKubeletClient', 'key')}`,
    `--kubelet-certificate-authority=${p('ca', 'crt')}`,
    // The local cluster's kubelets serve on this machine, each on its own port, named by an
    // InternalDNS address (localhost); a cloud node's InternalIP is its ECS instance's.
    '--kubelet-preferred-address-types=InternalDNS,InternalIP,Hostname,ExternalDNS,ExternalIP',
    // exec reaches the kubelet as the client's WebSocket (channel.k8s.io), which the local
    // kubelets speak, rather than translated to SPDY.
    '--feature-gates=TranslateStreamCloseWebsocketRequests=false',
    `--requestheader-client-ca-file=${p('frontProxyCa', 'crt')}`,
    `--requestheader-allowed-names=${FRONT_PROXY_CLIENT}`,
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--proxy-client-cert-file=${p('frontProxyClient', 'crt')}`,
    `--proxy-client-key-file=${p('frontProxyClient', 'key')}`,
    `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
    `--service-account-key-file=${join(o.pki.dir, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(o.pki.dir, 'sa.key')}`,
    `--service-cluster-ip-range=${o.serviceCidr}`,
    // The `kubernetes` Service's endpoint cannot be a loopback address: with one, nothing keeps it.
    ...(o.advertise.startsWith('127.') ? ['--endpoint-reconciler-type=none'] : []),
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--allow-privileged=true',
    `--audit-policy-file=${o.auditPolicy}`,
    `--audit-log-path=${o.auditLog}`,
    '--audit-log-format=json',
    '--audit-log-mode=blocking',
    '--profiling=false',
    '--v=1',
  ];
}

/** Starts etcd and kube-apiserver (and the controllers and scheduler when asked), then the front. */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  ensureUpstream([
    'etcd',
    'kube-apiserver',
    ...(opts.controllers ? (['kube-controller-manager'] as const) : []),
    ...(opts.scheduler ? (['kube-scheduler'] as const) : []),
  ]);
  const ownDir = !opts.workDir;
  const workDir = opts.workDir ?? mkdtempSync(join(tmpdir(), 'eni-ipam-kube-'));
  const logDir = join(workDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const running: RunningProgram[] = [];
  let front: Front | undefined;
  const stopAll = async () => {
    await front?.close();
    for (const p of [...running].reverse()) await p.stop();
  };
  try {
    const serviceCidr = opts.serviceCidr ?? '10.96.0.0/16';
    // In-cluster clients reach it at the `kubernetes` Service's address, the range's first.
    const pki = await controlPlanePki(workDir, [...(opts.sans ?? []), firstAddress(serviceCidr)]);
    const caPath = pkiPath(pki, 'ca', 'crt');
    const admin = new Agent({ ca: pki.ca.cert, cert: pki.admin.cert, key: pki.admin.key, keepAlive: true });

    const etcdPort = await freePort();
    const etcdPeer = await freePort();
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const etcd = runUpstream(
      'etcd',
      [
        `--data-dir=${join(workDir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
      { logDir },
    );
    running.push(etcd);
    await untilReady(etcd, async () => (await fetch(`${etcdUrl}/health`)).ok);

    const port = await freePort();
    const auditPolicy = join(workDir, 'audit-policy.yaml');
    const auditLog = join(logDir, 'audit.log');
    writeFileSync(auditPolicy, AUDIT_POLICY);
    const apiserver = runUpstream(
      'kube-apiserver',
      apiserverArgs({
        pki,
        etcd: etcdUrl,
        port,
        advertise: opts.advertiseAddress ?? '127.0.0.1',
        serviceCidr,
        auditPolicy,
        auditLog,
      }),
      { logDir },
    );
    running.push(apiserver);
    const apiserverUrl = `https://127.0.0.1:${port}`;
    let base = apiserverUrl; // the front's, once it listens
    const rest: ControlPlane['rest'] = (method, path, body, contentType) =>
      httpsJson(`${base}${path}`, { method, agent: admin }, body, contentType);
    await untilReady(apiserver, async () => (await rest('GET', '/readyz')).status === 200);

    const kubeconfigFile = (name: string, url: string, user: { cert: string; key: string }) => {
      const path = join(workDir, `${name}.kubeconfig`);
      writeFileSync(
        path,
        kubeconfigFor(url, 'default', { caCert: pki.ca.cert, clientCert: user.cert, clientKey: user.key }),
        { mode: 0o600 },
      );
      return path;
    };
    if (opts.controllers) {
      const kc = kubeconfigFile('controller-manager', apiserverUrl, pki.controllerManager);
      const cm = runUpstream(
        'kube-controller-manager',
        [
          ...(await componentArgs(kc)),
          '--use-service-account-credentials=true',
          `--service-account-private-key-file=${join(pki.dir, 'sa.key')}`,
          `--root-ca-file=${caPath}`,
          `--cluster-signing-cert-file=${caPath}`,
          `--cluster-signing-key-file=${pkiPath(pki, 'ca', 'key')}`,
          `--service-cluster-ip-range=${serviceCidr}`,
          ...(opts.clusterCidr ? ['--allocate-node-cidrs=true', `--cluster-cidr=${opts.clusterCidr}`] : []),
          `--controllers=${opts.controllers === true ? '*,bootstrapsigner,tokencleaner' : opts.controllers.join(',')}`,
        ],
        { logDir },
      );
      running.push(cm);
      if (opts.controllers === true || opts.controllers.includes('serviceaccount'))
        await untilReady(
          cm,
          async () => (await rest('GET', '/api/v1/namespaces/default/serviceaccounts/default')).status === 200,
        );
    }
    if (opts.scheduler) {
      const kc = kubeconfigFile('scheduler', apiserverUrl, pki.scheduler);
      running.push(runUpstream('kube-scheduler', await componentArgs(kc), { logDir }));
    }

    front = await startFront({
      host: opts.host ?? '127.0.0.1',
      port: opts.port ?? 0,
      upstream: { host: '127.0.0.1', port },
      ca: pki.ca.cert,
      serving: pki.apiserver,
      frontProxyClient: pki.frontProxyClient,
      audit: (filter) => readAudit(auditLog, filter),
    });
    const f = front;
    base = f.url;
    const kubeconfigPath = kubeconfigFile('admin', f.url, pki.admin);
    return {
      url: f.url,
      apiserverUrl,
      kubeconfig: readFileSync(kubeconfigPath, 'utf8'),
      kubeconfigPath,
      caCert: pki.ca.cert,
      caPath,
      workDir,
      pki,
      async nodeKubeconfig(node) {
        const cert = await nodeClientCert(pki, node);
        return kubeconfigFor(f.url, 'default', { caCert: pki.ca.cert, clientCert: cert.cert, clientKey: cert.key });
      },
      verifyServiceAccountToken: serviceAccountTokenVerifier(pki.serviceAccount.publicKey, SERVICE_ACCOUNT_ISSUER),
      audit: (filter) => readAudit(auditLog, filter),
      setFaultRules: f.setFaultRules,
      clearFaultRules: f.clearFaultRules,
      faultRules: f.faultRules,
      closeWatches: f.closeWatches,
      expireNextWatches: f.expireNextWatches,
      refuseConnections: f.refuseConnections,
      openWatches: f.openWatches,
      requests: f.requests,
      rest,
      createCrds: (crds) => createCrds(rest, crds),
      async close() {
        await stopAll();
        admin.destroy();
        if (ownDir) rmSync(workDir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await stopAll();
    if (ownDir) rmSync(workDir, { recursive: true, force: true });
    throw e;
  }
}

type Rest = ControlPlane['rest'];

/**
 * What kube-controller-manager and kube-scheduler share: one kubeconfig for the API and for
 * checking who calls their own port (loopback, a free one), one instance each (no election).
 */
async function componentArgs(kubeconfig: string): Promise<string[]> {
  return [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${await freePort()}`,
    '--leader-elect=false',
    '--profiling=false',
    '--v=1',
  ];
}

/** The first address of an IPv4 range (10.96.0.0/16: 10.96.0.1). */
function firstAddress(cidr: string): string {
  const [base] = cidr.split('/');
  const n = base!.split('.').reduce((a, o) => a * 256 + Number(o), 0) + 1;
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
}

async function createCrds(rest: Rest, crds: object[]): Promise<void> {
  const path = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
  const names: string[] = [];
  for (const crd of crds) {
    const r = await rest('POST', path, crd);
    if (r.status !== 201) throw new Error(`CRD not accepted (${r.status}): ${JSON.stringify(r.body)}`);
    names.push(r.body.metadata.name);
  }
  const deadline = Date.now() + 60_000;
  for (const name of names) {
    for (;;) {
      const r = await rest('GET', `${path}/${name}`);
      const established = r.body?.status?.conditions?.some(
        (c: { type: string; status: string }) => c.type === 'Established' && c.status === 'True',
      );
      if (established) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} was not Established within 60 s`);
      await new Promise((res) => setTimeout(res, 50));
    }
  }
}
