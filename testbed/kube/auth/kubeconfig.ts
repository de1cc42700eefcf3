import YAML from 'yaml';

export interface KubeconfigCredentials {
  /** PEM of the CA that signed the server's certificate (HTTPS only). */
  caCert?: string;
  token?: string;
  clientCert?: string;
  clientKey?: string;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

/**
 * A kubeconfig that kubectl, Helm and client-node use unchanged: over HTTPS it carries the CA
 * (certificate-authority-data) and the admin's client certificate, as kubeadm's admin.conf does;
 * over plain HTTP client-node needs insecure-skip-tls-verify.
 */
export function kubeconfigFor(url: string, namespace = 'default', creds: KubeconfigCredentials = {}): string {
  const cluster = creds.caCert
    ? { server: url, 'certificate-authority-data': b64(creds.caCert) }
    : { server: url, 'insecure-skip-tls-verify': true };
  const user =
    creds.clientCert && creds.clientKey
      ? { 'client-certificate-data': b64(creds.clientCert), 'client-key-data': b64(creds.clientKey) }
      : { token: creds.token ?? 'emulator-admin-token' };
  return YAML.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'eni-ipam-emulator', cluster }],
    users: [{ name: 'emulator-admin', user }],
    contexts: [
      { name: 'eni-ipam-emulator', context: { cluster: 'eni-ipam-emulator', user: 'emulator-admin', namespace } },
    ],
    'current-context': 'eni-ipam-emulator',
    preferences: {},
  });
}
