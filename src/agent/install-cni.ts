import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface InstallCniOptions {
  /** The host's CNI plugin folder (mounted), e.g. /host/opt/cni/bin. */
  binDir: string;
  /** The host's CNI configuration folder (mounted), e.g. /host/etc/cni/net.d. */
  confDir: string;
  /** The conflist to install (its file name is kept). */
  conflist: string;
  /** The Node.js runtime to copy (default: this one). */
  nodeBinary?: string;
}

// The plugin's own code: its entry point and the one module it imports (Node built-ins only otherwise).
const PLUGIN_FILES = ['cli/cni-main.js', 'agent/cni-plugin.js'];
// Shared libraries the official Node.js binary links besides glibc; copied when found, so a host without them still runs it.
const RUNTIME_LIBS = ['libstdc++.so.6', 'libgcc_s.so.1'];
const LIB_DIRS = ['/usr/lib/x86_64-linux-gnu', '/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib'];

/**
 * Installs eni-ipam-cni on a node: the container runtime executes plugins from the host, which
 * may have no Node.js, so the plugin goes with its runtime in `eni-ipam.d/` beside a small
 * /bin/sh launcher. Every file is written under a temporary name and renamed, so a runtime
 * calling the plugin meanwhile sees the old one or the new one, never half of one.
 */
export function installCni(o: InstallCniOptions): string[] {
  let conflist: unknown;
  try {
    conflist = JSON.parse(readFileSync(o.conflist, 'utf8'));
  } catch (e) {
    throw new Error(`the conflist ${o.conflist} cannot be installed: ${(e as Error).message}`);
  }
  const plugins = (conflist as { plugins?: Array<{ ipam?: { type?: string } }> }).plugins;
  if (!Array.isArray(plugins) || !plugins.some((p) => p.ipam?.type === 'eni-ipam-cni')) {
    throw new Error(`the conflist ${o.conflist} has no plugin whose ipam.type is eni-ipam-cni`);
  }
  const dist = join(dirname(fileURLToPath(import.meta.url)), '..');
  const home = join(o.binDir, 'eni-ipam.d');
  const staging = `${home}.new`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(join(staging, 'lib'), { recursive: true });
  copyFileSync(o.nodeBinary ?? process.execPath, join(staging, 'node'));
  chmodSync(join(staging, 'node'), 0o755);
  for (const f of PLUGIN_FILES) {
    mkdirSync(dirname(join(staging, f)), { recursive: true });
    copyFileSync(join(dist, f), join(staging, f));
  }
  writeFileSync(join(staging, 'package.json'), '{"type":"module"}\n');
  for (const lib of RUNTIME_LIBS) {
    const found = LIB_DIRS.map((d) => join(d, lib)).find((p) => existsSync(p));
    if (found) copyFileSync(found, join(staging, 'lib', lib));
  }
  const old = `${home}.old`;
  rmSync(old, { recursive: true, force: true });
  if (existsSync(home)) renameSync(home, old);
  renameSync(staging, home);
  rmSync(old, { recursive: true, force: true });

  const launcher = join(o.binDir, 'eni-ipam-cni');
  const script = [
    '#!/bin/sh',
    '# eni-ipam-cni, installed by `eni-ipam install-cni`: the plugin with its own Node.js runtime.',
    'd="$(dirname "$0")/eni-ipam.d"',
    'LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/node" "$d/cli/cni-main.js" "$@"',
    '',
  ].join('\n');
  writeFileSync(`${launcher}.new`, script, { mode: 0o755 });
  renameSync(`${launcher}.new`, launcher);

  mkdirSync(o.confDir, { recursive: true });
  const conf = join(o.confDir, o.conflist.split('/').pop()!);
  writeFileSync(`${conf}.new`, `${JSON.stringify(conflist, null, 2)}\n`);
  renameSync(`${conf}.new`, conf);
  return [launcher, home, conf];
}
