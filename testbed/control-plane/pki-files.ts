import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_SERVER_NAMES, issue, newCa, newKeyPair, type CertKey } from './pki.js';

/**
 * The control plane's PKI in `<workDir>/pki`, laid out as kubeadm lays out /etc/kubernetes/pki:
 * made on the first start, read again on the next (so a restarted cluster keeps its CA, and
 * every token and kubeconfig it issued stays valid).
 */
export interface ControlPlanePki {
  dir: string;
  ca: CertKey;
  /** kube-apiserver's serving certificate. */
  apiserver: CertKey;
  /** `kubernetes-admin` in `system:masters`: the admin kubeconfig's. */
  admin: CertKey;
  /** kube-apiserver's client certificate toward kubelets (exec, logs). */
  apiserverKubeletClient: CertKey;
  controllerManager: CertKey;
  scheduler: CertKey;
  /** kube-proxy's client certificate (`system:kube-proxy`, bound to `system:node-proxier`). */
  kubeProxy: CertKey;
  /** The CA kube-apiserver trusts for X-Remote-User headers, and the front's certificate under it. */
  frontProxyCa: CertKey;
  frontProxyClient: CertKey;
  /** The service-account token signing key pair (PEM). */
  serviceAccount: { privateKey: string; publicKey: string };
}

const FILES = {
  ca: 'ca',
  apiserver: 'apiserver',
  admin: 'admin',
  apiserverKubeletClient: 'apiserver-kubelet-client',
  controllerManager: 'controller-manager',
  scheduler: 'scheduler',
  kubeProxy: 'kube-proxy',
  frontProxyCa: 'front-proxy-ca',
  frontProxyClient: 'front-proxy-client',
} as const;

export const FRONT_PROXY_CLIENT = 'front-proxy-client';

/** A path of the PKI: `<dir>/<file>.crt` or `.key`. */
export const pkiPath = (pki: ControlPlanePki, which: keyof typeof FILES, ext: 'crt' | 'key') =>
  join(pki.dir, `${FILES[which]}.${ext}`);

async function make(sans: string[]): Promise<Omit<ControlPlanePki, 'dir'>> {
  const ca = await newCa('eni-ipam-local-ca');
  const frontProxyCa = await newCa('eni-ipam-front-proxy-ca');
  const client = (subject: string) => issue(ca, { subject, usage: 'client' });
  return {
    ca,
    apiserver: await issue(ca, {
      subject: 'CN=kube-apiserver',
      usage: 'server',
      sans: ['127.0.0.1', '::1', ...API_SERVER_NAMES, ...sans],
    }),
    admin: await client('CN=kubernetes-admin, O=system:masters'),
    apiserverKubeletClient: await client('CN=kube-apiserver-kubelet-client, O=system:masters'),
    controllerManager: await client('CN=system:kube-controller-manager'),
    scheduler: await client('CN=system:kube-scheduler'),
    kubeProxy: await client('CN=system:kube-proxy'),
    frontProxyCa,
    frontProxyClient: await issue(frontProxyCa, { subject: `CN=${FRONT_PROXY_CLIENT}`, usage: 'client' }),
    serviceAccount: await newKeyPair(),
  };
}

/** The PKI in `<workDir>/pki`, made there if it is not (with `sans` on the serving certificate). */
export async function controlPlanePki(workDir: string, sans: string[]): Promise<ControlPlanePki> {
  const dir = join(workDir, 'pki');
  const saKey = join(dir, 'sa.key');
  if (existsSync(saKey)) {
    const read = (f: string) => readFileSync(join(dir, f), 'utf8');
    const pair = (f: string): CertKey => ({ cert: read(`${f}.crt`), key: read(`${f}.key`) });
    const loaded = Object.fromEntries(Object.entries(FILES).map(([k, f]) => [k, pair(f)]));
    return {
      dir,
      ...(loaded as Record<keyof typeof FILES, CertKey>),
      serviceAccount: { privateKey: read('sa.key'), publicKey: read('sa.pub') },
    };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pki = { dir, ...(await make(sans)) };
  for (const [k, f] of Object.entries(FILES)) {
    const ck = pki[k as keyof typeof FILES];
    writeFileSync(join(dir, `${f}.crt`), ck.cert);
    writeFileSync(join(dir, `${f}.key`), ck.key, { mode: 0o600 });
  }
  writeFileSync(join(dir, 'sa.pub'), pki.serviceAccount.publicKey);
  // Written last: its presence says the folder is whole.
  writeFileSync(saKey, pki.serviceAccount.privateKey, { mode: 0o600 });
  return pki;
}

/** A kubelet's client certificate, as the Node authorizer expects it: `system:node:<name>` in `system:nodes`. */
export const nodeClientCert = (pki: ControlPlanePki, node: string) =>
  issue(pki.ca, { subject: `CN=system:node:${node}, O=system:nodes`, usage: 'client' });
