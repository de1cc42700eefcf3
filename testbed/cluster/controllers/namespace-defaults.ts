import type { Objects } from '../objects.js';

/**
 * What every namespace of a cluster has: the `default` ServiceAccount (the service-account
 * controller) and the `kube-root-ca.crt` ConfigMap with the cluster CA (the root-CA publisher).
 */
export function reconcileNamespaceDefaults(objects: Objects, caCert: string | undefined): void {
  for (const ns of objects.list('namespaces')) {
    if (ns.metadata.deletionTimestamp || ns.status?.phase === 'Terminating') continue;
    const name = ns.metadata.name!;
    if (!objects.get('serviceaccounts', name, 'default'))
      objects.create('serviceaccounts', {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: 'default', namespace: name },
      });
    if (caCert && !objects.get('configmaps', name, 'kube-root-ca.crt')) {
      objects.create('configmaps', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: 'kube-root-ca.crt',
          namespace: name,
          annotations: {
            'kubernetes.io/description':
              'Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints ' +
              'such as the internal service IP or kubernetes.default.svc. ' +
              'No other usage is guaranteed across distributions of Kubernetes clusters.',
          },
        },
        data: { 'ca.crt': caCert },
      });
    }
  }
}
