import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { namespacesUnavailable } from '../../src/sim/cluster/runtime/network.js';

/** Debian's containernetworking-plugins. */
export const SYSTEM_CNI_DIR = '/usr/lib/cni';

/** Why the datapath test cannot run here, or undefined when it can. */
export function datapathUnavailable(): string | undefined {
  const why = namespacesUnavailable(
    ['ip', 'tc', 'iperf3', 'tcpdump', 'unshare', 'ping'],
    'iproute2, iperf3, tcpdump, iputils-ping, util-linux',
  );
  if (why) return why;
  for (const p of ['ptp', 'bandwidth'])
    if (!existsSync(join(SYSTEM_CNI_DIR, p)))
      return `${SYSTEM_CNI_DIR}/${p} is missing (Debian package containernetworking-plugins)`;
  return undefined;
}

export interface Exec {
  code: number;
  stdout: string;
  stderr: string;
}

export function sh(
  cmd: string,
  args: string[],
  o: { stdin?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Exec> {
  return new Promise((resolve) => {
    const child = execFile(
      cmd,
      args,
      { env: o.env ?? process.env, timeout: o.timeoutMs ?? 30_000, maxBuffer: 8 * 1024 * 1024 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0,
          stdout,
          stderr,
        }),
    );
    child.stdin!.on('error', () => undefined); // a command that reads no input may close it first
    child.stdin!.end(o.stdin ?? '');
  });
}

/** A command in a namespace; throws with its output when it fails. */
export async function inNs(ns: string, ...argv: string[]): Promise<string> {
  const r = await sh('ip', ['netns', 'exec', ns, ...argv]);
  if (r.code !== 0) throw new Error(`[${ns}] ${argv.join(' ')} failed (${r.code}): ${r.stderr || r.stdout}`);
  return r.stdout;
}

export async function ip(...argv: string[]): Promise<void> {
  const r = await sh('ip', argv);
  if (r.code !== 0) throw new Error(`ip ${argv.join(' ')} failed: ${r.stderr}`);
}

/** A long-running command in a namespace (a server), killed by `stop`. */
export function startInNs(ns: string, argv: string[]): ChildProcess {
  return spawn('ip', ['netns', 'exec', ns, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
}

export function deleteNamespaces(prefix: string): void {
  const list = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
  for (const line of list.split('\n')) {
    const name = line.split(' ')[0];
    if (name?.startsWith(prefix)) execFileSync('ip', ['netns', 'del', name]);
  }
}

export interface PodSpec {
  id: string;
  namespace: string;
  name: string;
  netns: string;
  /** The runtime's bandwidth capability, in bits per second and bits. */
  bandwidth?: { egressRate?: number; egressBurst?: number; ingressRate?: number; ingressBurst?: number };
}

interface Conflist {
  cniVersion: string;
  name: string;
  plugins: Array<{ type: string; capabilities?: Record<string, boolean>; [k: string]: unknown }>;
}

/**
 * What a container runtime does with a conflist (libcni's AddNetworkList / DelNetworkList):
 * each plugin in order for ADD with the previous result, in reverse for DEL with the cached
 * result, capabilities passed as runtimeConfig, plugins found on CNI_PATH, run in the node's
 * network namespace. `socketDir` is bind-mounted on the plugin's /run/eni-ipam, as each node
 * has its own /run.
 */
export class MiniRuntime {
  private readonly conf: Conflist;
  private readonly results = new Map<string, unknown>();

  constructor(
    conflistPath: string,
    private readonly cniPath: string[],
    private readonly node: { netns: string; socketDir: string },
  ) {
    this.conf = JSON.parse(readFileSync(conflistPath, 'utf8'));
  }

  private find(type: string): string {
    const dir = this.cniPath.find((d) => existsSync(join(d, type)));
    if (!dir) throw new Error(`plugin ${type} not found on CNI_PATH ${this.cniPath.join(':')}`);
    return join(dir, type);
  }

  private async exec(
    command: 'ADD' | 'DEL',
    pod: PodSpec,
    plugin: Conflist['plugins'][number],
    prevResult: unknown,
  ): Promise<unknown> {
    const runtimeConfig = plugin.capabilities?.bandwidth && pod.bandwidth ? { bandwidth: pod.bandwidth } : undefined;
    const stdin = JSON.stringify({
      cniVersion: this.conf.cniVersion,
      name: this.conf.name,
      ...plugin,
      ...(prevResult ? { prevResult } : {}),
      ...(runtimeConfig ? { runtimeConfig } : {}),
    });
    const env = {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      CNI_COMMAND: command,
      CNI_CONTAINERID: pod.id,
      CNI_NETNS: `/var/run/netns/${pod.netns}`,
      CNI_IFNAME: 'eth0',
      CNI_PATH: this.cniPath.join(':'),
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${pod.namespace};K8S_POD_NAME=${pod.name};K8S_POD_INFRA_CONTAINER_ID=${pod.id}`,
    };
    const script = 'mount --bind "$SOCKET_DIR" /run/eni-ipam && exec "$PLUGIN"';
    const r = await sh('ip', ['netns', 'exec', this.node.netns, 'unshare', '--mount', 'sh', '-c', script], {
      stdin,
      env: { ...env, SOCKET_DIR: this.node.socketDir, PLUGIN: this.find(plugin.type) },
    });
    if (r.code !== 0)
      throw new Error(`${plugin.type} ${command} for ${pod.name} failed (${r.code}): ${r.stdout}${r.stderr}`);
    return r.stdout.trim() ? JSON.parse(r.stdout) : undefined;
  }

  async add(pod: PodSpec): Promise<{
    ips: Array<{ address: string; gateway: string }>;
    interfaces?: Array<{ name: string; sandbox?: string }>;
  }> {
    let result: unknown;
    for (const plugin of this.conf.plugins) result = await this.exec('ADD', pod, plugin, result);
    this.results.set(pod.id, result);
    return result as never;
  }

  async del(pod: PodSpec): Promise<void> {
    const cached = this.results.get(pod.id);
    for (const plugin of [...this.conf.plugins].reverse()) await this.exec('DEL', pod, plugin, cached);
  }
}
