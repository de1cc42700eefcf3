import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Logger } from 'pino';

/** How a node's pool hands out ENIs: addresses of shared ENIs, or a whole ENI per pod. */
export type EniMode = 'Shared' | 'Exclusive';

/** Writes a file under a temporary name and renames it: a reader sees the old or the new one, never half of one. */
export function replaceAtomically(path: string, write: (tmp: string) => void): void {
  const tmp = `${path}.new`;
  rmSync(tmp, { force: true });
  write(tmp);
  renameSync(tmp, path);
}

type Plugins = Array<{ type?: string; ipam?: { type?: string } }>;

/**
 * A conflist file that runs eni-ipam-cni, parsed, with the mode it serves: eni-ipam-cni as the
 * main plugin (Exclusive pools: the ENI's device is the pod's interface) or as the IPAM of
 * another plugin, ptp (Shared pools). Throws, naming the file, what is wrong with it.
 */
export function readConflist(path: string): { conflist: unknown; mode: EniMode } {
  let conflist: unknown;
  try {
    conflist = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new Error(`the conflist ${path} cannot be installed: ${(e as Error).message}`);
  }
  const plugins = (conflist as { plugins?: Plugins } | null)?.plugins;
  const list = Array.isArray(plugins) ? plugins : [];
  if (list.some((p) => p?.type === 'eni-ipam-cni')) return { conflist, mode: 'Exclusive' };
  if (list.some((p) => p?.ipam?.type === 'eni-ipam-cni')) return { conflist, mode: 'Shared' };
  throw new Error(`the conflist ${path} has no plugin of type, or with ipam.type, eni-ipam-cni`);
}

/** Installs a parsed conflist in the host's CNI folder under `name`, atomically. */
export function writeConflist(confDir: string, name: string, conflist: unknown): string {
  mkdirSync(confDir, { recursive: true });
  const path = join(confDir, name);
  replaceAtomically(path, (tmp) => writeFileSync(tmp, `${JSON.stringify(conflist, null, 2)}\n`));
  return path;
}

export interface ConflistByModeOptions {
  /** The host's CNI configuration folder (mounted). */
  confDir: string;
  /** The conflist for each mode (the chart's ConfigMap); installed under the Shared one's file name. */
  sources: Record<EniMode, string>;
  logger: Logger;
  node: string;
}

/**
 * The node's CNI configuration follows its pool's eniMode: the agent installs the conflist of
 * the mode the pool has (the init container installed the Shared one), under one file name, so
 * the runtime's default network is always the one the pool serves. Both files are checked
 * before the agent starts: a wrong one is a clear error then, not a broken node later.
 */
export class ConflistByMode {
  private installed?: EniMode;
  private readonly name: string;

  constructor(private readonly options: ConflistByModeOptions) {
    for (const mode of ['Shared', 'Exclusive'] as const) {
      const found = readConflist(options.sources[mode]).mode;
      if (found !== mode)
        throw new Error(
          `the ${mode} conflist ${options.sources[mode]} is for ${found} pools: ` +
            (mode === 'Exclusive'
              ? 'an Exclusive pool runs eni-ipam-cni as the main plugin (examples/10-eni-ipam-exclusive.conflist)'
              : 'a Shared pool runs eni-ipam-cni as the IPAM of ptp (examples/10-eni-ipam.conflist)'),
        );
    }
    this.name = basename(options.sources.Shared);
  }

  /**
   * Installs the conflist of `mode` unless it is installed already; a failure is logged and tried
   * on the next call. Whether the node's configuration is now that mode's.
   */
  follow(mode: EniMode): boolean {
    if (mode === this.installed) return true;
    try {
      const path = writeConflist(this.options.confDir, this.name, readConflist(this.options.sources[mode]).conflist);
      this.installed = mode;
      this.options.logger.info(
        { node: this.options.node, mode, conflist: path },
        'installed the conflist of the pool’s eniMode',
      );
      return true;
    } catch (e) {
      this.options.logger.error(
        { node: this.options.node, mode, confDir: this.options.confDir, err: (e as Error).message },
        'cannot install the conflist of the pool’s eniMode; pods get the other mode’s CNI error until it is',
      );
      return false;
    }
  }
}
