/* eslint-disable @typescript-eslint/no-explicit-any -- the conflist is JSON */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EmulatedCluster } from '../../testbed/cluster/index.js';
import { cniVars } from './cni-call.js';

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

/**
 * A CNI ADD or DEL on an emulated node through the eni-ipam-cni plugin the chart's init container
 * installed there, with the IPAM part of the conflist it wrote, as a container runtime calls it.
 */
export async function nodeCni(
  cluster: EmulatedCluster,
  node: number,
  command: 'ADD' | 'DEL',
  containerId: string,
  pod = containerId,
) {
  const kubelet = cluster.kubelets[node]!;
  const root = join(cluster.kubeconfigPath, '..', 'nodes', kubelet.node, 'root');
  const conflist = JSON.parse(readFileSync(join(root, 'etc/cni/net.d/10-eni-ipam.conflist'), 'utf8'));
  const ipam = conflist.plugins.find((p: any) => p.ipam?.type === 'eni-ipam-cni');
  return kubelet.exec(['/opt/cni/bin/eni-ipam-cni'], {
    stdin: JSON.stringify({ cniVersion: conflist.cniVersion, name: conflist.name, ...ipam }),
    env: cniVars(command, containerId, pod),
  });
}
