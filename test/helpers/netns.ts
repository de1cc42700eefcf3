import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CniRuntime,
  parseNetworkConfig,
  type Attachment,
  type NetworkConfigList,
} from '../../testbed/cluster/runtime/cni.js';
import { namespacesUnavailable } from '../../testbed/cluster/runtime/network.js';
import { startVpc, type Vpc, type VpcOptions } from '../../testbed/vpc/index.js';
import { runCli } from './cli.js';

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

/**
 * A container runtime's CNI calls for pods on a test "node" (a network namespace): the kubelet's
 * own CNI runtime (testbed/cluster/runtime/cni.ts: libcni's ADD and DEL of a list), with plugins
 * found on `cniPath` and run in the node's network namespace. `socketDir` is bind-mounted on the
 * plugin's /run/eni-ipam, as each node has its own /run.
 */
export class MiniRuntime {
  private readonly conf: NetworkConfigList;
  private readonly cni: CniRuntime;

  constructor(conflistPath: string, cniPath: string[], node: { netns: string; socketDir: string }) {
    this.conf = parseNetworkConfig(conflistPath, readFileSync(conflistPath, 'utf8'));
    const script = 'mount --bind "$SOCKET_DIR" /run/eni-ipam && exec "$PLUGIN"';
    this.cni = new CniRuntime({
      cniPath,
      exists: existsSync,
      run: (plugin, env, stdin) =>
        sh('ip', ['netns', 'exec', node.netns, 'unshare', '--mount', 'sh', '-c', script], {
          stdin,
          env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env, SOCKET_DIR: node.socketDir, PLUGIN: plugin },
        }),
    });
  }

  private attachment(pod: PodSpec): Attachment {
    return {
      containerId: pod.id,
      netns: `/var/run/netns/${pod.netns}`,
      ifName: 'eth0',
      args: [
        ['IgnoreUnknown', '1'],
        ['K8S_POD_NAMESPACE', pod.namespace],
        ['K8S_POD_NAME', pod.name],
        ['K8S_POD_INFRA_CONTAINER_ID', pod.id],
      ],
      capabilityArgs: pod.bandwidth ? { bandwidth: pod.bandwidth } : {},
    };
  }

  async add(pod: PodSpec): Promise<{
    ips: Array<{ address: string; gateway: string }>;
    interfaces?: Array<{ name: string; sandbox?: string }>;
  }> {
    return (await this.cni.add(this.conf, this.attachment(pod))) as never;
  }

  async del(pod: PodSpec): Promise<void> {
    await this.cni.del(this.conf, this.attachment(pod));
  }
}

/** Installs the CNI plugin binaries as the agent DaemonSet's init container does, once per conflist; answers the bin dir. */
export async function installCniPlugins(conflists: string[]): Promise<string> {
  const bin = mkdtempSync(join(tmpdir(), 'cni-bin-'));
  for (const conflist of conflists) {
    const confDir = mkdtempSync(join(tmpdir(), 'cni-conf-'));
    const installed = await runCli(['install-cni', '--bin-dir', bin, '--conf-dir', confDir, '--conflist', conflist]);
    if (installed.code !== 0) throw new Error(`install-cni failed: ${installed.stderr}`);
  }
  return bin;
}

/**
 * A network namespace per node (`<prefix>node1`…, loopback up) and the strict VPC over them:
 * each node's eth0 and its ENIs' devices appear in its namespace.
 */
export async function vpcNodes(o: {
  world: VpcOptions['world'];
  instances: string[];
  prefix: string;
  logger?: VpcOptions['logger'];
}): Promise<{ netnses: string[]; vpc: Vpc }> {
  const netnses = o.instances.map((_, k) => `${o.prefix}node${k + 1}`);
  for (const ns of netnses) {
    await ip('netns', 'add', ns);
    await inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
  }
  const vpc = await startVpc({
    world: o.world,
    nodes: o.instances.map((instanceId, k) => ({ instanceId, netns: netnses[k]! })),
    prefix: o.prefix,
    ...(o.logger ? { logger: o.logger } : {}),
  });
  return { netnses, vpc };
}
