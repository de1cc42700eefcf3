import { isIpv6 } from '../ipam/families.js';
import type { AddRequest } from './agent.js';
import type { Allocation, Lease } from './allocator.js';
import { DatapathError } from './datapath/node-routing.js';
import type { PodRef } from './pod-events.js';

/** CNI error codes (spec 1.0.0, and 50 from 1.1.0 for STATUS). */
export const CNI_ERRORS = {
  incompatibleVersion: 1,
  unsupportedField: 2,
  unknownContainer: 3,
  invalidEnv: 4,
  io: 5,
  decode: 6,
  invalidConfig: 7,
  tryAgainLater: 11,
  pluginNotAvailable: 50,
} as const;
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];
/** The spec version that introduced a command (the others are in every version we speak). */
const SINCE: Record<string, string> = { CHECK: '0.4.0', STATUS: '1.1.0', GC: '1.1.0' };
/** Where the plugin finds the agent when the configuration names no `ipam.socket`. */
export const DEFAULT_SOCKET = '/run/eni-ipam/agent.sock';
/** GC leaves allocations younger than this alone: an ADD may finish after the runtime listed its attachments. */
export const GC_GRACE_MS = 60_000;

export class CniError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly details = '',
  ) {
    super(message);
  }
}

/** One plugin call as the runtime made it: its `CNI_*` variables and the network configuration from stdin. */
export interface CniRequest {
  env: Record<string, string>;
  stdin: string;
}

/** What the plugin prints and the code it exits with. */
export interface CniAnswer {
  stdout: string;
  exitCode: number;
}

/** The part of the agent the protocol needs. */
export interface CniAgent {
  readonly ready: boolean;
  /** An address for the pod interface, its datapath on the node set up (see Agent.addPod). */
  addPod(req: AddRequest): Promise<Lease | 'pool-empty'>;
  /** Releases the container's (interface's) addresses and takes their rules off the node. */
  removePod(containerId: string, ifName?: string, netns?: string): Promise<string[]>;
  list(): Allocation[];
  /** Why an ADD finds no address now, in the pool's words. */
  whyEmpty(): string;
  /** The agent's clock (GC leaves alone what was allocated within its grace period). */
  now(): number;
  /** The eniMode of the node's pool, once seen. */
  eniMode?(): 'Shared' | 'Exclusive' | undefined;
}

interface NetConf {
  cniVersion: string;
  name?: unknown;
  /** eni-ipam-cni itself when it is the main plugin (eniMode Exclusive); ptp's, when it is ptp's IPAM. */
  type?: unknown;
  runtimeConfig?: { bandwidth?: AddRequest['bandwidth'] };
  ipam?: { socket?: unknown; timeoutSeconds?: unknown };
  prevResult?: { ips?: Array<{ address?: unknown }> };
  'cni.dev/valid-attachments'?: unknown;
  'cni.dev/attachments'?: unknown;
}

function parseConf(stdin: string): NetConf {
  let conf: unknown;
  try {
    conf = JSON.parse(stdin);
  } catch (e) {
    throw new CniError(CNI_ERRORS.decode, 'the network configuration on stdin is not valid JSON', (e as Error).message);
  }
  if (!conf || typeof conf !== 'object' || Array.isArray(conf))
    throw new CniError(CNI_ERRORS.decode, 'the network configuration on stdin is not a JSON object');
  const c = conf as Record<string, unknown>;
  if (typeof c.cniVersion !== 'string' || !c.cniVersion)
    throw new CniError(CNI_ERRORS.invalidConfig, 'the network configuration has no cniVersion');
  if (!SUPPORTED_VERSIONS.includes(c.cniVersion)) {
    throw new CniError(
      CNI_ERRORS.incompatibleVersion,
      `cniVersion ${c.cniVersion} is not supported (supported: ${SUPPORTED_VERSIONS.join(', ')})`,
    );
  }
  const ipam = c.ipam as Record<string, unknown> | undefined;
  if (ipam !== undefined && (!ipam || typeof ipam !== 'object' || Array.isArray(ipam)))
    throw new CniError(CNI_ERRORS.invalidConfig, 'ipam must be an object');
  if (ipam?.socket !== undefined && (typeof ipam.socket !== 'string' || !ipam.socket)) {
    throw new CniError(
      CNI_ERRORS.invalidConfig,
      `ipam.socket must be the path of the eni-ipam agent socket, e.g. ${DEFAULT_SOCKET}`,
    );
  }
  if (
    ipam?.timeoutSeconds !== undefined &&
    !(typeof ipam.timeoutSeconds === 'number' && ipam.timeoutSeconds > 0 && ipam.timeoutSeconds <= 600)
  ) {
    throw new CniError(
      CNI_ERRORS.invalidConfig,
      'ipam.timeoutSeconds must be a number of seconds above 0 and at most 600, ' +
        `got ${JSON.stringify(ipam.timeoutSeconds)}`,
    );
  }
  return c as unknown as NetConf;
}

