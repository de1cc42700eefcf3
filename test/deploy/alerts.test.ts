import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { CREDENTIAL_FORMS, REQUIRED, run, template, tool } from '../helpers/helm.js';

// The chart's alert rules, evaluated by Prometheus's own rule engine (`promtool test rules`) over
// series shaped as the operator exports them.
interface Rule {
  alert?: string;
  annotations?: Record<string, string>;
}
/** The rules as rendered, with `values` set (`--set`) and `extra` arguments to helm template. */
async function rules(values: string[] = [], extra: string[] = []): Promise<Array<{ rules: Rule[] }>> {
  const objs = await template(
    [...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'monitoring.prometheusRule.enabled=true', ...values],
    extra,
  );
  return (objs.find((o) => o.kind === 'PrometheusRule') as unknown as { spec: { groups: Array<{ rules: Rule[] }> } })
    .spec.groups;
}

async function promtoolTest(tests: unknown[], values: string[] = []): Promise<{ code: number; out: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'alerts-'));
  writeFileSync(join(dir, 'rules.yaml'), YAML.stringify({ groups: await rules(values) }));
  const file = join(dir, 'tests.yaml');
  writeFileSync(file, YAML.stringify({ rule_files: ['rules.yaml'], evaluation_interval: '30s', tests }));
  const r = await run(tool('promtool'), ['test', 'rules', file]);
  return { code: r.code, out: r.stdout + r.stderr };
}

/** The rule's description with its template's labels filled in (annotations are compared exactly). */
async function description(alert: string, labels: Record<string, string>, value?: string): Promise<string> {
  const rule = (await rules()).flatMap((g) => g.rules).find((r) => r.alert === alert)!;
  let text = rule.annotations!.description!;
  for (const [k, v] of Object.entries(labels)) text = text.replaceAll(`{{ $labels.${k} }}`, v);
  return value === undefined ? text : text.replace(/\{\{ \$value[^}]*\}\}/, value);
}

const AUTH =
  'eni_ipam_cloud_error_info{code="SignatureDoesNotMatch",reason="CloudAuthFailed",pod="eni-ipam-operator-1"}';

