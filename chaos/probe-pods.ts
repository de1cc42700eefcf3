import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CniPluginError,
  CniRuntime,
  parseNetworkConfig,
  type NetworkConfigList,
} from '../testbed/cluster/runtime/cni.js';
import { SYSTEM_CNI_DIR } from '../testbed/cluster/runtime/node-image.js';
import { exec } from '../testbed/vpc/exec.js';
import type { AgentProcess } from './cluster.js';

/** One probe pod: how its ADD went and whether it then reached the VPC host. */
export interface Probe {
  node: string;
  ip?: string;
  /** When its first ADD started (ms since the epoch). */
  startedAt: number;
  /** From the first ADD to the one that answered an address. */
  addMs: number;
  /** ADDs refused with "try again" (code 11, the kubelet retries them) before one answered. */
  retries: number;
  /** The error of an ADD that did not answer in the end. */
  error?: string;
  /** Its first ping to the VPC host, right after ADD answered, got an answer. */
  reached?: boolean;
}

/** What the kubelet allows a pod's sandbox set-up before it gives up and starts again. */
const ADD_DEADLINE_MS = 30_000;

/** A pod's sandbox on a node: its own network namespace, set up and torn down through the node's conflist. */
export interface ProbeSandbox {
  /** The namespace's name (under /run/netns). */
  netns: string;
  containerId: string;
  /** CNI ADD: the pod's address, or the plugin's error. */
  add(): Promise<string | undefined>;
  /** CNI DEL. */
  del(): Promise<void>;
  /** The namespace goes (after a DEL that answered, as the runtime does). */
  remove(): Promise<void>;
}

/**
 * Pods the way a pod uses the network, on a chaos cluster with `vpc`: the shipped conflist
 * (ptp, eni-ipam-cni, bandwidth; or the Exclusive one) run by the container runtime's CNI code in
 * the node's namespace for a sandbox namespace of its own, retried as the kubelet does while
 * eni-ipam-cni says "try again"; then one ping from the pod to the VPC host, and DEL. An ADD
 * answers only once the pod's path works, so the first ping must get through.
 */
export class ProbePods {
  readonly probes: Probe[] = [];
  private readonly conflist: string;
  private readonly cniPath: string[];
  private seq = 0;

  constructor(
    readonly vpcHost: string,
    private readonly prefix: string,
    root: string,
    conflist = 'examples/10-eni-ipam.conflist',
  ) {
    this.conflist = readFileSync(join(root, conflist), 'utf8');
    this.cniPath = [join(root, 'bin'), SYSTEM_CNI_DIR];
  }

  /** The conflist as the node's agent serves it: its socket. */
  private listFor(a: AgentProcess): NetworkConfigList {
    const list = parseNetworkConfig('10-eni-ipam.conflist', this.conflist);
    for (const plugin of list.plugins)
      if (plugin.ipam && typeof plugin.ipam === 'object') plugin.ipam = { ...plugin.ipam, socket: a.socket };
    return list;
  }

  private runtime(a: AgentProcess): CniRuntime {
    return new CniRuntime({
      cniPath: this.cniPath,
      exists: existsSync,
      run: (plugin, env, stdin) =>
        exec(
          'ip',
          [
            'netns',
            'exec',
            a.netns!,
            'env',
            '-i',
            'PATH=/usr/sbin:/usr/bin:/sbin:/bin',
            ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
            plugin,
          ],
          stdin,
          ADD_DEADLINE_MS,
        ),
    });
  }

  /** A new sandbox (namespace made) of pod `name` on the node of `a`. */
  async sandbox(a: AgentProcess, name: string): Promise<ProbeSandbox> {
    const id = `probe${++this.seq}`;
    const netns = `${this.prefix}${id}`;
    const list = this.listFor(a);
    const cni = this.runtime(a);
    const attachment = {
      containerId: `${id}-${a.node}`,
      netns: `/var/run/netns/${netns}`,
      ifName: 'eth0',
      args: [
        ['IgnoreUnknown', '1'],
        ['K8S_POD_NAMESPACE', 'default'],
        ['K8S_POD_NAME', name],
      ] as Array<[string, string]>,
      capabilityArgs: {},
    };
    await exec('ip', ['netns', 'add', netns]);
    return {
      netns,
      containerId: attachment.containerId,
      add: async () => (await cni.add(list, attachment))?.ips?.[0]?.address.split('/')[0],
      del: () => cni.del(list, attachment),
      remove: async () => void (await exec('ip', ['netns', 'del', netns])),
    };
  }

  /** One probe pod on the node of `a`: ADD (retried), a ping to the VPC host, DEL. */
  async run(a: AgentProcess): Promise<Probe> {
    const sandbox = await this.sandbox(a, `probe${this.seq + 1}`);
    const t0 = Date.now();
    const probe: Probe = { node: a.node, startedAt: t0, addMs: 0, retries: 0 };
    this.probes.push(probe);
    try {
      for (;;) {
        try {
          probe.ip = await sandbox.add();
          probe.addMs = Date.now() - t0;
          break;
        } catch (e) {
          const again = e instanceof CniPluginError && e.code === 11 && Date.now() - t0 < ADD_DEADLINE_MS;
          if (!again) {
            probe.error = (e as Error).message;
            return probe;
          }
          probe.retries++;
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
      probe.reached = await this.reaches(sandbox.netns);
      return probe;
    } finally {
      await sandbox.del().catch((e: unknown) => (probe.error ??= `DEL: ${(e as Error).message}`));
      await sandbox.remove();
    }
  }

  /** Whether one ping from the namespace reaches the VPC host. */
  async reaches(netns: string): Promise<boolean> {
    return (await exec('ip', ['netns', 'exec', netns, 'ping', '-c1', '-W3', '-n', this.vpcHost])).code === 0;
  }
}
