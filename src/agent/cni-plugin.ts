import http from 'node:http';

/** CNI error codes (spec 1.0.0 and 1.1.0 for STATUS). */
export const CNI_ERRORS = { incompatibleVersion: 1, unsupportedField: 2, unknownContainer: 3, invalidEnv: 4, io: 5, decode: 6, invalidConfig: 7, tryAgainLater: 11, pluginNotAvailable: 50 } as const;
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];

export class CniError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly details = '',
  ) {
    super(message);
  }
}

export interface CniInput {
  env: Record<string, string | undefined>;
  stdin: string;
}

interface NetConf {
  cniVersion: string;
  name?: string;
  ipam?: { type?: string; socket?: string; timeoutSeconds?: number };
  prevResult?: { ips?: Array<{ address: string }> };
}

export interface AgentTransport {
  request(socket: string, method: string, path: string, body: unknown, timeoutMs: number): Promise<{ status: number; body: Record<string, unknown> }>;
}

/** The agent's API over its unix socket. */
export const socketTransport: AgentTransport = {
  request: (socket, method, path, body, timeoutMs) =>
    new Promise((resolve, reject) => {
      const req = http.request({ socketPath: socket, path, method, headers: { 'content-type': 'application/json' }, timeout: timeoutMs }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text || '{}') });
          } catch {
            reject(new CniError(CNI_ERRORS.io, 'the eni-ipam agent answered something that is not JSON'));
          }
        });
      });
      req.on('timeout', () => req.destroy(new CniError(CNI_ERRORS.tryAgainLater, `the eni-ipam agent did not answer within ${timeoutMs} ms`)));
      req.on('error', (e) =>
        reject(e instanceof CniError ? e : new CniError(CNI_ERRORS.tryAgainLater, `cannot reach the eni-ipam agent at ${socket}: ${(e as NodeJS.ErrnoException).code ?? e.message}; is the agent running on this node?`)),
      );
      req.end(body === undefined ? undefined : JSON.stringify(body));
    }),
};

function parseConf(stdin: string): NetConf {
  let conf: NetConf;
  try {
    conf = JSON.parse(stdin);
  } catch (e) {
    throw new CniError(CNI_ERRORS.decode, 'the network configuration on stdin is not valid JSON', (e as Error).message);
  }
  if (!conf || typeof conf !== 'object') throw new CniError(CNI_ERRORS.decode, 'the network configuration on stdin is not a JSON object');
  if (!conf.cniVersion) throw new CniError(CNI_ERRORS.invalidConfig, 'the network configuration has no cniVersion');
  if (!SUPPORTED_VERSIONS.includes(conf.cniVersion)) {
    throw new CniError(CNI_ERRORS.incompatibleVersion, `cniVersion ${conf.cniVersion} is not supported (supported: ${SUPPORTED_VERSIONS.join(', ')})`);
  }
  if (!conf.ipam?.socket) throw new CniError(CNI_ERRORS.invalidConfig, 'ipam.socket is missing: set it to the eni-ipam agent socket, e.g. /run/eni-ipam/agent.sock');
  return conf;
}

function need(env: CniInput['env'], name: string): string {
  const v = env[name];
  if (!v) throw new CniError(CNI_ERRORS.invalidEnv, `${name} is not set; the container runtime sets it for every CNI call`);
  return v;
}

/** K8S_POD_NAMESPACE and K8S_POD_NAME from CNI_ARGS (`K=V;K=V`). */
function podOf(env: CniInput['env']): string {
  const args = Object.fromEntries((env.CNI_ARGS ?? '').split(';').filter(Boolean).map((kv) => kv.split('=') as [string, string]));
  return args.K8S_POD_NAMESPACE && args.K8S_POD_NAME ? `${args.K8S_POD_NAMESPACE}/${args.K8S_POD_NAME}` : `unknown/${env.CNI_CONTAINERID ?? ''}`;
}

/**
 * One CNI IPAM call. ADD answers the pod's address with the vSwitch prefix length, the
 * gateway and a default route, plus `eniIpam` {eniId, mac, vSwitchCidr} so that a main plugin
 * (ipvlan on the ENI) can find the device; DEL is idempotent; CHECK verifies the allocation;
 * VERSION lists the versions; STATUS says whether the agent can serve.
 */
export async function runCni(input: CniInput, transport: AgentTransport = socketTransport): Promise<unknown> {
  const command = need(input.env, 'CNI_COMMAND');
  if (command === 'VERSION') return { cniVersion: '1.0.0', supportedVersions: SUPPORTED_VERSIONS };
  const conf = parseConf(input.stdin);
  const socket = conf.ipam!.socket!;
  const timeoutMs = (conf.ipam?.timeoutSeconds ?? 10) * 1000;
  if (command === 'STATUS') {
    try {
      const r = await transport.request(socket, 'GET', '/v1/allocations', undefined, timeoutMs);
      if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
    } catch (e) {
      throw new CniError(CNI_ERRORS.pluginNotAvailable, `the eni-ipam agent is not available: ${(e as Error).message}`);
    }
    return undefined;
  }
  const containerId = need(input.env, 'CNI_CONTAINERID');
  const ifName = need(input.env, 'CNI_IFNAME');
  if (command === 'ADD') {
    need(input.env, 'CNI_NETNS');
    const r = await transport.request(socket, 'POST', '/v1/allocate', { containerId, ifName, pod: podOf(input.env) }, timeoutMs);
    if (r.status === 503) throw new CniError(CNI_ERRORS.tryAgainLater, `no free pod IP on this node yet (${String(r.body.message ?? 'pool empty')})`);
    if (r.status !== 200) throw new CniError(CNI_ERRORS.io, `the eni-ipam agent refused the allocation: ${String(r.body.message ?? r.status)}`);
    const lease = r.body.lease as { ip: string; prefixLength: number; gateway: string; eniId: string; mac: string; vSwitchCidr: string };
    return {
      cniVersion: conf.cniVersion,
      ips: [{ address: `${lease.ip}/${lease.prefixLength}`, gateway: lease.gateway }],
      routes: [{ dst: '0.0.0.0/0', gw: lease.gateway }],
      dns: {},
      eniIpam: { eniId: lease.eniId, mac: lease.mac, vSwitchCidr: lease.vSwitchCidr },
    };
  }
  if (command === 'DEL') {
    const r = await transport.request(socket, 'POST', '/v1/release', { containerId, ifName }, timeoutMs);
    if (r.status !== 200) throw new CniError(CNI_ERRORS.io, `the eni-ipam agent refused the release: ${String(r.body.message ?? r.status)}`);
    return undefined;
  }
  if (command === 'CHECK') {
    const r = await transport.request(socket, 'GET', '/v1/allocations', undefined, timeoutMs);
    const mine = ((r.body.allocations ?? []) as Array<{ containerId: string; ifName: string; ip: string }>).find((a) => a.containerId === containerId && a.ifName === ifName);
    if (!mine) throw new CniError(CNI_ERRORS.unknownContainer, `the eni-ipam agent has no address for container ${containerId} (${ifName})`);
    const expected = conf.prevResult?.ips?.[0]?.address?.split('/')[0];
    if (expected && expected !== mine.ip) throw new CniError(CNI_ERRORS.io, `container ${containerId} holds ${mine.ip}, but its previous result says ${expected}`);
    return undefined;
  }
  throw new CniError(CNI_ERRORS.invalidEnv, `CNI_COMMAND ${command} is not one of ADD, DEL, CHECK, VERSION, STATUS`);
}
