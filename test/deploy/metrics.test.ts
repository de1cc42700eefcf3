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
import { operatorArgs } from '../../bench/process.js';

let c: TestCluster;
const children: ChildProcess[] = [];
let operatorMetrics = '';
let agentMetrics = '';

/** Starts a CLI command and answers the URL it prints after `metrics `. */
async function start(args: string[], env: Record<string, string> = {}): Promise<string> {
  const { child, url } = await startCli(args, { until: /^metrics (\S+)$/, env: { ...process.env, ...env } });
  children.push(child);
  return url;
}

const scrape = async (url: string) => (await fetch(url)).text();

// prom-client's default nodejs_active_{handles,requests,resources}_total are gauges named like
// counters, which promtool flags (toolchain.md 5.2); they are not ours to rename.
const withoutNodeDefaults = (text: string) =>
  text
    .split('\n')
    .filter((l) => !/nodejs_active_(handles|requests|resources)_total/.test(l))
    .join('\n');

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
  const agentUrl = await start([
    'agent',
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
    const r = await run(tool('promtool'), ['check', 'metrics'], withoutNodeDefaults(text));
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
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
