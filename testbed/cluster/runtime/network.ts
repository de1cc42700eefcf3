import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Runs a command; rejects with its stderr when it fails. */
export function run(cmd: string, args: string[], timeoutMs = 15_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${(stderr || err.message).trim()}`));
      else resolve(stdout);
    });
  });
}

const ip = (...args: string[]) => run('ip', args);

/** Where ECS instances find their metadata service (RAM role credentials). */
export const METADATA_ADDRESS = '100.100.100.200';
const inNs = (ns: string, ...args: string[]) => run('ip', ['netns', 'exec', ns, ...args]);
const shortHash = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 8);

/**
 * Why this machine cannot run programs in namespaces of their own, or undefined when it can: it
 * needs root, each of `tools` (from the Debian `packages` named), and a network namespace.
 */
export function namespacesUnavailable(tools: string[], packages: string): string | undefined {
  if (process.getuid?.() !== 0) return 'network and mount namespaces need root';
  for (const bin of tools) {
    try {
      execFileSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' });
    } catch {
      return `${bin} is not installed (Debian packages ${packages})`;
    }
  }
  try {
    // A name of this process's own: test files probe at once from several workers.
    const probe = `eniemu-probe-${process.pid}`;
    execFileSync('ip', ['netns', 'add', probe]);
    execFileSync('ip', ['netns', 'del', probe]);
  } catch (e) {
    return `cannot create a network namespace: ${(e as Error).message}`;
  }
  return undefined;
}

/** Why this machine cannot run emulated nodes, or undefined when it can. */
export function runtimeUnavailable(): string | undefined {
  return namespacesUnavailable(
    ['ip', 'unshare', 'nsenter', 'chroot', 'setpriv', 'mount', 'iptables'],
    'iproute2, util-linux, coreutils, mount, iptables',
  );
}

/** One emulated node's host network: a namespace on the cluster's bridge, with its pod range. */
export interface NodeNetwork {
  netns: string;
  /** The node's address on the bridge (its InternalIP). */
  hostIP: string;
  /** The node's pod range (its Node's spec.podCIDR, routed to it from the machine), e.g. 10.213.101.0/24. */
  podCIDR: string;
}

/**
 * The cluster's network: a bridge on the machine (the emulators and the API server listen on
 * its address), a namespace per node joined to it by a veth, and per pod sandbox an empty
 * namespace that the node's CNI plugins set up. A subnet 10.X.0.0/16 no route of the machine
 * uses is picked, so that clusters never collide.
 */
export class ClusterNetwork {
  private constructor(
    readonly id: string,
    readonly bridge: string,
    readonly octet: number,
  ) {}

  /** The address of the machine on the bridge: every node and pod reaches the emulators here. */
  get hostAddress(): string {
    return `10.${this.octet}.0.1`;
  }

  static async create(): Promise<ClusterNetwork> {
    const routes = await ip('-4', 'route', 'show', 'table', 'all');
    const addrs = await ip('-4', '-o', 'addr', 'show');
    const used = (o: number) => routes.includes(`10.${o}.`) || addrs.includes(` 10.${o}.`);
    // Claimed with a lock file, so that two clusters starting at once never take the same subnet.
    const free = Array.from({ length: 50 }, (_, i) => 200 + ((i + (process.pid % 50)) % 50)).find(
      (o) => !used(o) && claim(o),
    );
    if (free === undefined)
      throw new Error('no free 10.200-249.0.0/16 subnet on this machine for the emulated cluster');
    const id = `${free}${shortHash(`${process.pid}${Date.now()}`).slice(0, 3)}`;
    const net = new ClusterNetwork(id, `ecbr${id}`.slice(0, 15), free);
    await ip('link', 'add', net.bridge, 'type', 'bridge');
    await ip('addr', 'add', `${net.hostAddress}/24`, 'dev', net.bridge);
    await ip('link', 'set', net.bridge, 'up');
    // The machine routes between the nodes' pod ranges (a pod reaching a Service's endpoint on
    // another node), as a container engine turns forwarding on for its bridges.
    await run('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    return net;
  }

  /**
   * Adds node number `index` (0-based): its namespace, veth to the bridge, forwarding and
   * routes; with `metadata`, the instance metadata address (100.100.100.200:80) of the node and
   * of its pods leads there (a DNAT in the node's namespace only).
   */
  async addNode(index: number, metadata?: { host: string; port: number }): Promise<NodeNetwork> {
    const netns = `ecn${this.id}-${index}`;
    const hostIP = `10.${this.octet}.0.${10 + index}`;
    const podCIDR = `10.${this.octet}.${100 + index}.0/24`;
    const [outer, inner] = [`ecn${this.id}${index}a`, `ecn${this.id}${index}b`].map((n) => n.slice(0, 15));
    await ip('netns', 'add', netns);
    await ip('link', 'add', outer!, 'type', 'veth', 'peer', 'name', inner!);
    await ip('link', 'set', outer!, 'master', this.bridge, 'up');
    await ip('link', 'set', inner!, 'netns', netns);
    await inNs(netns, 'ip', 'link', 'set', 'lo', 'up');
    await inNs(netns, 'ip', 'link', 'set', inner!, 'name', 'eth0');
    await inNs(netns, 'ip', 'addr', 'add', `${hostIP}/24`, 'dev', 'eth0');
    await inNs(netns, 'ip', 'link', 'set', 'eth0', 'up');
    await inNs(netns, 'ip', 'route', 'add', 'default', 'via', this.hostAddress);
    await inNs(netns, 'sysctl', '-qw', 'net.ipv4.ip_forward=1');
    await ip('route', 'add', podCIDR, 'via', hostIP, 'dev', this.bridge);
    if (metadata) {
      const to = `${metadata.host}:${metadata.port}`;
      for (const chain of ['PREROUTING', 'OUTPUT']) {
        await inNs(
          netns,
          'iptables',
          '-t',
          'nat',
          '-A',
          chain,
          '-d',
          `${METADATA_ADDRESS}/32`,
          '-p',
          'tcp',
          '--dport',
          '80',
          '-j',
          'DNAT',
          '--to-destination',
          to,
        );
      }
    }
    return { netns, hostIP, podCIDR };
  }

  /**
   * An empty network namespace for a pod's sandbox (the node's CNI plugins set it up), named so
   * that `destroy` finds it.
   */
  async addPodNamespace(sandboxId: string): Promise<string> {
    const netns = `ecp${this.id}-${sandboxId.slice(0, 12)}`;
    await ip('netns', 'add', netns);
    return netns;
  }

  async removePod(netns: string): Promise<void> {
    // Deleting the namespace deletes its veth end, and with it the node's end and route.
    await ip('netns', 'del', netns).catch(() => undefined);
  }

  /** Removes every namespace, route and the bridge of this cluster. */
  async destroy(): Promise<void> {
    const list = await ip('netns', 'list').catch(() => '');
    for (const line of list.split('\n')) {
      const name = line.split(' ')[0];
      if (name && (name.startsWith(`ecp${this.id}-`) || name.startsWith(`ecn${this.id}-`)))
        await ip('netns', 'del', name).catch(() => undefined);
    }
    await ip('link', 'del', this.bridge).catch(() => undefined);
    rmSync(lockFile(this.octet), { force: true });
  }
}

const LOCKS = '/run/eni-ipam-emulator';
const lockFile = (octet: number) => join(LOCKS, `10.${octet}.lock`);

/** Takes subnet 10.`octet`.0.0/16 for this process, unless a live process holds it. */
function claim(octet: number): boolean {
  mkdirSync(LOCKS, { recursive: true });
  const file = lockFile(octet);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      return true;
    } catch {
      let alive = false;
      try {
        const holder = Number(readFileSync(file, 'utf8').trim() || 0);
        process.kill(holder, 0);
        alive = holder > 0;
      } catch {
        alive = false; // gone meanwhile, or its process is
      }
      if (alive) return false;
      rmSync(file, { force: true }); // left by a cluster that did not stop
    }
  }
  return false;
}
