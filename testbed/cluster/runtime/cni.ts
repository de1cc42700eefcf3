import { readFileSync, readdirSync } from 'node:fs';
import { extname, join } from 'node:path';

/**
 * The CNI half of a container runtime, as libcni (AddNetworkList / DelNetworkList) and
 * containerd's CRI plugin use it: the node's network configuration (the lexically first
 * `.conf`, `.conflist` or `.json` in its conf folder), each plugin of the chain found on
 * CNI_PATH and run in order for ADD (each given the previous one's result as `prevResult`,
 * `name` and `cniVersion` of the list, and in `runtimeConfig` the capability arguments it
 * declares), in reverse for DEL with the result cached at ADD, and plugin errors worded as
 * libcni words them.
 */

/** One plugin of a network configuration list. */
export interface PluginConf {
  type: string;
  capabilities?: Record<string, boolean>;
  [key: string]: unknown;
}

/** A network configuration list (a `.conf` becomes a list of its one plugin). */
export interface NetworkConfigList {
  cniVersion: string;
  name: string;
  plugins: PluginConf[];
}

/** What a plugin prints on success (spec 1.0.0; earlier versions have the same fields we read). */
export interface CniResult {
  cniVersion?: string;
  interfaces?: Array<{ name: string; mac?: string; sandbox?: string }>;
  ips?: Array<{ address: string; gateway?: string; interface?: number }>;
  routes?: Array<{ dst: string; gw?: string }>;
  dns?: unknown;
  [key: string]: unknown;
}

/** One network attachment of a sandbox: what the runtime tells each plugin besides its configuration. */
export interface Attachment {
  containerId: string;
  /** CNI_NETNS: the path of the sandbox's network namespace. */
  netns: string;
  ifName: string;
  /** CNI_ARGS, in order. */
  args: Array<[string, string]>;
  /** Capability arguments, passed in `runtimeConfig` to the plugins that declare them. */
  capabilityArgs: Record<string, unknown>;
}

export interface PluginRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Where the plugins are and how one runs (in the node's network namespace, with its filesystem). */
export interface PluginHost {
  /** CNI_PATH, as the plugins see it. */
  cniPath: string[];
  /** Whether a file exists at `path` (a path as the plugins see it). */
  exists(path: string): boolean;
  run(path: string, env: Record<string, string>, stdin: string): Promise<PluginRun>;
}

/** A network configuration that cannot be used (the runtime's network is then not ready). */
export class CniConfigError extends Error {}

/** A plugin that failed, with libcni's wording: `plugin type="ptp" name="net" failed (add): <its message>`. */
export class CniPluginError extends Error {
  constructor(
    readonly plugin: string,
    readonly network: string,
    readonly command: 'ADD' | 'DEL',
    /** The plugin's error code, when it printed a CNI error object. */
    readonly code: number | undefined,
    readonly reason: string,
  ) {
    super(`plugin type="${plugin}" name="${network}" failed (${command === 'ADD' ? 'add' : 'delete'}): ${reason}`);
  }
}

const CONFIG_EXTENSIONS = ['.conf', '.conflist', '.json'];

/** A configuration file as libcni reads it: a list, or one plugin's configuration made a list. */
export function parseNetworkConfig(file: string, text: string): NetworkConfigList {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new CniConfigError(`${file}: not JSON: ${(e as Error).message}`);
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new CniConfigError(`${file}: not a JSON object`);
  const o = raw as Record<string, unknown>;
  const isList = extname(file) === '.conflist';
  const plugins = isList ? o.plugins : [o];
  if (typeof o.name !== 'string' || !o.name) throw new CniConfigError(`${file}: no "name"`);
  if (!Array.isArray(plugins) || !plugins.length)
    throw new CniConfigError(`${file}: no "plugins" (a .conflist lists its plugins; a .conf is one plugin)`);
  for (const [i, p] of plugins.entries())
    if (!p || typeof p !== 'object' || typeof (p as PluginConf).type !== 'string' || !(p as PluginConf).type)
      throw new CniConfigError(`${file}: ${isList ? `plugins[${i}]` : 'the plugin'} has no "type"`);
  const cniVersion = typeof o.cniVersion === 'string' && o.cniVersion ? o.cniVersion : '0.1.0';
  return { cniVersion, name: o.name, plugins: plugins as PluginConf[] };
}

/**
 * The node's default network: the lexically first configuration file in `dir` (containerd's
 * choice), or undefined when there is none (the network plugin is not initialized).
 */
export function defaultNetwork(dir: string): { file: string; list: NetworkConfigList } | undefined {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return undefined;
  }
  const file = names.filter((n) => CONFIG_EXTENSIONS.includes(extname(n))).sort()[0];
  if (!file) return undefined;
  const path = join(dir, file);
  return { file: path, list: parseNetworkConfig(path, readFileSync(path, 'utf8')) };
}

/** containerd's loopback network, set up before the pod's own on `lo` (`WithLoNetwork`). */
export const LOOPBACK_NETWORK: NetworkConfigList = {
  cniVersion: '0.3.1',
  name: 'cni-loopback',
  plugins: [{ type: 'loopback' }],
};

/**
 * What one plugin of a list reads on stdin (libcni's buildOneConfig): its configuration with the
 * list's name and version, the capability arguments it declares in `runtimeConfig`, and the
 * previous plugin's result in `prevResult`.
 */