function need(env: CniRequest['env'], name: string): string {
  const v = env[name];
  if (!v)
    throw new CniError(CNI_ERRORS.invalidEnv, `${name} is not set; the container runtime sets it for every CNI call`);
  return v;
}

/** K8S_POD_NAMESPACE, K8S_POD_NAME and (containerd and CRI-O pass it) K8S_POD_UID from CNI_ARGS (`K=V;K=V`). */
function podOf(env: CniRequest['env']): PodRef {
  const args = new Map<string, string>();
  for (const kv of (env.CNI_ARGS ?? '').split(';')) {
    const eq = kv.indexOf('=');
    if (eq > 0) args.set(kv.slice(0, eq), kv.slice(eq + 1));
  }
  const ns = args.get('K8S_POD_NAMESPACE');
  const name = args.get('K8S_POD_NAME');
  const uid = args.get('K8S_POD_UID');
  return {
    pod: ns && name ? `${ns}/${name}` : `unknown/${env.CNI_CONTAINERID ?? ''}`,
    ...(uid ? { podUid: uid } : {}),
  };
}

/** `cni.dev/valid-attachments` (libcni also sets the earlier name `cni.dev/attachments`). */
function validAttachments(conf: NetConf): Set<string> {
  const list = conf['cni.dev/valid-attachments'] ?? conf['cni.dev/attachments'];
  if (!Array.isArray(list))
    throw new CniError(
      CNI_ERRORS.invalidConfig,
      'GC needs cni.dev/valid-attachments, the list of attachments still in use; without it nothing is released',
    );
  const keys = new Set<string>();
  for (const a of list as Array<Record<string, unknown>>) {
    if (!a || typeof a.containerID !== 'string' || typeof a.ifname !== 'string') {
      throw new CniError(
        CNI_ERRORS.invalidConfig,
        `every entry of cni.dev/valid-attachments needs containerID and ifname strings, got ${JSON.stringify(a)}`,
      );
    }
    keys.add(`${a.containerID}/${a.ifname}`);
  }
  return keys;
}

/** The main plugin's result (eniMode Exclusive): the pod's own ENI as its interface, in its namespace. */
function exclusiveResult(conf: NetConf, lease: Lease, ifName: string, netns: string): unknown {
  const versioned = conf.cniVersion.startsWith('0.') ? { version: '4' } : {};
  return {
    cniVersion: conf.cniVersion,
    interfaces: [{ name: ifName, mac: lease.mac, sandbox: netns }],
    ips: [{ ...versioned, address: `${lease.ip}/${lease.prefixLength}`, gateway: lease.gateway, interface: 0 }],
    routes: [{ dst: '0.0.0.0/0', gw: lease.gateway }],
    dns: {},
    eniIpam: { eniId: lease.eniId, mac: lease.mac, vSwitchCidr: lease.vSwitchCidr, exclusive: true },
  };
}

/**
 * The configuration must match the pool's eniMode: an Exclusive pool's ENI is the pod's
 * interface, set by eni-ipam-cni as the main plugin; a Shared pool's addresses go on ptp's veth.
 */
