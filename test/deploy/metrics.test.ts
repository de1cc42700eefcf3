import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startCli } from '../helpers/cli.js';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';
import { CREDENTIAL_FORMS, REQUIRED, run, template, tool } from '../helpers/helm.js';
import { operatorArgs, servingOf } from '../../testbed/harness/process.js';
import { DEFAULT_API_LIMITS, MUTATING_ACTIONS } from '../../src/cloud/index.js';

let c: TestCluster;
const children: ChildProcess[] = [];
let operatorMetrics = '';
let agentMetrics = '';
/** The first scrapes, the moment each process said it serves. */
let operatorFresh = '';
let agentFresh = '';

/** Starts a CLI command and answers the metrics URL of its serving line. */
async function start(args: string[], env: Record<string, string> = {}): Promise<string> {
  const { child, url } = await startCli(args, {
    until: (line) => servingOf(line)?.metrics,
    env: { ...process.env, ...env },
  });
  children.push(child);
  return url;
}

const scrape = async (url: string) => (await fetch(url)).text();

beforeAll(async () => {
  c = await testCluster();
  await c.addClass('default', { vSwitchTags: { role: 'pods' }, securityGroupTags: { role: 'pods' }, preAllocate: 4 });
  const node = await c.addNode('i-demo-02');
  const dir = mkdtempSync(join(tmpdir(), 'metrics-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, c.kube.kubeconfig);
  const operatorUrl = await start(
    [
      ...operatorArgs({ kubeconfig, vpcId: 'vpc-demo', clusterId: 'metrics', ecs: c.ecs.url }),
      '--no-leader-elect',
      '--log-level',
      'warn',
    ],
    { ALIBABA_CLOUD_ACCESS_KEY_ID: 'demo', ALIBABA_CLOUD_ACCESS_KEY_SECRET: 'demo-secret' },
  );
  operatorFresh = await scrape(operatorUrl);
  const agentUrl = await start([
    'agent',
    '--node-routing=false',
    '--kubeconfig',
    kubeconfig,
    '--node',
    node,
    '--state-dir',
    join(dir, 'state'),
    '--socket',
    join(dir, 'agent.sock'),
    '--metrics-addr',
    '127.0.0.1:0',
    '--health-addr',
    '127.0.0.1:0',
    '--log-level',
    'warn',
  ]);
  agentFresh = await scrape(agentUrl);
  await allReady(c, [node], 30_000);
  await eventually(async () => (await scrape(agentUrl)).includes('eni_ipam_agent_ips_free 4'), 15_000);
  operatorMetrics = await scrape(operatorUrl);
  agentMetrics = await scrape(agentUrl);
}, 60_000);
afterAll(async () => {
  for (const ch of children) {
    ch.kill('SIGTERM');
    if (ch.exitCode === null) await once(ch, 'exit');
  }
  await c?.close();
});

describe('metrics of a running operator and agent', () => {
  it.each(['operator', 'agent'])('%s: /metrics passes promtool check metrics', async (which) => {
    const text = which === 'operator' ? operatorMetrics : agentMetrics;
    expect(text).toMatch(/^# TYPE eni_ipam_/m);
    const r = await run(tool('promtool'), ['check', 'metrics'], text);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it.each(['operator', 'agent'])('%s: serves the standard process metrics under their standard names', (which) => {
    const text = which === 'operator' ? operatorMetrics : agentMetrics;
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'process_open_fds',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_seconds',
    ])
      expect(text).toMatch(new RegExp(`^${name} \\d`, 'm'));
    expect(text).toMatch(/^nodejs_active_handles\{type="\w+"\} \d+$/m);
    // Gauges named like counters are not served (promtool flags them); the per-type gauges above sum to them.
    expect(text).not.toMatch(/^# TYPE \S+_total gauge$/m);
    expect(text).not.toMatch(/^eni_ipam_\w*(process|nodejs)_/m);
  });

  it('a fresh operator has a sample of every counter whose labels are known, 0 until its first event', () => {
    const sample = (series: string) => {
      const line = operatorFresh.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    const missing: string[] = [];
    const expectSample = (series: string, value?: number) => {
      const got = sample(series);
      if (got === undefined || (value !== undefined && got !== value)) missing.push(`${series} ${got}`);
    };
    for (const action of Object.keys(DEFAULT_API_LIMITS)) {
      expectSample(`eni_ipam_openapi_requests_total{action="${action}",code="OK"}`);
      expectSample(`eni_ipam_openapi_throttled_total{action="${action}"}`, 0);
      for (const code of ['Throttling', 'Throttling.User', 'ServiceUnavailable', 'Transport.Timeout'])
        expectSample(`eni_ipam_openapi_retries_total{action="${action}",code="${code}"}`, 0);
    }
    // This test never calls these.
    for (const action of ['AssignIpv6Addresses', 'UnassignIpv6Addresses', 'DeleteNetworkInterface'])
      expectSample(`eni_ipam_openapi_requests_total{action="${action}",code="OK"}`, 0);
    for (const action of MUTATING_ACTIONS) expectSample(`eni_ipam_cloud_changes_total{action="${action}"}`);
    expectSample('eni_ipam_cloud_changes_total{action="UnassignIpv6Addresses"}', 0);
    for (const kind of ['pool', 'class']) {
      expectSample(`eni_ipam_reconcile_errors_total{kind="${kind}"}`, 0);
      expectSample(`eni_ipam_reconcile_duration_seconds_count{kind="${kind}"}`);
    }
    expectSample('eni_ipam_gc_enis_deleted_total', 0);
    expectSample('eni_ipam_resyncs_total');
    expect(missing).toEqual([]);
  });

  it('a fresh agent has a sample of each of its counters, 0 until its first event', () => {
    for (const series of [
      'eni_ipam_agent_allocations_pool_empty_total',
      'eni_ipam_agent_recovered_allocations_total',
      'eni_ipam_agent_status_writes_total',
    ])
      expect(agentFresh).toMatch(new RegExp(`^${series} \\d+$`, 'm'));
    expect(agentFresh).toMatch(/^eni_ipam_agent_allocations_pool_empty_total 0$/m);
  });

  it('serves every metric that an alert or a dashboard panel of the chart uses', async () => {
    const objs = await template([
      ...REQUIRED,
      ...CREDENTIAL_FORMS.secret!,
      'monitoring.prometheusRule.enabled=true',
      'monitoring.grafanaDashboard.enabled=true',
    ]);
    const rule = objs.find((o) => o.kind === 'PrometheusRule') as unknown as {
      spec: { groups: Array<{ rules: Array<{ expr: string }> }> };
    };
    const dash = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-dashboard')) as unknown as {
      data: Record<string, string>;
    };
    const exprs = [
      ...rule.spec.groups.flatMap((g) => g.rules.map((r) => r.expr)),
      ...[...dash.data['eni-ipam.json']!.matchAll(/"expr": "((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!),
    ];
    const used = new Set(
      exprs.flatMap((e) => [...e.matchAll(/\beni_ipam_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''))),
    );
    expect(used.size).toBeGreaterThan(10);
    const families = new Set([...`${operatorMetrics}\n${agentMetrics}`.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    expect([...used].filter((name) => !families.has(name))).toEqual([]);
  });
});