export function pluginStdin(
  list: NetworkConfigList,
  plugin: PluginConf,
  capabilityArgs: Record<string, unknown>,
  prevResult: unknown,
): Record<string, unknown> {
  const conf: Record<string, unknown> = { ...plugin, name: list.name, cniVersion: list.cniVersion };
  const runtimeConfig: Record<string, unknown> = {};
  for (const [capability, on] of Object.entries(plugin.capabilities ?? {}))
    if (on && capabilityArgs[capability] !== undefined) runtimeConfig[capability] = capabilityArgs[capability];
  if (Object.keys(runtimeConfig).length) conf.runtimeConfig = runtimeConfig;
  if (prevResult !== undefined) conf.prevResult = prevResult;
  return conf;
}

/** The CNI_* environment of a call. */
export function pluginEnv(command: 'ADD' | 'DEL', a: Attachment, cniPath: string[]): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: a.containerId,
    CNI_NETNS: a.netns,
    CNI_IFNAME: a.ifName,
    CNI_ARGS: a.args.map(([k, v]) => `${k}=${v}`).join(';'),
    CNI_PATH: cniPath.join(':'),
  };
}

/** A failed plugin's message, as libcni makes it from what the plugin printed. */
export function pluginFailure(r: PluginRun): { code?: number; message: string } {
  if (!r.stdout.trim())
    return {
      message: r.stderr.trim()
        ? `netplugin failed: ${JSON.stringify(r.stderr)}`
        : `netplugin failed with no error message: exit status ${r.code}`,
    };
  try {
    const e = JSON.parse(r.stdout) as { code?: number; msg?: string; details?: string };
    return { code: e.code, message: `${e.msg ?? ''}${e.details ? `; ${e.details}` : ''}` };
  } catch (err) {
    return {
      message: `netplugin failed but error parsing its diagnostic message ${JSON.stringify(r.stdout)}: ${(err as Error).message}`,
    };
  }
}

/**
 * Runs network configuration lists for sandboxes, keeping each ADD's result (as libcni caches it
 * under /var/lib/cni/results) for the DEL that undoes it.
 */
export class CniRuntime {
  private readonly cache = new Map<string, CniResult | undefined>();

  constructor(private readonly host: PluginHost) {}

  private key(list: NetworkConfigList, a: Attachment): string {
    return `${list.name}-${a.containerId}-${a.ifName}`;
  }

  private find(type: string): string | undefined {
    return this.host.cniPath.map((dir) => join(dir, type)).find((p) => this.host.exists(p));
  }

  private async invoke(
    command: 'ADD' | 'DEL',
    list: NetworkConfigList,
    plugin: PluginConf,
    a: Attachment,
    prevResult: unknown,
  ): Promise<CniResult | undefined> {
    const path = this.find(plugin.type);
    if (!path)
      throw new CniPluginError(
        plugin.type,
        list.name,
        command,
        undefined,
        `failed to find plugin "${plugin.type}" in path [${this.host.cniPath.join(' ')}]`,
      );
    const stdin = JSON.stringify(pluginStdin(list, plugin, a.capabilityArgs, prevResult));
    const r = await this.host.run(path, pluginEnv(command, a, this.host.cniPath), stdin);
    if (r.code !== 0) {
      const f = pluginFailure(r);
      throw new CniPluginError(plugin.type, list.name, command, f.code, f.message);
    }
    if (command === 'DEL' || !r.stdout.trim()) return undefined;
    try {
      return JSON.parse(r.stdout) as CniResult;
    } catch (e) {
      throw new CniPluginError(
        plugin.type,
        list.name,
        command,
        undefined,
        `the plugin's result is not JSON (${(e as Error).message}): ${JSON.stringify(r.stdout.slice(0, 200))}`,
      );
    }
  }

  /** ADD of each plugin in order, each with the previous one's result; the last result is the list's. */
  async add(list: NetworkConfigList, a: Attachment): Promise<CniResult | undefined> {
    let result: CniResult | undefined;
    for (const plugin of list.plugins) result = await this.invoke('ADD', list, plugin, a, result);
    this.cache.set(this.key(list, a), result);
    return result;
  }

  /** DEL of each plugin in reverse order, with the cached result of the ADD; idempotent, as plugins are. */
  async del(list: NetworkConfigList, a: Attachment): Promise<void> {
    const cached = this.cache.get(this.key(list, a));
    for (const plugin of [...list.plugins].reverse()) await this.invoke('DEL', list, plugin, a, cached);
    this.cache.delete(this.key(list, a));
  }
}

/**
 * The pod's addresses from the result of its `eth0` network, as containerd reads them: the
 * addresses of the result's interface `ifName` in the sandbox, IPv4 first; an address that names
 * no interface is an invalid result.
 */
export function podAddresses(result: CniResult | undefined, ifName: string): string[] {
  const interfaces = result?.interfaces ?? [];
  const mine: string[] = [];
  for (const ip of result?.ips ?? []) {
    if (ip.interface === undefined || !interfaces[ip.interface])
      throw new Error(
        `invalid interface config: invalid IP configuration (interface number missing) for ${ip.address}: invalid result`,
      );
    if (interfaces[ip.interface]!.name === ifName) mine.push(ip.address.split('/')[0]!);
  }
  return [...mine.filter((x) => !x.includes(':')), ...mine.filter((x) => x.includes(':'))];
}
