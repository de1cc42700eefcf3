import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { exec } from './exec.js';
import { highestFree, type WorldView } from './plan.js';

/** The host in the VPC outside the cluster, for tests: its address and what it serves. */
export interface VpcHost {
  netns: string;
  ip: string;
  /** Its IPv6 address, where its vSwitch has an IPv6 CIDR (it serves the same on it). */
  ipv6?: string;
  vSwitchId: string;
  gateway: string;
  mac: string;
  mtu: number;
  /**
   * Its services, by port: ping (the kernel), a TCP echo server, an HTTP server that answers
   * `GET /` with `{"server":"<its address>","client":"<the caller's address>"}` (so a test sees
   * the source address that arrived), and `iperf3 -s` (absent when iperf3 is not installed).
   */
  ports: { echo: number; http: number; iperf3?: number };
}

/** The ports the vpc-host serves on. */
export const HOST_PORTS = { echo: 7, http: 80, iperf3: 5201 } as const;

/**
 * Where the vpc-host sits: the vSwitch asked for, else the last vSwitch of the VPC (in the
 * fixture's order) that holds no instance's primary ENI (in the default world `vsw-j-pods`, a
 * vSwitch of its own apart from the node vSwitches); the address asked for, else the highest free
 * one below the gateway (the emulator hands addresses out from the bottom).
 */
export function choosePlace(
  world: WorldView,
  vpcId: string,
  taken: (vSwitchId: string, ip: string) => boolean,
  asked: { vSwitchId?: string; ip?: string } = {},
): { vSwitchId: string; ip: string } {
  const inVpc = world.vSwitches.filter((v) => v.vpcId === vpcId);
  if (asked.vSwitchId && !inVpc.some((v) => v.id === asked.vSwitchId))
    throw new Error(
      `vpc-host: vSwitch ${asked.vSwitchId} is not in VPC ${vpcId}; pick one of ${inVpc.map((v) => v.id).join(', ')}`,
    );
  const nodeVsw = new Set(world.enis.filter((e) => e.type === 'Primary' && e.instanceId).map((e) => e.vSwitchId));
  const vsw =
    inVpc.find((v) => v.id === asked.vSwitchId) ?? [...inVpc].reverse().find((v) => !nodeVsw.has(v.id)) ?? inVpc.at(-1);
  if (!vsw) throw new Error(`vpc-host: VPC ${vpcId} has no vSwitch`);
  const ip = asked.ip ?? highestFree(vsw.cidr, (a) => taken(vsw.id, a));
  if (!ip) throw new Error(`vpc-host: vSwitch ${vsw.id} (${vsw.cidr}) has no free address; pick another vSwitch`);
  return { vSwitchId: vsw.id, ip };
}

// The echo and HTTP servers, in one small program run in the host's namespace.
const SERVERS = `
const net = require('net'), http = require('http');
const [echoPort, httpPort, ip] = process.argv.slice(1);
const echo = net.createServer((s) => { s.on('error', () => {}); s.pipe(s); });
const web = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ server: ip, client: req.socket.remoteAddress.replace(/^::ffff:/, '') }) + '\\n');
});
let up = 0;
const ready = () => { if (++up === 2) process.stdout.write('ready\\n'); };
// '::' takes IPv4 too (as ::ffff:a.b.c.d, stripped above).
echo.listen(Number(echoPort), '::', ready);
web.listen(Number(httpPort), '::', ready);
process.on('SIGTERM', () => process.exit(0));
`;

const hasIperf3 = (): boolean => {
  try {
    execFileSync('sh', ['-c', 'command -v iperf3'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

async function untilListening(netns: string, port: number, child: ChildProcess, what: string): Promise<void> {
  const end = Date.now() + 10_000;
  while (Date.now() < end) {
    if (child.exitCode !== null) throw new Error(`vpc-host: ${what} exited (${child.exitCode})`);
    const r = await exec('ip', ['netns', 'exec', netns, 'ss', '-Hltn', `sport = :${port}`]);
    if (r.stdout.trim()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`vpc-host: ${what} does not listen on :${port} after 10 s`);
}

/** Starts the vpc-host's services in its namespace; answers the ports served and how to stop them. */
export async function startHostServices(
  netns: string,
  ip: string,
): Promise<{ ports: VpcHost['ports']; stop(): Promise<void> }> {
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(
      children.map(async (c) => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        c.kill('SIGTERM');
        const killer = setTimeout(() => c.kill('SIGKILL'), 2000);
        await once(c, 'exit').catch(() => undefined);
        clearTimeout(killer);
      }),
    );
  };
  try {
    const servers = spawn(
      'ip',
      ['netns', 'exec', netns, process.execPath, '-e', SERVERS, String(HOST_PORTS.echo), String(HOST_PORTS.http), ip],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(servers);
    let stderr = '';
    servers.stderr!.on('data', (d) => (stderr += d));
    await new Promise<void>((resolve, reject) => {
      servers.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
      servers.on('exit', (code) => reject(new Error(`vpc-host: its servers exited (${code}): ${stderr.trim()}`)));
    });
    const ports: VpcHost['ports'] = { echo: HOST_PORTS.echo, http: HOST_PORTS.http };
    if (hasIperf3()) {
      const iperf = spawn('ip', ['netns', 'exec', netns, 'iperf3', '-s', '-p', String(HOST_PORTS.iperf3)], {
        stdio: 'ignore',
      });
      children.push(iperf);
      await untilListening(netns, HOST_PORTS.iperf3, iperf, 'iperf3 -s');
      ports.iperf3 = HOST_PORTS.iperf3;
    }
    return { ports, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