describe('alert rules (promtool test rules)', () => {
  it('EniIpamCloudUnavailable fires after a minute of failing cloud reads, names the code and reason, and not before or once they work', async () => {
    const rule = (await rules()).flatMap((g) => g.rules).find((r) => r.alert === 'EniIpamCloudUnavailable')!;
    // Annotations are compared exactly: the description as the rule renders it for this code.
    const description = rule.annotations!.description!.replaceAll('{{ $labels.code }}', 'SignatureDoesNotMatch');
    const fires = {
      interval: '30s',
      input_series: [
        { series: AUTH, values: '1x6' },
        { series: 'eni_ipam_cloud_up{pod="eni-ipam-operator-1"}', values: '0x6' },
      ],
      alert_rule_test: [
        { eval_time: '30s', alertname: 'EniIpamCloudUnavailable', exp_alerts: [] },
        {
          eval_time: '2m',
          alertname: 'EniIpamCloudUnavailable',
          exp_alerts: [
            {
              exp_labels: { severity: 'critical', code: 'SignatureDoesNotMatch', reason: 'CloudAuthFailed' },
              exp_annotations: {
                summary: 'eni-ipam cannot use the ECS OpenAPI: CloudAuthFailed (SignatureDoesNotMatch)',
                description,
              },
            },
          ],
        },
      ],
    };
    const healthy = {
      interval: '30s',
      input_series: [{ series: 'eni_ipam_cloud_up{pod="eni-ipam-operator-1"}', values: '1x6' }],
      alert_rule_test: [{ eval_time: '3m', alertname: 'EniIpamCloudUnavailable', exp_alerts: [] }],
    };
    const r = await promtoolTest([fires, healthy]);
    expect(r.out).toContain('SUCCESS');
    expect(r.code).toBe(0);
  });

  it('the test fails when the alert does not fire as expected (the check can fail)', async () => {
    const wrong = {
      interval: '30s',
      input_series: [{ series: AUTH, values: '1x6' }],
      alert_rule_test: [{ eval_time: '2m', alertname: 'EniIpamCloudUnavailable', exp_alerts: [] }],
    };
    const r = await promtoolTest([wrong]);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('EniIpamCloudUnavailable');
  });

  it('EniIpamNoLeader fires when no replica leads for five minutes', async () => {
    const r = await promtoolTest([
      {
        interval: '1m',
        input_series: [{ series: 'eni_ipam_leader{pod="a"}', values: '0x10' }],
        alert_rule_test: [
          { eval_time: '4m', alertname: 'EniIpamNoLeader', exp_alerts: [] },
          {
            eval_time: '6m',
            alertname: 'EniIpamNoLeader',
            exp_alerts: [
              {
                exp_labels: { severity: 'critical' },
                exp_annotations: {
                  summary: 'No eni-ipam operator is leading',
                  description:
                    'No replica holds the Lease: no pool is being filled. Check the operator pods and their logs.',
                },
              },
            ],
          },
        ],
      },
    ]);
    expect(r.out).toContain('SUCCESS');
  });
  it('EniIpamVSwitchExhaustionForecast fires for a vSwitch forecast to run out within the hour, and not for a later, brief or absent forecast', async () => {
    const vsw = { vswitch: 'vsw-h-pods', zone: 'cn-hangzhou-h' };
    const forecast = (vswitch: string, values: string) => ({
      series: `eni_ipam_vswitch_exhaustion_seconds{vswitch="${vswitch}",zone="cn-hangzhou-h",pod="eni-ipam-operator-1"}`,
      values,
    });
    const r = await promtoolTest([
      {
        interval: '1m',
        input_series: [
          // 30 minutes left, as the forecast says at every scrape.
          forecast('vsw-h-pods', '1800-60x12'),
          // Two hours left: beyond the threshold.
          forecast('vsw-h-pods-2', '7200x12'),
          // Below the hour for three minutes (a burst), then the forecast is withdrawn (the series goes).
          forecast('vsw-h-nodes', '1200x2 stale'),
          // A steady vSwitch: free addresses, a rate of 0, no exhaustion series.
          { series: 'eni_ipam_vswitch_free_ips{vswitch="vsw-i-pods",zone="cn-hangzhou-i"}', values: '2000x12' },
          {
            series: 'eni_ipam_vswitch_consumption_ips_per_second{vswitch="vsw-i-pods",zone="cn-hangzhou-i"}',
            values: '0x12',
          },
        ],
        alert_rule_test: [
          { eval_time: '4m', alertname: 'EniIpamVSwitchExhaustionForecast', exp_alerts: [] },
          {
            eval_time: '6m',
            alertname: 'EniIpamVSwitchExhaustionForecast',
            exp_alerts: [
              {
                exp_labels: { severity: 'warning', ...vsw },
                exp_annotations: {
                  summary: 'vSwitch vsw-h-pods runs out within 1 h',
                  // 1800 - 6 * 60 seconds left at 6m.
                  description: await description('EniIpamVSwitchExhaustionForecast', vsw, '24m 0s'),
                },
              },
            ],
          },
        ],
      },
    ]);
    expect(r.out).toContain('SUCCESS');
    expect(r.code).toBe(0);

    // The threshold is monitoring.prometheusRule.vSwitchExhaustionHours: at 3 h the two-hour forecast fires too.
    const later = await promtoolTest(
      [
        {
          interval: '1m',
          input_series: [forecast('vsw-h-pods-2', '7200x12')],
          alert_rule_test: [
            {
              eval_time: '6m',
              alertname: 'EniIpamVSwitchExhaustionForecast',
              exp_alerts: [
                {
                  exp_labels: { severity: 'warning', vswitch: 'vsw-h-pods-2', zone: 'cn-hangzhou-h' },
                  exp_annotations: {
                    summary: 'vSwitch vsw-h-pods-2 runs out within 3 h',
                    description: await description(
                      'EniIpamVSwitchExhaustionForecast',
                      { vswitch: 'vsw-h-pods-2', zone: 'cn-hangzhou-h' },
                      '2h 0m 0s',
                    ),
                  },
                },
              ],
            },
          ],
        },
      ],
      ['monitoring.prometheusRule.vSwitchExhaustionHours=3'],
    );
    expect(later.out).toContain('SUCCESS');
    expect(later.code).toBe(0);
  });

  it('EniIpamZonePoolsCannotReachPreAllocate fires for a zone whose pools lack vSwitch room for ten minutes, counted once over replicas', async () => {
    const short = (pod: string, zone: string, reason: string, values: string) => ({
      series: `eni_ipam_zone_pools_short{zone="${zone}",reason="${reason}",pod="${pod}"}`,
      values,
    });
    const r = await promtoolTest([
      {
        interval: '1m',
        input_series: [
          // Both replicas count the same two exhausted pools and one fragmented one in zone i.
          ...['eni-ipam-operator-1', 'eni-ipam-operator-2'].flatMap((pod) => [
            short(pod, 'cn-hangzhou-i', 'VSwitchExhausted', '2x15'),
            short(pod, 'cn-hangzhou-i', 'VSwitchFragmented', '1x15'),
            short(pod, 'cn-hangzhou-i', 'NoVSwitchInZone', '0x15'),
          ]),
          // Zone h: nothing short.
          short('eni-ipam-operator-1', 'cn-hangzhou-h', 'VSwitchExhausted', '0x15'),
          // Zone j: short for five minutes, then filled (another vSwitch added).
          short('eni-ipam-operator-1', 'cn-hangzhou-j', 'VSwitchExhausted', '1x5 0x10'),
        ],
        alert_rule_test: [
          { eval_time: '9m', alertname: 'EniIpamZonePoolsCannotReachPreAllocate', exp_alerts: [] },
          {
            eval_time: '11m',
            alertname: 'EniIpamZonePoolsCannotReachPreAllocate',
            exp_alerts: [
              {
                exp_labels: { severity: 'warning', zone: 'cn-hangzhou-i' },
                exp_annotations: {
                  summary: 'Pools in zone cn-hangzhou-i cannot reach preAllocate',
                  description: await description(
                    'EniIpamZonePoolsCannotReachPreAllocate',
                    { zone: 'cn-hangzhou-i' },
                    '3',
                  ),
                },
              },
            ],
          },
        ],
      },
    ]);
    expect(r.out).toContain('SUCCESS');
    expect(r.code).toBe(0);
  });

  it('EniIpamActionNearQuota names its threshold as a percentage', async () => {
    // --set-json: --set gives a fraction as a string.
    const rule = (await rules([], ['--set-json', 'monitoring.prometheusRule.quotaUseRatio=0.85']))
      .flatMap((g) => g.rules)
      .find((r) => r.alert === 'EniIpamActionNearQuota')!;
    expect(rule.annotations!.summary).toBe('{{ $labels.action }} uses more than 85% of its quota');
  });
});
