import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { DatapathError } from './node-routing.js';

/**
 * eniMode Exclusive on the node: a pod's ENI device is moved into the pod's network namespace
 * and becomes its interface (no veth, no host route, no rule), and is moved back on DEL. Every
 * step is idempotent, so a retried ADD or DEL (after a crash of the agent midway) finishes what
 * the first began: the device is found by its MAC wherever it is, in the pod's namespace or the
 * node's.
 */

/** What a pod's interface on its own ENI needs. */
export interface ExclusiveInterface {
  eniId: string;
  mac: string;
  /** The pod's network namespace, as the runtime names it (CNI_NETNS: a path). */
  netns: string;
  ifName: string;
  /** The ENI's primary address, the pod's. */
  ip: string;
  prefixLength: number;
  gateway: string;
  mtu: number;
  /** The runtime's bandwidth capability (bits per second and bits), applied to the pod's own device. */
  bandwidth?: { ingressRate?: number; ingressBurst?: number; egressRate?: number; egressBurst?: number };
}

export interface ExclusiveOptions {
  /** The node's network namespace as a path (default: the agent's own, which runs with host networking). */
  nodeNetns?: string;
  timeoutMs?: number;
}

/** ip lives in /usr/sbin or /sbin, which a container's PATH may lack. */
const PATH = [process.env.PATH, '/usr/sbin', '/usr/bin', '/sbin', '/bin'].filter(Boolean).join(':');

interface Link {
  ifname: string;
  address?: string;
  master?: string;
  /** With -d: what kind of device it is (vlan, macvlan...); none for a physical one. */
  linkinfo?: { info_kind?: string };
}

/** Devices on top of another that share its MAC: never the ENI's own device. */
const STACKED = new Set(['vlan', 'macvlan', 'macvtap', 'ipvlan', 'ipvtap', 'bond', 'team']);

/** The name a device returned to the node gets: its MAC's, so it never clashes with another (15 characters). */
export const nodeName = (mac: string): string => `eni${mac.replace(/:/g, '').toLowerCase()}`;

const CAP_SYS_ADMIN = 21n;

/**
 * Why this process cannot move ENI devices into pods, or undefined: entering a pod's network
 * namespace (setns, through nsenter) takes CAP_SYS_ADMIN. `status`: /proc/self/status's text.
 */
export function exclusiveUnavailable(status?: string): string | undefined {
  let text = status;
  try {
    text ??= readFileSync('/proc/self/status', 'utf8');
  } catch {
    return undefined; // no /proc: nothing to tell; nsenter says what fails
  }
  const effective = /^CapEff:\s*([0-9a-f]+)$/im.exec(text)?.[1];
  if (effective === undefined || (BigInt(`0x${effective}`) >> CAP_SYS_ADMIN) & 1n) return undefined;
  return (
    'the agent lacks CAP_SYS_ADMIN, which entering a pod’s network namespace takes; ' +
    'with the chart, set agent.exclusiveENIs=true (it adds the capability and mounts the host’s /var/run/netns)'
  );
}

export class ExclusiveDatapath {
  private readonly node: string;

  constructor(private readonly options: ExclusiveOptions = {}) {
    this.node = options.nodeNetns ?? `/proc/${process.pid}/ns/net`;
  }

