import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startCli } from '../helpers/cli.js';
import { allReady, conditionOf, poolWhere, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';
import { FakeClock } from '../helpers/fake-clock.js';
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
/** An operator that has watched a vSwitch lose addresses for a quarter of an hour (on a fake clock). */
let forecastMetrics = '';
/** What that operator's describes saw last of the vSwitch. */
let forecastFree = 0;
const MIN = 60_000;
const POD_VSWITCH = '{vswitch="vsw-i-pods",zone="cn-hangzhou-i"}';

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

/** The value of one series in an exposition, or undefined when it has none. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Series name (a histogram's _bucket, _sum and _count apart) -> the label names its samples carry. */
function labelsBySeries(text: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const m of text.matchAll(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$/gm)) {
    const names = out.get(m[1]!) ?? out.set(m[1]!, new Set()).get(m[1]!)!;
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_]\w*)="/g)) names.add(l[1]!);
  }
  return out;
}

beforeAll(async () => {
  c = await testCluster();
  await c.addClass('default', { vSwitchTags: { role: 'pods' }, securityGroupTags: { role: 'pods' }, preAllocate: 4 });
  // A class whose one vSwitch has no address left: its node's pool stays short, for lack of vSwitch room.
  const small = c.ecs.world.vSwitches.get('vsw-i-small')!;
  small.pool.take(small.pool.free);
  await c.addClass('small', {
    nodeSelector: { matchLabels: { pool: 'small' } },
    priority: 10,
    vSwitchIDs: ['vsw-i-small'],
    securityGroupTags: { role: 'pods' },
    preAllocate: 4,
  });
  const node = await c.addNode('i-demo-02');
  const shortNode = await c.addNode('i-demo-05', { pool: 'small' });
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
  await poolWhere(c, shortNode, (p) => conditionOf(p, 'Exhausted')?.reason === 'VSwitchExhausted', 30_000);
  await eventually(async () => (await scrape(agentUrl)).includes('eni_ipam_agent_ips_free 4'), 15_000);
  await eventually(
    async () =>
      sample(await scrape(operatorUrl), 'eni_ipam_zone_pools_short{zone="cn-hangzhou-i",reason="VSwitchExhausted"}') ===
      1,
    15_000,
  );
  operatorMetrics = await scrape(operatorUrl);
  agentMetrics = await scrape(agentUrl);

  // A forecast needs ten minutes of describes: the same cluster under an operator on a fake clock
  // (the process above is stopped first: one leader at a time), while another tenant of
  // vsw-i-pods takes 300 of its addresses every five minutes. A resync describes the vSwitches.
  const cli = children.shift()!;
  cli.kill('SIGTERM');
  if (cli.exitCode === null && cli.signalCode === null) await once(cli, 'exit');
  const clock = new FakeClock(Date.now());
  const op = await c.startOperator({ clock });
  const pods = c.ecs.world.vSwitches.get('vsw-i-pods')!;
  const described = async () => sample(await op.registry.metrics(), `eni_ipam_vswitch_free_ips${POD_VSWITCH}`);
  await eventually(async () => (await described()) === pods.pool.free, 15_000);
  for (let step = 0; step < 3; step++) {
    pods.pool.take(300);
    await clock.advance(5 * MIN);
    await op.resync();
    await eventually(async () => (await described()) === pods.pool.free, 15_000);
  }
  forecastFree = pods.pool.free;
  forecastMetrics = await op.registry.metrics();
}, 120_000);
afterAll(async () => {
  for (const ch of children) {
    ch.kill('SIGTERM');
    if (ch.exitCode === null) await once(ch, 'exit');
  }
  await c?.close();
});