function checkMode(conf: NetConf, mode: 'Shared' | 'Exclusive' | undefined): void {
  const main = conf.type === 'eni-ipam-cni';
  if (mode === 'Exclusive' && !main)
    throw new CniError(
      CNI_ERRORS.invalidConfig,
      "this node's ENIPool is eniMode Exclusive: the CNI configuration must run eni-ipam-cni as the main plugin " +
        '(examples/10-eni-ipam-exclusive.conflist), not as the IPAM of ' +
        `${typeof conf.type === 'string' ? conf.type : 'another plugin'}`,
    );
  if (mode === 'Shared' && main)
    throw new CniError(
      CNI_ERRORS.invalidConfig,
      "this node's ENIPool is eniMode Shared: eni-ipam-cni is the IPAM of ptp there " +
        '(examples/10-eni-ipam.conflist); as the main plugin it serves Exclusive pools only',
    );
}

function addResult(conf: NetConf, lease: Lease): unknown {
  // Results before 1.0.0 carry the IP version in each address. An IPv6-only pod's one address is IPv6.
  const versioned = (v: '4' | '6') => (conf.cniVersion.startsWith('0.') ? { version: v } : {});
  const six = isIpv6(lease.ip);
  const version = versioned(six ? '6' : '4');
  // Dual-stack: the IPv6 address too, with its link-local gateway (POD_IPV6_GATEWAY).
  const v6 = lease.ipv6;
  const version6 = versioned('6');
  return {
    cniVersion: conf.cniVersion,
    ips: [
      { ...version, address: `${lease.ip}/${lease.prefixLength}`, gateway: lease.gateway },
      ...(v6 ? [{ ...version6, address: `${v6.ip}/${v6.prefixLength}`, gateway: v6.gateway }] : []),
    ],
    routes: [{ dst: six ? '::/0' : '0.0.0.0/0', gw: lease.gateway }, ...(v6 ? [{ dst: '::/0', gw: v6.gateway }] : [])],
    dns: {},
    eniIpam: { eniId: lease.eniId, mac: lease.mac, vSwitchCidr: lease.vSwitchCidr },
  };
}

