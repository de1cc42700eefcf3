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
async function rules(): Promise<Array<{ rules: Rule[] }>> {
  const objs = await template([...REQUIRED, ...CREDENTIAL_FORMS.secret!, 'monitoring.prometheusRule.enabled=true']);
  return (objs.find((o) => o.kind === 'PrometheusRule') as unknown as { spec: { groups: Array<{ rules: Rule[] }> } })
    .spec.groups;
}

async function promtoolTest(tests: unknown[]): Promise<{ code: number; out: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'alerts-'));
  writeFileSync(join(dir, 'rules.yaml'), YAML.stringify({ groups: await rules() }));
  const file = join(dir, 'tests.yaml');
  writeFileSync(file, YAML.stringify({ rule_files: ['rules.yaml'], evaluation_interval: '30s', tests }));
  const r = await run(tool('promtool'), ['test', 'rules', file]);
  return { code: r.code, out: r.stdout + r.stderr };
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
});