describe('metrics of a running operator and agent', () => {
  it.each(['operator', 'agent', 'forecasting operator'])(
    '%s: /metrics passes promtool check metrics',
    async (which) => {
      const text = { operator: operatorMetrics, agent: agentMetrics, 'forecasting operator': forecastMetrics }[which]!;
      expect(text).toMatch(/^# TYPE eni_ipam_/m);
      const r = await run(tool('promtool'), ['check', 'metrics'], text);
      expect(r.stdout + r.stderr).toBe('');
      expect(r.code).toBe(0);
    },
  );

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

  it('exports each vSwitch\u2019s headroom and the pools of a zone short of vSwitch room, and no forecast it cannot make yet', () => {
    const pooled = (kind: string) =>
      sample(operatorMetrics, `eni_ipam_vswitch_pool_ips{vswitch="vsw-i-pods",zone="cn-hangzhou-i",kind="${kind}"}`);
    expect([pooled('available'), pooled('used')]).toEqual([4, 0]);
    expect(sample(operatorMetrics, 'eni_ipam_vswitch_free_ips{vswitch="vsw-i-small",zone="cn-hangzhou-i"}')).toBe(0);
    expect(sample(operatorMetrics, 'eni_ipam_zone_pools_short{zone="cn-hangzhou-i",reason="VSwitchExhausted"}')).toBe(
      1,
    );
    expect(sample(operatorMetrics, 'eni_ipam_zone_pools_short{zone="cn-hangzhou-h",reason="VSwitchExhausted"}')).toBe(
      0,
    );
    // Minutes old: the families are declared, and carry no value (no stand-in such as +Inf or 0).
    for (const name of ['eni_ipam_vswitch_consumption_ips_per_second', 'eni_ipam_vswitch_exhaustion_seconds']) {
      expect(operatorMetrics).toMatch(new RegExp(`^# TYPE ${name} gauge$`, 'm'));
      expect(operatorMetrics).not.toMatch(new RegExp(`^${name}\\{`, 'm'));
    }
  });

  it('forecasts when a vSwitch that keeps losing addresses runs out, and none for a steady one', () => {
    const rate = sample(forecastMetrics, `eni_ipam_vswitch_consumption_ips_per_second${POD_VSWITCH}`)!;
    const left = sample(forecastMetrics, `eni_ipam_vswitch_exhaustion_seconds${POD_VSWITCH}`)!;
    // 300 every five minutes is 1 a second; the describes come when the operator makes them, so
    // their times (and the fitted slope) move a little within each five minutes.
    expect(rate).toBeGreaterThan(0.5);
    expect(rate).toBeLessThan(2);
    expect(left).toBeLessThanOrEqual(forecastFree / rate + 1e-6);
    expect(left).toBeGreaterThanOrEqual(forecastFree / rate - 5 * 60);
    const steady = '{vswitch="vsw-h-pods",zone="cn-hangzhou-h"}';
    expect(sample(forecastMetrics, `eni_ipam_vswitch_consumption_ips_per_second${steady}`)).toBe(0);
    expect(sample(forecastMetrics, `eni_ipam_vswitch_exhaustion_seconds${steady}`)).toBeUndefined();
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
    const exprs = [...rule.spec.groups.flatMap((g) => g.rules.map((r) => r.expr)), ...(await dashboard()).queries];
    const used = new Set(exprs.flatMap((e) => metricNames(e).map((name) => name.replace(/_(bucket|sum|count)$/, ''))));
    expect(used.size).toBeGreaterThan(10);
    const families = new Set([...`${operatorMetrics}\n${agentMetrics}`.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    expect([...used].filter((name) => !families.has(name))).toEqual([]);
  });

  it('every query of the dashboard is PromQL that promtool parses', async () => {
    const { queries } = await dashboard();
    expect(queries.length).toBeGreaterThan(15);
    const dir = mkdtempSync(join(tmpdir(), 'dashboard-'));
    const file = join(dir, 'queries.yaml');
    const rules = queries.map((expr, i) => ({ record: `dashboard:query_${i}`, expr: grafanaToPromql(expr) }));
    writeFileSync(file, YAML.stringify({ groups: [{ name: 'dashboard', rules }] }));
    const r = await run(tool('promtool'), ['check', 'rules', file]);
    expect(r.stdout + r.stderr).toContain(`SUCCESS: ${queries.length} rules found`);
    expect(r.code).toBe(0);
    // The check can fail: a query that is no PromQL is refused.
    writeFileSync(
      file,
      YAML.stringify({ groups: [{ name: 'dashboard', rules: [{ record: 'x:y', expr: 'max by (' }] }] }),
    );
    expect((await run(tool('promtool'), ['check', 'rules', file])).code).not.toBe(0);
  });

  it('every metric a dashboard query uses is served with the labels the query groups and matches by', async () => {
    const { queries, variables } = await dashboard();
    const served = new Map<string, Set<string>>();
    for (const text of [operatorMetrics, agentMetrics, forecastMetrics])
      for (const [name, labels] of labelsBySeries(text))
        served.set(name, new Set([...(served.get(name) ?? []), ...labels]));
    const wrong: string[] = [];
    for (const expr of queries) {
      const names = metricNames(expr);
      if (!names.length) wrong.push(`${expr}: uses no metric of eni-ipam`);
      for (const name of names) {
        const labels = served.get(name);
        if (!labels) wrong.push(`${expr}: ${name} has no sample in any scrape`);
        else
          for (const label of [...groupingLabels(expr), ...matcherLabels(expr, name)])
            if (!labels.has(label)) wrong.push(`${expr}: ${name} has no label ${label}`);
      }
    }
    // Template variables: label_values(metric, label).
    for (const v of variables) {
      const m = /^label_values\((\w+), *(\w+)\)$/.exec(v);
      if (!m) wrong.push(`variable query ${v}: not label_values(metric, label)`);
      else if (!served.get(m[1]!)?.has(m[2]!)) wrong.push(`variable query ${v}: ${m[1]} has no label ${m[2]}`);
    }
    expect(wrong).toEqual([]);
    // The check can fail: a label the metric does not have is named.
    expect(groupingLabels('max by (vswitch, zon) (eni_ipam_vswitch_free_ips)')).toContain('zon');
    expect(served.get('eni_ipam_vswitch_free_ips')?.has('zon')).toBe(false);
  });
});

/** The dashboard as the chart ships it: each panel target's expression, and each variable's query. */
async function dashboard(): Promise<{ queries: string[]; variables: string[] }> {
  const objs = await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'monitoring.grafanaDashboard.enabled=true']);
  const cm = objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-dashboard')) as unknown as {
    data: Record<string, string>;
  };
  const d = JSON.parse(cm.data['eni-ipam.json']!) as {
    panels: Array<{ targets?: Array<{ expr?: string }> }>;
    templating: { list: Array<{ type: string; query?: string }> };
  };
  return {
    queries: d.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr!)),
    variables: d.templating.list.filter((v) => v.type === 'query').map((v) => v.query!),
  };
}

