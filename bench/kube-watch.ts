import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { DEFAULT_API_LIMITS } from '../src/cloud/limits.js';
import { BENCH_DIR, percentile, writeResults } from './report.js';

/**
 * Watch fan-out and write throughput of the Kubernetes emulator at the operator's scale:
 * N custom objects of a few KB, W watchers, then sustained updates. The emulator runs as
 * its own process (as in the demo), so its CPU and memory are its own.
 */
export interface KubeWatchOptions {
  objects: number;
  watchers: number;
  updates: number;
  concurrency: number;
}

const BIN = fileURLToPath(new URL('../../bin/eni-ipam', import.meta.url));
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function request(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  type = 'application/json',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      `${base}${path}`,
      { method, agent, headers: data ? { 'content-type': type, 'content-length': Buffer.byteLength(data) } : {} },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'benchpools.bench.io' },
  spec: {
    group: 'bench.io',
    scope: 'Cluster',
    names: { plural: 'benchpools', singular: 'benchpool', kind: 'BenchPool' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
};

/** An ENIPool-sized object: a few KB of ENIs and IPs. */
function pool(i: number) {
  const ips = Object.fromEntries(
    Array.from({ length: 45 }, (_, k) => [
      `10.${(i >> 8) & 255}.${i & 255}.${k + 10}`,
      { owner: `workloads/pod-${k}-7d9f8b6c5-x2x4q`, containerID: `c${k}`.padEnd(20, '0'), eni: `eni-${i}-${k % 3}` },
    ]),
  );
  return {
    apiVersion: 'bench.io/v1',
    kind: 'BenchPool',
    metadata: { name: `node-${i}` },
    spec: { instanceType: 'ecs.g7.xlarge', sentAt: 0 },
    status: { used: ips },
  };
}

async function run<T>(n: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

export async function kubeWatch(o: KubeWatchOptions): Promise<void> {
  const child = spawn(
    BIN,
    ['emulate', 'kube', '--listen', '127.0.0.1:0', '--history', String(o.updates + o.objects + 100)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const first = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
  const base = first.replace(/^listening /, '');
  try {
    await request(base, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', CRD);
    const path = '/apis/bench.io/v1/benchpools';
    const size = Buffer.byteLength(JSON.stringify(pool(1)));

    const t0 = Date.now();
    await run(o.objects, o.concurrency, async (i) => {
      const r = await request(base, 'POST', path, pool(i));
      if (r.status !== 201) throw new Error(`create failed: ${r.status} ${r.body}`);
    });
    const createSeconds = (Date.now() - t0) / 1000;
    const list = JSON.parse((await request(base, 'GET', path)).body) as { metadata: { resourceVersion: string } };

    const lags: number[] = [];
    let delivered = 0;
    const watches = await Promise.all(
      Array.from(
        { length: o.watchers },
        () =>
          new Promise<http.ClientRequest>((resolve) => {
            const req: http.ClientRequest = http.get(
              `${base}${path}?watch=true&resourceVersion=${list.metadata.resourceVersion}`,
              (res) => {
                res.on('error', () => undefined); // the watch is cut when the run ends
                const lines = createInterface({ input: res });
                lines.on('error', () => undefined);
                lines.on('line', (line) => {
                  const e = JSON.parse(line) as { object: { spec?: { sentAt?: number } } };
                  delivered++;
                  const sent = e.object.spec?.sentAt;
                  if (sent) lags.push(Date.now() - sent);
                });
                resolve(req);
              },
            );
            req.on('error', () => undefined);
          }),
      ),
    );

    const t1 = Date.now();
    await run(o.updates, o.concurrency, async (i) => {
      const r = await request(
        base,
        'PATCH',
        `${path}/node-${i % o.objects}`,
        { spec: { sentAt: Date.now() } },
        'application/merge-patch+json',
      );
      if (r.status !== 200) throw new Error(`update failed: ${r.status} ${r.body}`);
    });
    const expected = o.updates * o.watchers;
    const deadline = Date.now() + 120_000;
    while (delivered < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const seconds = (Date.now() - t1) / 1000;
    const rss = rssOf(child.pid!);
    watches.forEach((w) => w.destroy());

    lags.sort((a, b) => a - b);
    const result = {
      objects: o.objects,
      objectBytes: size,
      watchers: o.watchers,
      updates: o.updates,
      createsPerSecond: Math.round(o.objects / createSeconds),
      updatesPerSecond: Math.round(o.updates / seconds),
      eventsDelivered: delivered,
      eventsExpected: expected,
      eventsPerSecond: Math.round(delivered / seconds),
      lagMs: { p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags[lags.length - 1] },
      emulatorRssMiB: Math.round(rss / 1048576),
    };
    const command = `npm run bench -- kube-watch --objects ${o.objects} --watchers ${o.watchers} --updates ${o.updates}`;
    writeResults(
      {
        scenario: 'kube-watch',
        command,
        summary: {
          objects: `${o.objects} × ${(size / 1024).toFixed(1)} KiB`,
          watchers: String(o.watchers),
          'creates/s': String(result.createsPerSecond),
          'updates/s': String(result.updatesPerSecond),
          'events delivered/s': String(result.eventsPerSecond),
          'delivered / expected': `${delivered} / ${expected}`,
          'lag p50 / p99 (ms)': `${result.lagMs.p50} / ${result.lagMs.p99}`,
          'emulator RSS': `${result.emulatorRssMiB} MiB`,
          // The operator's writes follow its cloud calls, which the per-action quotas bound.
          'updates/s ÷ largest API quota rate': `${(result.updatesPerSecond / (Math.max(...Object.values(DEFAULT_API_LIMITS)) / 60)).toFixed(0)}×`,
        },
        target:
          'every event delivered to every watcher, and an update rate at least 10× the largest per-action OpenAPI quota, so that the emulator is never the bottleneck of the operator benchmarks',
        met:
          delivered === expected &&
          result.updatesPerSecond > (10 * Math.max(...Object.values(DEFAULT_API_LIMITS))) / 60,
      },
      result,
    );
    console.log(JSON.stringify(result, null, 2));
    console.log(`written to ${BENCH_DIR}/results/kube-watch.json and ${BENCH_DIR}/RESULTS.md`);
  } finally {
    child.kill('SIGTERM');
    agent.destroy();
  }
}
