import YAML from 'yaml';

/** A kubeconfig that kubectl and client-node use unchanged (plain HTTP needs insecure-skip-tls-verify for client-node). */
export function kubeconfigFor(url: string, namespace = 'default'): string {
  return YAML.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'eni-ipam-emulator', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'emulator-admin', user: { token: 'emulator-admin-token' } }],
    contexts: [{ name: 'eni-ipam-emulator', context: { cluster: 'eni-ipam-emulator', user: 'emulator-admin', namespace } }],
    'current-context': 'eni-ipam-emulator',
    preferences: {},
  });
}
