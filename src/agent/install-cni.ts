import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

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

/** Writes a file under a temporary name and renames it: a reader sees the old or the new one, never half of one. */
function replaceAtomically(path: string, write: (tmp: string) => void): void {
  const tmp = `${path}.new`;
  rmSync(tmp, { force: true });
  write(tmp);
  renameSync(tmp, path);
}

/**
 * Installs eni-ipam-cni on a node: one static executable (libc only, linked in) that carries
 * each CNI call to the node's agent, so the host needs nothing else. Then the conflist.
 */
export function installCni(o: InstallCniOptions): string[] {
  let conflist: unknown;
  try {
    conflist = JSON.parse(readFileSync(o.conflist, 'utf8'));
  } catch (e) {
    throw new Error(`the conflist ${o.conflist} cannot be installed: ${(e as Error).message}`);
  }
  const plugins = (conflist as { plugins?: Array<{ type?: string; ipam?: { type?: string } }> }).plugins;
  // eni-ipam-cni is ptp's IPAM (Shared pools) or the main plugin itself (Exclusive pools).
  if (!Array.isArray(plugins) || !plugins.some((p) => p.ipam?.type === 'eni-ipam-cni' || p.type === 'eni-ipam-cni')) {
    throw new Error(`the conflist ${o.conflist} has no plugin of type, or with ipam.type, eni-ipam-cni`);
  }
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

  mkdirSync(o.confDir, { recursive: true });
  const conf = join(o.confDir, o.conflist.split('/').pop()!);
  replaceAtomically(conf, (tmp) => writeFileSync(tmp, `${JSON.stringify(conflist, null, 2)}\n`));
  return [plugin, conf];
}
