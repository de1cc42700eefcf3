import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '../../control-plane/index.js';
import { runUpstream, untilReady, type RunningProgram } from '../../control-plane/upstream.js';
import { kubeconfigFor } from '../../kube/auth/kubeconfig.js';

/**
 * Upstream kube-proxy for one node, in iptables mode, in the node's network namespace: what
 * makes ClusterIP and NodePort Services work there, for the node and the pods it routes. Its
 * identity is `system:kube-proxy` (bound to `system:node-proxier` by the API server's bootstrap
 * policy). Conntrack sizing is left alone: those knobs are the machine's, not the namespace's.
 */
export async function startKubeProxy(o: {
  kube: ControlPlane;
  node: string;
  netns: string;
  /** The node's address, where its healthz (10256) answers. */
  hostIP: string;
  dir: string;
}): Promise<RunningProgram> {
  mkdirSync(o.dir, { recursive: true });
  const kubeconfig = join(o.dir, 'kube-proxy.kubeconfig');
  writeFileSync(
    kubeconfig,
    kubeconfigFor(o.kube.url, 'default', {
      caCert: o.kube.caCert,
      clientCert: o.kube.pki.kubeProxy.cert,
      clientKey: o.kube.pki.kubeProxy.key,
    }),
    { mode: 0o600 },
  );
  const config = join(o.dir, 'kube-proxy.yaml');
  writeFileSync(
    config,
    [
      'apiVersion: kubeproxy.config.k8s.io/v1alpha1',
      'kind: KubeProxyConfiguration',
      `clientConnection: {kubeconfig: ${kubeconfig}}`,
      `hostnameOverride: ${o.node}`,
      'mode: iptables',
      'conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}',
      'healthzBindAddress: 0.0.0.0:10256',
      'metricsBindAddress: 127.0.0.1:10249',
      '',
    ].join('\n'),
  );
  const proxy = runUpstream('kube-proxy', [`--config=${config}`, '--v=1'], {
    logDir: o.dir,
    netns: o.netns,
  });
  try {
    await untilReady(proxy, async () => (await fetch(`http://${o.hostIP}:10256/healthz`)).ok, 60_000);
  } catch (e) {
    await proxy.stop();
    throw e;
  }
  return proxy;
}
