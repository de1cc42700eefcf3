import { constants, copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

/** Debian's containernetworking-plugins, where the node image takes its CNI plugins from. */
export const SYSTEM_CNI_DIR = '/usr/lib/cni';
/** The standard plugins a node image ships in its CNI bin folder (the chart's init container adds eni-ipam-cni). */
export const NODE_CNI_PLUGINS = ['loopback', 'ptp', 'bandwidth', 'host-local', 'portmap'];

/** Where the node keeps what the container runtime and the CNI plugins use (paths on the node). */
export const NODE_CNI_BIN_DIR = '/opt/cni/bin';
export const NODE_CNI_CONF_DIR = '/etc/cni/net.d';
/** host-local's allocations and the runtime's cache live here: they must outlast each plugin call. */
export const NODE_CNI_STATE_DIR = '/var/lib/cni';
export const NODE_CNI_DIRS = [NODE_CNI_BIN_DIR, NODE_CNI_CONF_DIR, NODE_CNI_STATE_DIR];

/** Why pods outside the host network cannot be set up on this machine, or undefined when they can. */
export function cniPluginsUnavailable(): string | undefined {
  const missing = ['loopback', 'ptp'].filter((p) => !existsSync(join(SYSTEM_CNI_DIR, p)));
  return missing.length
    ? `${missing.map((p) => `${SYSTEM_CNI_DIR}/${p}`).join(' and ')} missing (Debian package containernetworking-plugins)`
    : undefined;
}

/**
 * Lays out a fresh node's root as its machine image has it: the CNI folders, empty but for the
 * standard plugins in the bin folder (copied, so that the node's plugins are its own to replace).
 */
export function installNodeImage(root: string): void {
  for (const dir of NODE_CNI_DIRS) mkdirSync(join(root, dir), { recursive: true });
  for (const plugin of NODE_CNI_PLUGINS) {
    const from = join(SYSTEM_CNI_DIR, plugin);
    if (existsSync(from)) copyFileSync(from, join(root, NODE_CNI_BIN_DIR, plugin), constants.COPYFILE_FICLONE);
  }
}
