import { API_SERVER_NAMES, issue, newCa, type CertKey } from '../../control-plane/pki.js';

/**
 * The emulated cluster's PKI, made at start as kubeadm does: a CA, the API server's serving
 * certificate (for 127.0.0.1, localhost, the in-cluster `kubernetes.default.svc` names and any
 * extra addresses) and the admin's client certificate (`kubernetes-admin` in `system:masters`).
 */
export interface ClusterPki {
  /** PEM of the CA certificate: the kubeconfig's certificate-authority-data and the pods' ca.crt. */
  caCert: string;
  /** PEM (PKCS#8) of the CA's key, kept with --state so the CA outlives a restart. */
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
}

/** The CA from an earlier run, to issue new leaf certificates under. */
export type ExistingCa = CertKey;

export async function makeClusterPki(extraSans: string[] = [], existing?: ExistingCa): Promise<ClusterPki> {
  const ca = existing ?? (await newCa('eni-ipam-emulated-ca'));
  const server = await issue(ca, {
    subject: 'CN=kube-apiserver',
    usage: 'server',
    sans: ['127.0.0.1', '::1', ...API_SERVER_NAMES, ...extraSans],
  });
  const admin = await issue(ca, { subject: 'CN=kubernetes-admin, O=system:masters', usage: 'client' });
  return {
    caCert: ca.cert,
    caKey: ca.key,
    serverCert: server.cert,
    serverKey: server.key,
    adminCert: admin.cert,
    adminKey: admin.key,
  };
}
