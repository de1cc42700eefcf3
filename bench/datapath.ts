import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Agent, ENI_RESOURCE } from '../src/agent/agent.js';
import { serveAgentApi } from '../src/agent/api.js';
import { IpRouteKernel } from '../src/agent/datapath/kernel.js';
import { installCni } from '../src/agent/install-cni.js';
import { CRDS } from '../src/api/crds.js';
import { API_VERSION, GROUP, VERSION, type ENIPool, type ENIPoolClass } from '../src/api/types.js';
import { createCloudClient, staticCredentials } from '../src/cloud/index.js';
import { DEFAULT_OPERATOR_CONFIG } from '../src/operator/config.js';
import { Operator } from '../src/operator/operator.js';
import { silentLogger } from '../src/observability/logger.js';
import { CniRuntime, parseNetworkConfig, type Attachment } from '../testbed/cluster/runtime/cni.js';
import { defaultWorld, nodeObject, startEcsEmulator } from '../testbed/ecs/index.js';
import { startKubeEmulator } from '../testbed/kube/index.js';
import { startVpc, vpcUnavailable } from '../testbed/vpc/index.js';
import { BENCH_DIR, percentile, writeResults } from './report.js';

/*
 * The three paths a packet between two nodes' pods can take on the strict VPC emulation, in one
 * run: an exclusive ENI in each pod (eniMode Exclusive: the ENI's device is the pod's eth0), the
 * shared path (a veth per pod, policy routing out of the ENI), and the nodes' own interfaces
 * (host to host, the ceiling). iperf3 with one and four streams, and ping round trips; each path
 * measured in turn, several rounds, the median kept. The emulated VPC is veth pairs in one kernel:
 * the figures are relative, not what a real NIC gives.
 */

export interface DatapathBenchOptions {
  rounds: number;
  seconds: number;
  pings: number;
}

const ROOT = join(BENCH_DIR, '..');
const SYSTEM_CNI_DIR = '/usr/lib/cni';
const P = `eipb${process.pid % 10000}-`;
const KEY = { accessKeyId: 'demo', accessKeySecret: 'demo-secret' };

type Path = 'exclusive' | 'shared' | 'host';
interface Endpoint {
  netns: string;
  ip: string;
}

function sh(cmd: string, args: string[], o: { stdin?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      cmd,
      args,
      { env: o.env ?? process.env, timeout: o.timeoutMs ?? 60_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(o.stdin ?? '');
  });
}
async function inNs(ns: string, ...argv: string[]): Promise<string> {
  const r = await sh('ip', ['netns', 'exec', ns, ...argv]);
  if (r.code !== 0) throw new Error(`[${ns}] ${argv.join(' ')} failed: ${r.stderr || r.stdout}`);
  return r.stdout;
}
async function until<T>(f: () => Promise<T | undefined | false>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v) return v;
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

/** Round-trip times of a ping run, in ms, from its `time=` lines. */
export function pingTimes(output: string): number[] {
  return [...output.matchAll(/time=([\d.]+) ms/g)].map((m) => Number(m[1]));
}

/** The median of a list (the middle one of an odd count). */
export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)] ?? NaN;

async function iperf(from: Endpoint, to: Endpoint, streams: number, seconds: number, port: number): Promise<number> {
  const server = spawn('ip', ['netns', 'exec', to.netns, 'iperf3', '-s', '-1', '-p', String(port)], {
    stdio: 'ignore',
  });
  try {
    await until(
      async () => (await inNs(to.netns, 'ss', '-Hltn', `sport = :${port}`)).includes(String(port)),
      5000,
      'iperf3 -s',
    );
    const out = await inNs(
      from.netns,
      'iperf3',
      '-c',
      to.ip,
      '-p',
      String(port),
      '-t',
      String(seconds),
      '-P',
      String(streams),
      '-J',
    );
    return (JSON.parse(out) as { end: { sum_received: { bits_per_second: number } } }).end.sum_received.bits_per_second;
  } finally {
    server.kill('SIGKILL');
  }
}