  /** `ip` (or `tc`) run in the namespace at `netns` (a path), through nsenter. */
  private run(netns: string, argv: string[], stdin = ''): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = execFile(
        'nsenter',
        [`--net=${netns}`, '--', ...argv],
        { timeout: this.options.timeoutMs ?? 10_000, env: { PATH } },
        (err, stdout, stderr) => {
          const e = err as { code?: unknown; killed?: boolean; message: string } | null;
          if (e && typeof e.code !== 'number')
            return reject(new Error(`nsenter --net=${netns} ${argv.join(' ')}: ${e.killed ? 'timed out' : e.message}`));
          resolve({ code: e ? (e.code as number) : 0, stdout, stderr });
        },
      );
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(stdin);
    });
  }

  private async must(netns: string, argv: string[], eniId: string, stdin = ''): Promise<string> {
    const r = await this.run(netns, argv, stdin);
    if (r.code !== 0)
      throw new DatapathError(
        eniId,
        'apply-failed',
        `${argv.join(' ')} in ${netns} failed: ${r.stderr.trim() || `exit ${r.code}`}`,
        false,
      );
    return r.stdout;
  }

  /** The device with `mac` in a namespace (not one enslaved to another, nor a VLAN or the like on it). */
  private async find(netns: string, mac: string): Promise<string | undefined> {
    const r = await this.run(netns, ['ip', '-j', '-d', 'link', 'show']);
    if (r.code !== 0) return undefined;
    const links = JSON.parse(r.stdout || '[]') as Link[];
    return links.find(
      (l) => l.address?.toLowerCase() === mac.toLowerCase() && !l.master && !STACKED.has(l.linkinfo?.info_kind ?? ''),
    )?.ifname;
  }

  /** The MACs of the devices in the node's namespace: the ENIs an ADD can take at once. */
  async presentMacs(): Promise<Set<string>> {
    const r = await this.run(this.node, ['ip', '-j', 'link', 'show']);
    if (r.code !== 0) return new Set();
    return new Set((JSON.parse(r.stdout || '[]') as Link[]).map((l) => (l.address ?? '').toLowerCase()));
  }

  /**
   * ADD: the ENI's device moved into the pod's namespace (where it may be already), named
   * `ifName`, with the pod's address, the MTU and the default route via the vSwitch gateway.
   */
  async attach(i: ExclusiveInterface): Promise<void> {
    if (!existsSync(i.netns))
      throw new DatapathError(
        i.eniId,
        'apply-failed',
        `the pod's network namespace ${i.netns} does not exist here: the pod is gone, or the agent does not see the ` +
          'host’s /var/run/netns (with the chart, set agent.exclusiveENIs=true: it mounts it, HostToContainer)',
        false,
      );
    let inPod = await this.find(i.netns, i.mac);
    if (!inPod) {
      const onNode = await this.find(this.node, i.mac);
      if (!onNode)
        throw new DatapathError(
          i.eniId,
          'device-missing',
          `ENI ${i.eniId}'s device (MAC ${i.mac}) is in neither the node's namespace nor the pod's yet`,
          true,
        );
      // Down first: what the image's scripts configured on it goes with the move (addresses do).
      await this.must(this.node, ['ip', 'link', 'set', 'dev', onNode, 'down'], i.eniId);
      await this.must(this.node, ['ip', 'link', 'set', 'dev', onNode, 'netns', i.netns], i.eniId);
      inPod = onNode;
    }
    const dev = i.ifName;
    const lines = [
      ...(inPod === dev ? [] : [`link set dev ${inPod} name ${dev}`]),
      `link set dev ${dev} mtu ${i.mtu}`,
      `addr replace ${i.ip}/${i.prefixLength} dev ${dev}`,
      `link set dev ${dev} up`,
      'link set dev lo up',
      `route replace default via ${i.gateway} dev ${dev}`,
    ];
    await this.must(i.netns, ['ip', '-batch', '-'], i.eniId, `${lines.join('\n')}\n`);
    await this.shape(i);
  }

  /**
   * The runtime's bandwidth limits on the pod's own device, as the bandwidth plugin sets them on
   * a veth: egress (what the pod sends) by a TBF on the device; ingress by a TBF on an IFB the
   * device's ingress is redirected to. Both in the pod's namespace: they go with it.
   */
  private async shape(i: ExclusiveInterface): Promise<void> {
    const b = i.bandwidth;
    const tbf = (rate: number, burst: number | undefined) => [
      'tbf',
      'rate',
      `${Math.floor(rate)}bit`,
      'burst',
      `${Math.max(Math.ceil((burst ?? rate) / 8), 1600)}b`,
      'latency',
      '25ms',
    ];
    if (b?.egressRate)
      await this.must(
        i.netns,
        ['tc', 'qdisc', 'replace', 'dev', i.ifName, 'root', ...tbf(b.egressRate, b.egressBurst)],
        i.eniId,
      );
    if (b?.ingressRate) {
      const ifb = 'ifb0';
      if ((await this.run(i.netns, ['ip', 'link', 'show', 'dev', ifb])).code !== 0)
        await this.must(i.netns, ['ip', 'link', 'add', ifb, 'type', 'ifb'], i.eniId);
      await this.must(i.netns, ['ip', 'link', 'set', 'dev', ifb, 'up'], i.eniId);
      await this.must(
        i.netns,
        ['tc', 'qdisc', 'replace', 'dev', ifb, 'root', ...tbf(b.ingressRate, b.ingressBurst)],
        i.eniId,
      );
      await this.must(i.netns, ['tc', 'qdisc', 'replace', 'dev', i.ifName, 'handle', 'ffff:', 'ingress'], i.eniId);
      await this.must(
        i.netns,
        [
          'tc',
          'filter',
          'replace',
          'dev',
          i.ifName,
          'parent',
          'ffff:',
          'protocol',
          'all',
          'prio',
          '1',
          'u32',
          'match',
          'u32',
          '0',
          '0',
          'action',
          'mirred',
          'egress',
          'redirect',
          'dev',
          ifb,
        ],
        i.eniId,
      );
    }
  }

  /**
   * DEL: the device back in the node's namespace, down, without address, named by its MAC. A
   * namespace already gone took nothing with it: a physical device returns to the host by
   * itself (the VPC emulation plugs it in again); then the device is only made clean.
   */
  async detach(eniId: string, mac: string, netns: string | undefined): Promise<void> {
    const inPod = netns && existsSync(netns) ? await this.find(netns, mac) : undefined;
    if (inPod) {
      const lines = [
        `addr flush dev ${inPod}`,
        `link set dev ${inPod} down`,
        `link set dev ${inPod} name ${nodeName(mac)}`,
      ];
      await this.must(netns!, ['ip', '-force', '-batch', '-'], eniId, `${lines.join('\n')}\n`);
      // The qdiscs go with the device's move; an IFB of the pod's goes with its namespace.
      await this.must(netns!, ['ip', 'link', 'set', 'dev', nodeName(mac), 'netns', this.node], eniId);
    }
    const onNode = await this.find(this.node, mac);
    if (!onNode) return;
    await this.must(
      this.node,
      ['ip', '-force', '-batch', '-'],
      eniId,
      `addr flush dev ${onNode}\nlink set dev ${onNode} down\n`,
    );
  }
}
