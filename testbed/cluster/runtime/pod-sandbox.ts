import { randomBytes } from 'node:crypto';
import type { KubeObject } from '../../kube/core/types.js';
import { PodNetworkArgsError, podCapabilityArgs, podCniArgs } from './cni-args.js';
import {
  CniConfigError,
  LOOPBACK_NETWORK,
  defaultNetwork,
  podAddresses,
  type Attachment,
  type CniRuntime,
  type NetworkConfigList,
} from './cni.js';

/**
 * Why a pod's sandbox could not be made; `reason` is the kubelet's Event reason. `leftover`: the
 * failed sandbox, when undoing it failed too (its DEL is still to do, its namespace kept).
 */
export class SandboxError extends Error {
  constructor(
    readonly reason: 'NetworkNotReady' | 'FailedCreatePodSandBox',
    message: string,
    readonly leftover?: PodSandbox,
  ) {
    super(message);
  }
}

/** A pod's sandbox: its network namespace and the networks set up in it. */
export interface PodSandbox {
  /** The sandbox's id (CNI_CONTAINERID, K8S_POD_INFRA_CONTAINER_ID). */
  id: string;
  /** Its network namespace (a name under /run/netns). */
  netns: string;
  /** The addresses of its eth0, IPv4 first: status.podIPs. */
  podIPs: string[];
  /** The networks set up (loopback, then the node's), as the ADD made them: what DEL undoes. */
  networks: Array<{ list: NetworkConfigList; attachment: Attachment }>;
}

export interface PodSandboxOptions {
  cni: CniRuntime;
  /** The node's CNI configuration folder, as the machine reaches it. */
  confDir: string;
  /** Makes an empty network namespace for a sandbox; answers its name. */
  createNetns(sandboxId: string): Promise<string>;
  removeNetns(netns: string): Promise<void>;
}

const notReady = (why: string) =>
  new SandboxError(
    'NetworkNotReady',
    'network is not ready: container runtime network not ready: NetworkReady=false ' +
      `reason:NetworkPluginNotReady message:Network plugin returns error: ${why}`,
  );

/**
 * Pod sandboxes as containerd's CRI plugin makes them for pods outside the host network: a
 * network namespace, the loopback network on `lo`, then the node's default network (the first
 * configuration in its conf folder) on `eth0` with the pod's CNI_ARGS and capability arguments;
 * a failed ADD is undone (DEL, then the namespace goes) and reported with the plugin's error.
 */
export class PodSandboxes {
  constructor(private readonly o: PodSandboxOptions) {}

  async create(pod: KubeObject): Promise<PodSandbox> {
    let network: ReturnType<typeof defaultNetwork>;
    try {
      network = defaultNetwork(this.o.confDir);
    } catch (e) {
      if (!(e instanceof CniConfigError)) throw e;
      throw notReady(`failed to load cni config: ${e.message}`);
    }
    if (!network) throw notReady('cni plugin not initialized');
    const id = randomBytes(32).toString('hex');
    const failed = (why: string, leftover?: PodSandbox) =>
      new SandboxError(
        'FailedCreatePodSandBox',
        `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "${id}": ${why}`,
        leftover,
      );
    let capabilityArgs: Record<string, unknown>;
    try {
      capabilityArgs = podCapabilityArgs(pod);
    } catch (e) {
      if (!(e instanceof PodNetworkArgsError)) throw e;
      throw failed(`get cni namespace options: ${e.message}`);
    }
    const netns = await this.o.createNetns(id);
    const sandbox: PodSandbox = { id, netns, podIPs: [], networks: [] };
    try {
      for (const [list, ifName] of [
        [LOOPBACK_NETWORK, 'lo'],
        [network.list, 'eth0'],
      ] as const) {
        const attachment: Attachment = {
          containerId: id,
          netns: `/var/run/netns/${netns}`,
          ifName,
          args: podCniArgs(pod, id),
          capabilityArgs,
        };
        sandbox.networks.push({ list, attachment });
        const result = await this.o.cni.add(list, attachment);
        if (ifName === 'eth0') sandbox.podIPs = podAddresses(result, ifName);
      }
      if (!sandbox.podIPs.length) throw new Error(`failed to find network info for sandbox "${id}"`);
    } catch (e) {
      // What the plugins may have allocated goes back (DEL), as containerd tears a failed sandbox
      // down; when that DEL fails too, containerd keeps the sandbox and its namespace, and the
      // kubelet stops it again later (the DEL retried), so nothing a plugin allocated is lost.
      const why = (e as Error).message;
      try {
        await this.remove(sandbox);
      } catch (cleanup) {
        throw failed(`${why}; ${(cleanup as Error).message}`, sandbox);
      }
      throw failed(why);
    }
    return sandbox;
  }

  /** DEL of each network in reverse order, then the namespace; a failure keeps the namespace for a retry. */
  async remove(sandbox: PodSandbox): Promise<void> {
    try {
      for (const n of [...sandbox.networks].reverse()) await this.o.cni.del(n.list, n.attachment);
    } catch (e) {
      throw new Error(`failed to destroy network for sandbox "${sandbox.id}": ${(e as Error).message}`);
    }
    await this.o.removeNetns(sandbox.netns);
  }
}
