import { chmodSync, copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readConflist, replaceAtomically, writeConflist } from './conflist.js';

export interface InstallCniOptions {
  /** The host's CNI plugin folder (mounted), e.g. /host/opt/cni/bin. */
  binDir: string;
  /** The host's CNI configuration folder (mounted), e.g. /host/etc/cni/net.d. */
  confDir: string;
  /** The conflist to install (its file name is kept). */
  conflist: string;
  /** The plugin to copy (default: the static binary `npm run build` writes, dist/bin/eni-ipam-cni). */
  pluginBinary?: string;
}

/** The static plugin binary scripts/build-cni.sh writes to dist/bin (bin/eni-ipam-cni links to it). */
export const PLUGIN_BINARY = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'eni-ipam-cni');

// What versions before the static binary installed: a Node.js runtime and the plugin's code.
const OLD_RUNTIME_DIRS = ['eni-ipam.d', 'eni-ipam.d.new', 'eni-ipam.d.old'];

/**
 * Installs eni-ipam-cni on a node: one static executable (libc only, linked in) that carries
 * each CNI call to the node's agent, so the host needs nothing else. Then the conflist.
 */
export function installCni(o: InstallCniOptions): string[] {
  const { conflist } = readConflist(o.conflist);
  const source = o.pluginBinary ?? PLUGIN_BINARY;
  if (!existsSync(source))
    throw new Error(
      `the plugin binary ${source} is missing; build it with \`npm run build\` (it needs gcc and libc6-dev)`,
    );

  mkdirSync(o.binDir, { recursive: true });
  const plugin = join(o.binDir, 'eni-ipam-cni');
  replaceAtomically(plugin, (tmp) => {
    copyFileSync(source, tmp);
    chmodSync(tmp, 0o755);
  });
  for (const d of OLD_RUNTIME_DIRS) rmSync(join(o.binDir, d), { recursive: true, force: true });

  const conf = writeConflist(o.confDir, basename(o.conflist), conflist);
  return [plugin, conf];
}