/** Runs one command; answers its result (undefined for an empty stdout) or throws a CniError. */
async function run(agent: CniAgent, req: CniRequest, now: number): Promise<unknown> {
  const command = need(req.env, 'CNI_COMMAND');
  if (command === 'VERSION') return { cniVersion: '1.0.0', supportedVersions: SUPPORTED_VERSIONS };
  const conf = parseConf(req.stdin);
  const network = typeof conf.name === 'string' ? conf.name : undefined;
  const since = SINCE[command];
  if (since && SUPPORTED_VERSIONS.indexOf(conf.cniVersion) < SUPPORTED_VERSIONS.indexOf(since)) {
    throw new CniError(
      CNI_ERRORS.incompatibleVersion,
      `cniVersion ${conf.cniVersion} has no ${command}; it came with ${since}`,
    );
  }
  if (command === 'STATUS') {
    if (!agent.ready)
      throw new CniError(
        CNI_ERRORS.pluginNotAvailable,
        'the eni-ipam agent has not seen this node’s ENIPool yet; is the operator running?',
      );
    return undefined;
  }
  if (command === 'GC') {
    const valid = validAttachments(conf);
    for (const a of agent.list()) {
      // Only what this network handed out, and not in the last minute; never what another client of the socket took.
      if (
        !network ||
        a.network !== network ||
        valid.has(`${a.containerId}/${a.ifName}`) ||
        now - a.allocatedAt < GC_GRACE_MS
      )
        continue;
      await agent.removePod(a.containerId, a.ifName);
    }
    return undefined;
  }
  if (command !== 'ADD' && command !== 'DEL' && command !== 'CHECK') {
    throw new CniError(
      CNI_ERRORS.invalidEnv,
      `CNI_COMMAND ${command} is not one of ADD, DEL, CHECK, STATUS, GC, VERSION`,
    );
  }
  const containerId = need(req.env, 'CNI_CONTAINERID');
  const ifName = need(req.env, 'CNI_IFNAME');
  if (command === 'ADD') {
    const netns = need(req.env, 'CNI_NETNS');
    checkMode(conf, agent.eniMode?.());
    const bandwidth = conf.runtimeConfig?.bandwidth;
    let lease: Lease | 'pool-empty';
    try {
      lease = await agent.addPod({
        containerId,
        ifName,
        ...podOf(req.env),
        network,
        netns,
        ...(bandwidth && typeof bandwidth === 'object' ? { bandwidth } : {}),
      });
    } catch (e) {
      // A device that has not appeared yet may appear: the runtime tries again. Anything else is an I/O failure.
      if (e instanceof DatapathError)
        throw new CniError(e.transient ? CNI_ERRORS.tryAgainLater : CNI_ERRORS.io, e.message, `reason: ${e.reason}`);
      throw e;
    }
    if (lease === 'pool-empty')
      throw new CniError(
        CNI_ERRORS.tryAgainLater,
        agent.eniMode?.() === 'Exclusive'
          ? `no free exclusive ENI on this node yet: ${agent.whyEmpty()}`
          : `no free pod IP on this node yet: ${agent.whyEmpty()}`,
      );
    return lease.exclusive ? exclusiveResult(conf, lease, ifName, netns) : addResult(conf, lease);
  }
  if (command === 'DEL') {
    // CNI_NETNS may be empty on DEL (the namespace is gone); where given, a device is looked for there.
    await agent.removePod(containerId, ifName, req.env.CNI_NETNS || undefined);
    return undefined;
  }
  // The interface's first address: IPv4, or IPv6 in an IPv6-only pool (a dual-stack one holds both).
  const held = agent.list().filter((a) => a.containerId === containerId && a.ifName === ifName);
  const mine = held.find((a) => !isIpv6(a.ip)) ?? held[0];
  if (!mine)
    throw new CniError(
      CNI_ERRORS.unknownContainer,
      `the eni-ipam agent has no address for container ${containerId} (${ifName})`,
    );
  const expected = conf.prevResult?.ips?.[0]?.address;
  if (typeof expected === 'string' && expected.split('/')[0] !== mine.ip)
    throw new CniError(
      CNI_ERRORS.io,
      `container ${containerId} holds ${mine.ip}, but its previous result says ${expected}`,
    );
  return undefined;
}

/** The cniVersion of an error: the configuration's when it is one we speak. */
function errorVersion(stdin: string): string {
  try {
    const v = (JSON.parse(stdin) as { cniVersion?: unknown }).cniVersion;
    if (typeof v === 'string' && SUPPORTED_VERSIONS.includes(v)) return v;
  } catch {
    // not JSON: the default below
  }
  return '1.0.0';
}

/**
 * One CNI IPAM call, answered as the plugin must: ADD prints the pod's address with the
 * vSwitch prefix length, the gateway and a default route, plus `eniIpam` {eniId, mac,
 * vSwitchCidr} so that a main plugin (ipvlan on the ENI) can find the device; DEL is
 * idempotent; CHECK verifies the allocation; STATUS says whether the agent can serve; GC
 * releases this network's allocations the runtime no longer lists; VERSION lists the
 * versions. Errors are the spec's error objects, exit code 1.
 */
export async function answerCni(agent: CniAgent, req: CniRequest): Promise<CniAnswer> {
  const now = agent.now();
  try {
    const result = await run(agent, req, now);
    return { stdout: result === undefined ? '' : `${JSON.stringify(result)}\n`, exitCode: 0 };
  } catch (e) {
    const err =
      e instanceof CniError ? e : new CniError(CNI_ERRORS.io, `the eni-ipam agent failed: ${(e as Error).message}`);
    const out = {
      cniVersion: errorVersion(req.stdin),
      code: err.code,
      msg: err.message,
      ...(err.details ? { details: err.details } : {}),
    };
    return { stdout: `${JSON.stringify(out)}\n`, exitCode: 1 };
  }
}
