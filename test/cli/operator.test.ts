import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { parseApiLimits } from '../../src/cli/api-limits.js';
import { UsageError } from '../../src/cli/args.js';
import { testCluster, type TestCluster } from '../helpers/cluster.js';
import { BIN, isLogEntry, runCli } from '../helpers/cli.js';
import { DEMO_KEY, eventually } from '../helpers/ecs.js';
import { operatorArgs, servingOf } from '../../testbed/harness/process.js';

let c: TestCluster;
beforeAll(async () => {
  c = await testCluster();
});
afterAll(() => c.close());

describe('eni-ipam operator', () => {
  it('parses per-action limits and names a wrong one', () => {
    expect(parseApiLimits('CreateNetworkInterface=500:100,DescribeNetworkInterfaces=800')).toEqual({
      CreateNetworkInterface: { perMinute: 500, burst: 100 },
      DescribeNetworkInterfaces: { perMinute: 800, burst: undefined },
    });
    expect(() => parseApiLimits('Create=fast')).toThrow(UsageError);
    expect(() => parseApiLimits('Create=fast')).toThrow(/"Create=fast" is not Action=perMinute\[:burst\]/);
    expect(() => parseApiLimits('CreateNetworkInterface=0')).toThrow(
      /CreateNetworkInterface must allow more than 0 calls per minute/,
    );
    expect(() => parseApiLimits('CreateNetworkInterface=10:0')).toThrow(
      /the burst of CreateNetworkInterface must be at least 1/,
    );
    expect(() => parseApiLimits('CreateNetworkInterfaces=10')).toThrow(
      /unknown action "CreateNetworkInterfaces" \(known: CreateNetworkInterface,/,
    );
  });

  it('refuses an endpoint that is not a URL and a limit of 0 with exit 2, not a stack trace', async () => {
    const base = ['operator', '--region', 'cn-hangzhou', '--vpc-id', 'v', '--cluster-id', 'c'];
    const e = await runCli([...base, '--vpc-endpoint', 'x']);
    expect(e).toMatchObject({
      code: 2,
      stderr:
        'eni-ipam operator: --vpc-endpoint takes an http:// or https:// URL (e.g. https://ecs-vpc.cn-hangzhou.aliyuncs.com), not "x"\n',
    });
    const z = await runCli([...base, '--api-limits', 'AttachNetworkInterface=0']);
    expect(z.code).toBe(2);
    expect(z.stderr).toMatch(
      /^eni-ipam operator: --api-limits: AttachNetworkInterface must allow more than 0 calls per minute/,
    );
  });

  it('refuses a missing setting or wrong mode with exit 2 and a one-line message', async () => {
    const r = await runCli(['operator', '--region', 'cn-hangzhou', '--vpc-id', 'v']);
    expect(r).toMatchObject({ code: 2, stderr: 'eni-ipam operator: --cluster-id is required\n' });
    const m = await runCli(['operator', '--mode', 'wild']);
    expect(m.stderr).toBe('eni-ipam operator: --mode must be one of normal, no-release, read-only, not "wild"\n');
  });

  it('serves health and metrics, leads, and on SIGTERM drains and gives its lease up', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'op-'));
    writeFileSync(join(dir, 'kubeconfig'), c.kube.kubeconfig);
    const child = spawn(
      BIN,
      [
        ...operatorArgs({
          kubeconfig: join(dir, 'kubeconfig'),
          vpcId: 'vpc-demo',
          clusterId: 'c-test',
          ecs: c.ecs.url,
        }),
        '--leader-elect-namespace',
        'default',
      ],
      {
        env: {
          ...process.env,
          ALIBABA_CLOUD_ACCESS_KEY_ID: DEMO_KEY.accessKeyId,
          ALIBABA_CLOUD_ACCESS_KEY_SECRET: DEMO_KEY.accessKeySecret,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const lines: string[] = [];
    createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const { metrics: metricsUrl, health: healthUrl } = (await eventually(() => lines.map(servingOf).find(Boolean)))!;
    expect((await fetch(healthUrl)).status).toBe(200);
    await eventually(async () => (await fetch(healthUrl.replace('/healthz', '/readyz'))).status === 200);
    const leases = c.kc.makeApiClient(CoordinationV1Api);
    await eventually(
      async () =>
        (await leases.readNamespacedLease({ name: 'eni-ipam-operator', namespace: 'default' })).spec?.holderIdentity,
    );
    const metrics = await (await fetch(metricsUrl)).text();
    expect(metrics).toMatch(/^eni_ipam_leader 1$/m);
    expect(metrics).toMatch(/^eni_ipam_openapi_quota_per_minute\{action="CreateNetworkInterface"\} 500$/m);
    expect(lines.join('\n')).not.toContain(DEMO_KEY.accessKeySecret);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    // Every line is one JSON object with its level by name; the serving line once, with both URLs.
    expect({ stderr, plain: lines.filter((l) => !isLogEntry(l)) }).toEqual({ stderr: '', plain: [] });
    expect(lines.map((l) => JSON.parse(l) as { msg: string }).filter((e) => e.msg === 'serving')).toEqual([
      expect.objectContaining({ level: 'info', identity: expect.any(String), metrics: metricsUrl, health: healthUrl }),
    ]);
    expect(
      (await leases.readNamespacedLease({ name: 'eni-ipam-operator', namespace: 'default' })).spec?.holderIdentity,
    ).toBe('');
  });
});