/**
 * A Grafana query as Prometheus gets it: Grafana's interval variables become durations, and the
 * dashboard's own variables (only used inside regex matchers, `=~"$node"`) match anything.
 */
const grafanaToPromql = (expr: string) =>
  expr
    .replaceAll('$__rate_interval', '5m')
    .replaceAll('$__interval', '1m')
    .replace(/\$\{?\w+\}?/g, '.*');

/** The eni-ipam metrics an expression reads (series names, a histogram's _bucket as such). */
const metricNames = (expr: string) => [...new Set([...expr.matchAll(/\beni_ipam_\w+/g)].map((m) => m[0]))];

/** The labels of every `by (...)` and `without (...)` of an expression. */
const groupingLabels = (expr: string) =>
  [...expr.matchAll(/\b(?:by|without) *\(([^)]*)\)/g)].flatMap((m) =>
    m[1]!
      .split(',')
      .map((l) => l.trim())
      .filter(Boolean),
  );

/** The labels a selector of `name` matches on: `name{kind="needed",node=~"$node"}`. */
const matcherLabels = (expr: string, name: string) =>
  [...expr.matchAll(new RegExp(`\\b${name}\\{([^}]*)\\}`, 'g'))].flatMap((m) =>
    [...m[1]!.matchAll(/(\w+) *(?:=~|!~|!=|=)/g)].map((l) => l[1]!),
  );
