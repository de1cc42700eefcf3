import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EmulatedCluster } from '../../src/sim/cluster/index.js';

/** An emulated node's root on the machine (its hostPath volumes, CNI folders...). */
export const nodeRoot = (cluster: EmulatedCluster, node: string): string =>
  join(cluster.kubeconfigPath, '..', 'nodes', node, 'root');

/**
 * Installs a conflist on a node as an admin (or a CNI's DaemonSet) does, in its CNI conf folder:
 * ptp with host-local addresses of `range` (say the node's podCIDR), then the plugins `then`.
 */
export function installHostLocalConflist(
  cluster: EmulatedCluster,
  node: string,
  name: string,
  range: Record<string, string>,
  then: unknown[] = [],
): void {
  const conflist = {
    cniVersion: '1.0.0',
    name,
    plugins: [
      { type: 'ptp', ipam: { type: 'host-local', ranges: [[range]], routes: [{ dst: '0.0.0.0/0' }] } },
      ...then,
    ],
  };
  writeFileSync(join(nodeRoot(cluster, node), 'etc/cni/net.d/10-test.conflist'), JSON.stringify(conflist));
}