export async function datapathBench(o: DatapathBenchOptions): Promise<void> {
  const why = vpcUnavailable();
  if (why) throw new Error(`the datapath benchmark needs the strict VPC emulation: ${why}`);
  for (const p of ['ptp', 'bandwidth'])
    if (!existsSync(join(SYSTEM_CNI_DIR, p)))
      throw new Error(`${SYSTEM_CNI_DIR}/${p} is missing (Debian package containernetworking-plugins)`);
  const children: ChildProcess[] = [];
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    const fixture = defaultWorld();
    fixture.delays = { attachMs: 60, detachMs: 60, deleteMs: 30 };
    const ecs = await startEcsEmulator({ fixture });
    cleanups.push(() => ecs.close());
    const kube = await startKubeEmulator({});
    cleanups.push(() => kube.close());
    const kc = new KubeConfig();
    kc.loadFromString(kube.kubeconfig);
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    for (const crd of Object.values(CRDS)) await ext.createCustomResourceDefinition({ body: crd as never });
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
    const addClass = (name: string, spec: ENIPoolClass['spec']) =>
      custom.createClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: 'enipoolclasses',
        body: { apiVersion: API_VERSION, kind: 'ENIPoolClass', metadata: { name }, spec },
      });
    const common = { securityGroupIDs: ['sg-demo-pods'], vSwitchIDs: ['vsw-h-pods'], releaseDelaySeconds: 600 };
    await addClass('exclusive', {
      ...common,
      eniMode: 'Exclusive',
      preAllocate: 1,
      nodeSelector: { matchLabels: { bench: 'exclusive' } },
    });
    await addClass('shared', { ...common, preAllocate: 2, nodeSelector: { matchLabels: { bench: 'shared' } } });
    // The client asks the operator whether it may change the cloud; the operator needs the client.
    const ref: { operator?: Operator } = {};
    const client = createCloudClient({
      region: 'cn-hangzhou',
      ecsEndpoint: ecs.url,
      vpcEndpoint: ecs.url,
      credentials: staticCredentials(KEY),
      registry: new Registry(),
      mayMutate: () => ref.operator?.mayMutate() ?? false,
    });
    const operator = new Operator({
      kc,
      api: client.api,
      logger: silentLogger(),
      config: {
        ...DEFAULT_OPERATOR_CONFIG,
        clusterId: 'c-bench',
        vpcId: 'vpc-demo',
        pollMinIntervalMs: 50,
        pollMaxIntervalMs: 400,
      },
      credentialsSource: staticCredentials(KEY).source,
    });
    ref.operator = operator;
    await operator.start();
    cleanups.push(() => operator.stop());
    // Two nodes per path in zone h: ecs.g7.large for the exclusive pods, ecs.g7.xlarge for the others.
    const plan = [
      { instance: 'i-demo-01', label: 'exclusive' },
      { instance: 'i-demo-13', label: 'exclusive' },
      { instance: 'i-demo-04', label: 'shared' },
      { instance: 'i-demo-10', label: 'shared' },
    ];
    const names: string[] = [];
    for (const p of plan) {
      const node = nodeObject(ecs.world, p.instance, { bench: p.label });
      await core.createNode({ body: node as never });
      names.push(node.metadata.name);
    }
    const bin = mkdtempSync(join(tmpdir(), 'bench-cni-bin-'));
    const conf = mkdtempSync(join(tmpdir(), 'bench-cni-conf-'));
    const conflists = {
      exclusive: join(ROOT, 'examples/10-eni-ipam-exclusive.conflist'),
      shared: join(ROOT, 'examples/10-eni-ipam.conflist'),
    };
    for (const c of Object.values(conflists))
      installCni({ binDir: bin, confDir: conf, conflist: c, pluginBinary: join(ROOT, 'dist', 'bin', 'eni-ipam-cni') });
    const netnses = plan.map((_, k) => `${P}node${k + 1}`);
    for (const ns of netnses) {
      await sh('ip', ['netns', 'add', ns]);
      await inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
    }
    cleanups.push(async () => {
      for (const line of (await sh('ip', ['netns', 'list'])).stdout.split('\n'))
        if (line.startsWith(P)) await sh('ip', ['netns', 'del', line.split(' ')[0]!]);
    });
    const vpc = await startVpc({
      world: ecs.world,
      nodes: plan.map((p, k) => ({ instanceId: p.instance, netns: netnses[k]! })),
      prefix: P,
    });
    cleanups.unshift(() => vpc.stop());
    const endpoints: Partial<Record<Path, Endpoint[]>> = { host: [] };
    for (const [k, p] of plan.entries()) {
      const dir = mkdtempSync(join(tmpdir(), `bench-agent-${k}-`));
      const agent = new Agent({
        kc,
        node: names[k]!,
        stateDir: dir,
        cooldownMs: 1000,
        statusIntervalMs: 100,
        logger: silentLogger(),
        registry: new Registry(),
        datapath: {
          config: { tableBase: 3000, mtu: 1500 },
          kernel: new IpRouteKernel({ netns: netnses[k]! }),
          nodeNetns: `/run/netns/${netnses[k]!}`,
        },
      });
      await agent.start();
      const server: Server = await serveAgentApi(agent, join(dir, 'agent.sock'));
      cleanups.unshift(async () => {
        server.close();
        await agent.stop();
        rmSync(dir, { recursive: true, force: true });
      });
      await until(async () => agent.ready, 30_000, `agent of ${names[k]}`);
      const pool = await until(
        async () => {
          const got = (await custom.getClusterCustomObject({
            group: GROUP,
            version: VERSION,
            plural: 'enipools',
            name: names[k]!,
          })) as ENIPool;
          return got.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? got : undefined;
        },
        60_000,
        `pool ${names[k]} Ready`,
      );
      void pool;
      // The node's own address on its primary interface (host to host).
      const eth0 = JSON.parse(await inNs(netnses[k]!, 'ip', '-j', '-4', 'addr', 'show', 'dev', 'eth0')) as Array<{
        addr_info: Array<{ local: string }>;
      }>;
      endpoints.host!.push({ netns: netnses[k]!, ip: eth0[0]!.addr_info[0]!.local });
      // One pod, started as the runtime starts it, through the node's conflist.
      const path = p.label as 'exclusive' | 'shared';
      const conflist = conflists[path];
      const list = parseNetworkConfig(conflist, readFileSync(conflist, 'utf8'));
      const runtime = new CniRuntime({
        cniPath: [bin, SYSTEM_CNI_DIR],
        exists: existsSync,
        run: (plugin, env, stdin) =>
          sh(
            'ip',
            [
              'netns',
              'exec',
              netnses[k]!,
              'unshare',
              '--mount',
              'sh',
              '-c',
              'mount --bind "$SOCKET_DIR" /run/eni-ipam && exec "$PLUGIN"',
            ],
            {
              stdin,
              env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env, SOCKET_DIR: dir, PLUGIN: plugin },
            },
          ),
      });
      const name = `bench-${k}`;
      await core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name },
          spec: {
            nodeName: names[k]!,
            containers: [
              {
                name: 'main',
                image: 'x',
                ...(path === 'exclusive' ? { resources: { limits: { [ENI_RESOURCE]: '1' } } } : {}),
              },
            ],
          },
        },
      });
      const podNs = `${P}pod${k}`;
      await sh('ip', ['netns', 'add', podNs]);
      const attachment: Attachment = {
        containerId: `ctr-${name}`,
        netns: `/var/run/netns/${podNs}`,
        ifName: 'eth0',
        args: [
          ['IgnoreUnknown', '1'],
          ['K8S_POD_NAMESPACE', 'default'],
          ['K8S_POD_NAME', name],
        ],
        capabilityArgs: {},
      };
      const result = (await until(() => runtime.add(list, attachment), 30_000, `ADD of ${name}`)) as {
        ips: Array<{ address: string }>;
      };
      (endpoints[path] ??= []).push({ netns: podNs, ip: result.ips[0]!.address.split('/')[0]! });
    }
    const paths: Path[] = ['exclusive', 'shared', 'host'];
    for (const path of paths)
      await inNs(endpoints[path]![0]!.netns, 'ping', '-c', '3', '-W', '2', endpoints[path]![1]!.ip);

    type Sample = { single: number; four: number; rtt: number[] };
    const samples: Record<Path, Sample[]> = { exclusive: [], shared: [], host: [] };
    const loads: number[] = [];
    let port = 5301;
    for (let round = 0; round < o.rounds; round++) {
      for (const path of paths) {
        const [a, b] = endpoints[path]!;
        loads.push(loadavg()[0]!);
        const single = await iperf(a!, b!, 1, o.seconds, port++);
        const four = await iperf(a!, b!, 4, o.seconds, port++);
        const out = await inNs(a!.netns, 'ping', '-c', String(o.pings), '-i', '0.01', '-W', '2', b!.ip);
        samples[path].push({ single, four, rtt: pingTimes(out) });
      }
    }
    const summaryOf = (path: Path) => {
      const rtt = samples[path].flatMap((s) => s.rtt).sort((x, y) => x - y);
      return {
        singleBps: median(samples[path].map((s) => s.single)),
        fourBps: median(samples[path].map((s) => s.four)),
        rttP50Ms: percentile(rtt, 50),
        rttP99Ms: percentile(rtt, 99),
        pings: rtt.length,
      };
    };
    type Summary = ReturnType<typeof summaryOf>;
    const r = { exclusive: summaryOf('exclusive'), shared: summaryOf('shared'), host: summaryOf('host') };
    const gbit = (bps: number) => `${(bps / 1e9).toFixed(2)} Gbit/s`;
    const ms = (v: number) => `${v.toFixed(3)} ms`;
    const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
    // The expectation, in three parts: no slower than shared, closer to the host's, and a shorter round trip.
    const fast = r.exclusive.singleBps >= 0.95 * r.shared.singleBps && r.exclusive.fourBps >= 0.95 * r.shared.fourBps;
    const gap = (x: Summary) => Math.abs(Math.log(x.singleBps / r.host.singleBps));
    const closer = gap(r.exclusive) < gap(r.shared);
    const quicker = r.exclusive.rttP50Ms <= r.shared.rttP50Ms;
    const said = (ok: boolean) => (ok ? 'met' : 'NOT met');
    writeResults(
      {
        scenario: 'datapath',
        command: `npm run bench -- datapath --rounds ${o.rounds} --seconds ${o.seconds} --pings ${o.pings}`,
        summary: {
          'iperf3, 1 stream: exclusive / shared / host': `${gbit(r.exclusive.singleBps)} / ${gbit(r.shared.singleBps)} / ${gbit(r.host.singleBps)}`,
          'iperf3, 4 streams: exclusive / shared / host': `${gbit(r.exclusive.fourBps)} / ${gbit(r.shared.fourBps)} / ${gbit(r.host.fourBps)}`,
          'exclusive ÷ shared (1 / 4 streams)': `${ratio(r.exclusive.singleBps, r.shared.singleBps)} / ${ratio(r.exclusive.fourBps, r.shared.fourBps)}`,
          'exclusive ÷ host; shared ÷ host (1 stream)': `${ratio(r.exclusive.singleBps, r.host.singleBps)}; ${ratio(r.shared.singleBps, r.host.singleBps)}`,
          'ping p50 / p99: exclusive; shared; host': `${ms(r.exclusive.rttP50Ms)} / ${ms(r.exclusive.rttP99Ms)}; ${ms(r.shared.rttP50Ms)} / ${ms(r.shared.rttP99Ms)}; ${ms(r.host.rttP50Ms)} / ${ms(r.host.rttP99Ms)}`,
        },
        target:
          'the exclusive path at least as fast as the shared one (within 5%), closer to the host-to-host figure than the shared one, and a round trip no longer than the shared one',
        met: fast && closer && quicker,
        note:
          `Throughput no slower than shared: ${said(fast)}; closer to host to host: ${said(closer)}; round trip: ${said(quicker)}. ` +
          `Two pods on two nodes per path, on the strict VPC emulation (each ENI's addresses delivered to its own device only, spoofed sources dropped): ` +
          `an exclusive ENI in each pod (its device is the pod's eth0), the shared path (a veth per pod and policy routing out of the ENI), and the nodes' own eth0 (host to host, the ceiling). ` +
          `Each path measured in turn, ${o.rounds} rounds of iperf3 (${o.seconds} s, 1 and 4 streams) and ${o.pings} pings 10 ms apart; throughput is the median round, ping percentiles over all rounds. ` +
          `The emulated VPC is veth pairs in one kernel, so every path costs this machine's CPU and the figures are relative, not what a real NIC gives. ` +
          `In particular an emulated ENI device segments what it sends one MTU-sized packet at a time (gso_max_segs 1, so that the VPC's checks see the packets a wire carries), where a real ENI's virtio device segments in hardware (TSO): ` +
          `that costs a TCP stack sitting on the device itself (an exclusive pod's, and the node's own, host to host) a packet's worth of work per segment, while a shared pod's stack hands 64 KiB to its veth and the node segments it once as it forwards. ` +
          `So on this emulation the exclusive path tracks host to host, its ceiling, and its round trip is the shortest (no veth, no host routing), but its throughput is below the shared path's; on a real node both stacks on an ENI device get the NIC's segmentation. ` +
          `1-minute load average ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} on ${cpus().length} cores.`,
      },
      { options: o, results: r, samples, cores: cpus().length },
    );
    console.log(JSON.stringify(r, null, 2));
  } finally {
    for (const c of children) c.kill('SIGKILL');
    // Each step at most 10 s: a run that failed midway still leaves no namespace behind.
    for (const f of cleanups)
      await Promise.race([f().catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
  }
}
