import { execFile, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import ts from 'typescript';
import { agentRequest } from '../src/agent/client.js';
import { StateFile } from '../src/agent/state-file.js';
import { CRDS } from '../src/api/crds.js';
import { startKubeEmulator } from '../testbed/kube/index.js';
import { BENCH_DIR, percentile, writeResults } from './report.js';
import { agentArgs, servingOf } from '../testbed/harness/process.js';

export interface CniPluginOptions {
  runs: number;
  parallel: number;
  rounds: number;
}

const ROOT = join(BENCH_DIR, '..');
const PLUGIN = join(ROOT, 'dist', 'bin', 'eni-ipam-cni');
const CLI = fileURLToPath(new URL('../../bin/eni-ipam', import.meta.url));
/** The last commit whose eni-ipam-cni was the Node.js program (src/cli/cni-main.ts). */
const NODE_PLUGIN_COMMIT = '86ac3462a94c1a7c7fb194600aa728b5745bf4bc';
const STARTUP_MS = 5;
const STARTUP_MIB = 5;
const ADD_P99_MS = 10;

interface Run {
  ms: number;
  rssKiB: number;
  exit: number;
}

/** The helper that runs a program N times and reports wall time and peak memory per run (bench/exec-stats.c). */
function execStatsBinary(dir: string): string {
  const out = join(dir, 'exec-stats');
  execFileSync('gcc', ['-std=c11', '-O2', '-static', '-o', out, join(BENCH_DIR, 'exec-stats.c')]);
  return out;
}

async function execStats(
  helper: string,
  o: { count: number; parallel: number; stdin: string; env: Record<string, string>; indexVar?: string; argv: string[] },
): Promise<Run[]> {
  const stdinFile = join(tmpdir(), `cni-bench-stdin-${process.pid}`);
  writeFileSync(stdinFile, o.stdin);
  // Asynchronous: the agent answering the plugins may share this process's event loop.
  const out = await new Promise<string>((resolve, reject) =>
    execFile(
      helper,
      [String(o.count), String(o.parallel), stdinFile, o.indexVar ?? '-', ...o.argv],
      { env: o.env, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => (err ? reject(new Error(`exec-stats failed: ${stderr}`)) : resolve(stdout)),
    ),
  );
  rmSync(stdinFile, { force: true });
  return out
    .trim()
    .split('\n')
    .map((l) => l.split(' ').map(Number))
    .map(([, ms, rssKiB, exit]) => ({ ms: ms!, rssKiB: rssKiB!, exit: exit! }));
}

/** The Node.js plugin as it was, from git, compiled as `npm run build` compiled it: what install-cni put on hosts. */
function nodePlugin(dir: string): string {
  const files = ['src/cli/cni-main.ts', 'src/agent/cni-plugin.ts'];
  for (const f of files) {
    let source: string;
    try {
      source = execFileSync('git', ['-C', ROOT, 'show', `${NODE_PLUGIN_COMMIT}:${f}`], { encoding: 'utf8' });
    } catch (e) {
      throw new Error(
        `the Node.js plugin (for the "before" column) comes from git commit ${NODE_PLUGIN_COMMIT}, which this checkout lacks: ${(e as Error).message}`,
      );
    }
    const js = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const out = join(dir, 'node-plugin', f.replace(/^src\//, '').replace(/\.ts$/, '.js'));
    mkdirSync(join(out, '..'), { recursive: true });
    writeFileSync(out, js);
  }
  writeFileSync(join(dir, 'node-plugin', 'package.json'), '{"type":"module"}\n');
  return join(dir, 'node-plugin', 'cli', 'cni-main.js');
}

const stats = (runs: Run[]) => {
  const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
  return {
    p50Ms: percentile(ms, 50),
    p99Ms: percentile(ms, 99),
    maxMs: ms.at(-1)!,
    maxRssMiB: Math.max(...runs.map((r) => r.rssKiB)) / 1024,
    failed: runs.filter((r) => r.exit !== 0).length,
  };
};

/** The plugin against a unix socket server that answers every request at once with a canned CNI answer. */
async function againstCannedServer(helper: string, dir: string, parallel: number): Promise<Run[]> {
  const socket = join(dir, 'canned.sock');
  const body = '{"cniVersion":"1.0.0"}\n';
  const answer = `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\nx-cni-exit-code: 0\r\n\r\n${body}`;
  const server = createServer((s) => s.once('data', () => s.end(answer)));
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  try {
    const conf = JSON.stringify({ cniVersion: '1.0.0', name: 'pods', ipam: { type: 'eni-ipam-cni', socket } });
    return await execStats(helper, {
      count: parallel,
      parallel,
      stdin: conf,
      env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'pod', CNI_NETNS: '/x', CNI_IFNAME: 'eth0' },
      indexVar: 'CNI_CONTAINERID',
      argv: [PLUGIN],
    });
  } finally {
    server.close();
  }
}

/** A Kubernetes emulator with the node's ENIPool holding `ips` addresses, and the agent as its own process. */
async function agentWithPool(dir: string, ips: number): Promise<{ socket: string; stop: () => Promise<void> }> {
  const emu = await startKubeEmulator({});
  const kc = new KubeConfig();
  kc.loadFromString(emu.kubeconfig);
  for (const crd of Object.values(CRDS)) {
    const r = await fetch(`${emu.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(crd),
    });
    if (r.status !== 201) throw new Error(`creating a CRD failed: HTTP ${r.status}`);
  }
  const custom = kc.makeApiClient(CustomObjectsApi);
  await custom.createClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipools',
    body: {
      apiVersion: 'eniipam.io/v1alpha1',
      kind: 'ENIPool',
      metadata: { name: 'node-1' },
      spec: { nodeName: 'node-1' },
    },
  });
  const addresses = Array.from({ length: ips }, (_, i) => `10.8.${Math.floor(i / 250)}.${(i % 250) + 1}`);
  await custom.patchClusterCustomObjectStatus(
    {
      group: 'eniipam.io',
      version: 'v1alpha1',
      plural: 'enipools',
      name: 'node-1',
      body: {
        status: {
          enis: [
            {
              id: 'eni-bench',
              mac: '00:16:3e:00:00:01',
              state: 'InUse',
              vSwitchCIDR: '10.8.0.0/16',
              gatewayIP: '10.8.255.253',
              ips: addresses,
            },
          ],
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  writeFileSync(join(dir, 'kubeconfig'), emu.kubeconfig);
  const socket = join(dir, 'agent.sock');
  const child = spawn(
    CLI,
    [
      ...agentArgs({
        node: 'node-1',
        kubeconfig: join(dir, 'kubeconfig'),
        stateDir: join(dir, 'state'),
        socket: socket,
      }),
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout! });
  let health = '';
  for await (const l of lines) {
    const serving = servingOf(l);
    if (serving) {
      health = serving.health;
      break;
    }
  }
  if (!health) throw new Error('the agent exited before serving');
  for (let i = 0; i < 200 && (await fetch(health.replace('/healthz', '/readyz'))).status !== 200; i++)
    await new Promise((r) => setTimeout(r, 50));
  return {
    socket,
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await emu.close();
    },
  };
}

/**
 * The CNI plugin per invocation, before (the Node.js program) and after (the static binary):
 * start-up and VERSION, wall time and peak memory, `runs` times one after the other. Then
 * `rounds` bursts of `parallel` ADDs at once through the binary against an agent process whose
 * pool has a free address for each, each burst followed by as many DELs; and the same bursts
 * against a server that answers at once, the floor of this machine.
 */
export async function cniPlugin(o: CniPluginOptions): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cni-bench-'));
  try {
    const helper = execStatsBinary(dir);
    const version = { count: o.runs, parallel: 1, stdin: '{"cniVersion":"1.0.0"}', env: { CNI_COMMAND: 'VERSION' } };
    const before = stats(await execStats(helper, { ...version, argv: [process.execPath, nodePlugin(dir)] }));
    const after = stats(await execStats(helper, { ...version, argv: [PLUGIN] }));

    const floorRuns: Run[] = [];
    for (let r = 0; r < o.rounds; r++) floorRuns.push(...(await againstCannedServer(helper, dir, o.parallel)));
    const floor = stats(floorRuns);

    const agent = await agentWithPool(dir, o.rounds * o.parallel + 10);
    const addRuns: Run[] = [];
    const delRuns: Run[] = [];
    const rounds: Array<{ p99Ms: number; stateFileWrites: number; distinctIps: number; loadAverage: number }> = [];
    try {
      const conf = JSON.stringify({
        cniVersion: '1.0.0',
        name: 'pods',
        type: 'ptp',
        ipam: { type: 'eni-ipam-cni', socket: agent.socket },
      });
      const journal = StateFile.in(join(dir, 'state')).journalPath;
      const saves = () => (existsSync(journal) ? readFileSync(journal, 'utf8').split('\n').filter(Boolean).length : 0);
      for (let r = 0; r < o.rounds; r++) {
        const env = {
          CNI_CONTAINERID: `round${r}`,
          CNI_NETNS: '/var/run/netns/pod',
          CNI_IFNAME: 'eth0',
          CNI_PATH: '/opt/cni/bin',
          CNI_ARGS: 'K8S_POD_NAMESPACE=bench;K8S_POD_NAME=pod',
        };
        const loadAverage = loadavg()[0]!;
        const savesBefore = saves();
        const adds = await execStats(helper, {
          count: o.parallel,
          parallel: o.parallel,
          stdin: conf,
          env: { ...env, CNI_COMMAND: 'ADD' },
          indexVar: 'CNI_CONTAINERID',
          argv: [PLUGIN],
        });
        // A compaction may fold the journal meanwhile; then the count is a lower bound.
        const stateFileWrites = Math.max(0, saves() - savesBefore);
        const held = JSON.parse((await agentRequest(agent.socket, 'GET', '/v1/allocations', undefined)).text)
          .allocations as Array<{ ip: string }>;
        rounds.push({
          p99Ms: stats(adds).p99Ms,
          stateFileWrites,
          distinctIps: new Set(held.map((a) => a.ip)).size,
          loadAverage,
        });
        addRuns.push(...adds);
        delRuns.push(
          ...(await execStats(helper, {
            count: o.parallel,
            parallel: o.parallel,
            stdin: conf,
            env: { ...env, CNI_COMMAND: 'DEL' },
            indexVar: 'CNI_CONTAINERID',
            argv: [PLUGIN],
          })),
        );
      }
    } finally {
      await agent.stop();
    }
    const add = stats(addRuns);
    const del = stats(delRuns);

    const ms = (v: number) => `${v.toFixed(2)} ms`;
    const mib = (v: number) => `${v.toFixed(1)} MiB`;
    const allDistinct = rounds.every((r) => r.distinctIps === o.parallel);
    const startupMet = after.p99Ms < STARTUP_MS && after.maxRssMiB < STARTUP_MIB;
    const addMet = add.p99Ms < ADD_P99_MS && add.failed === 0 && allDistinct;
    const met = startupMet && addMet;
    const loads = rounds.map((r) => r.loadAverage);
    writeResults(
      {
        scenario: 'cni-plugin',
        command: `npm run bench -- cni-plugin --runs ${o.runs} --parallel ${o.parallel} --rounds ${o.rounds}`,
        summary: {
          'start-up + VERSION, p50 / p99: before (Node.js) → after (static binary)': `${ms(before.p50Ms)} / ${ms(before.p99Ms)} → ${ms(after.p50Ms)} / ${ms(after.p99Ms)}`,
          'peak memory per call: before → after': `${mib(before.maxRssMiB)} → ${mib(after.maxRssMiB)}`,
          [`${o.parallel} ADDs at once through the binary (${o.rounds} rounds): p50 / p99 / max`]: `${ms(add.p50Ms)} / ${ms(add.p99Ms)} / ${ms(add.maxMs)}`,
          'p99 per round': rounds.map((r) => r.p99Ms.toFixed(1)).join(', ') + ' ms',
          'failed / state-file writes per round': `${add.failed} / ${rounds.map((r) => r.stateFileWrites).join(', ')}`,
          [`${o.parallel} DELs at once: p50 / p99`]: `${ms(del.p50Ms)} / ${ms(del.p99Ms)}`,
          [`floor: ${o.parallel} at once against a server answering at once, p50 / p99`]: `${ms(floor.p50Ms)} / ${ms(floor.p99Ms)}`,
        },
        target: `start-up + VERSION under ${STARTUP_MS} ms at p99 and under ${STARTUP_MIB} MiB; ${o.parallel} ADDs at once under ${ADD_P99_MS} ms at p99, each with its own IP`,
        met,
        note:
          `Start-up and memory: ${startupMet ? 'met' : 'NOT met'}; ADDs: ${addMet ? 'met' : `NOT met (p99 ${ms(add.p99Ms)}, of which the floor ${ms(floor.p99Ms)})`}. ` +
          `Each call is timed from fork to reaping by a small static helper (bench/exec-stats.c), which also reads its peak RSS from wait4(2) (the kernel counts the helper's own pre-exec copy, ~0.1 MiB, in it). ` +
          `Before: the Node.js plugin of commit ${NODE_PLUGIN_COMMIT.slice(0, 7)}, run by this Node.js as install-cni installed it (without its /bin/sh launcher). ` +
          `The ADDs go to an \`eni-ipam agent\` process (state file on disk; the allocations that arrive while a save is on its way go together in the next one) whose pool holds ${o.rounds * o.parallel + 10} free addresses; ${allDistinct ? 'every round gave each ADD its own IP' : 'some round did NOT give each ADD its own IP'}. ` +
          `A call's time includes waiting for a core and for the calls the agent serves first; the floor row is what the processes alone cost on this machine, whose 1-minute load average was ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} on ${cpus().length} cores (other work) during the rounds.`,
      },
      { options: o, before, after, add, del, floor, rounds, cores: cpus().length },
    );
    console.log(JSON.stringify({ before, after, add, del, floor, rounds }, null, 2));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
