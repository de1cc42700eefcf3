/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { describe, expect, test } from '@jest/globals';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import YAML from 'yaml';
import { runtimeUnavailable } from '../../testbed/cluster/index.js';
import { BIN } from '../helpers/cli.js';
import { eventually } from '../helpers/ecs.js';
import { run, tool } from '../helpers/helm.js';

const why = runtimeUnavailable();
if (why) console.warn(`emulate cluster test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

maybe('eni-ipam emulate cluster (root)', () => {
  test('more nodes than the world has instances: one line, exit 2, nothing started or written', () => {
    const dir = mkdtempSync(join(tmpdir(), 'emulate-cluster-'));
    const r = spawnSync(BIN, ['emulate', 'cluster', '--nodes', '99', '--work-dir', dir], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringContaining('the ECS world has 24 instances; --nodes 99 needs as many'),
    ]);
    expect(existsSync(join(dir, 'kubeconfig'))).toBe(false);
  });

  test('prints the kubeconfig and a helm install line that installs the chart, Ready; Ctrl-C removes the cluster', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'emulate-cluster-'));
    const child = spawn(BIN, ['emulate', 'cluster', '--nodes', '1', '--work-dir', dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const lines: string[] = [];
    const rl = createInterface({ input: child.stdout });
    try {
      await new Promise<void>((resolve, reject) => {
        rl.on('line', (l) => {
          lines.push(l);
          if (l.startsWith('Then:')) resolve();
        });
        child.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
      });
      const kubeconfig = join(dir, 'kubeconfig');
      expect(lines).toContain(`kubeconfig written to ${kubeconfig}`);
      expect(lines).toContainEqual(
        expect.stringMatching(
          /^VPC host 192\.168\.67\.252 \(vSwitch vsw-j-pods, namespace ecv\S+-host\) serves ping, TCP echo :7, HTTP :80/,
        ),
      );
      const api =
        /^Kubernetes API (https:\/\/(\S+):\d+) \(kube-apiserver v1\.33\.13: TLS, Node authorizer and RBAC\); nodes: node-01$/.exec(
          lines.find((l) => l.startsWith('Kubernetes API'))!,
        )!;
      expect(api).not.toBeNull();
      // The printed command, as a user pastes it.
      const argv = lines
        .find((l) => / install eni-ipam /.test(l))!
        .trim()
        .split(/\s+/);
      // Helm on the PATH, or else the one `npm run tools` put in .tools/: the line works as printed.
      expect(argv[0] === 'helm' || argv[0]!.endsWith('/.tools/helm')).toBe(true);
      expect(argv.slice(1, 3)).toEqual(['install', 'eni-ipam']);
      expect(argv).toContain('--wait');
      expect(argv.slice(-2)).toEqual(['-f', join(dir, 'values.yaml')]);
      const written = YAML.parse(readFileSync(join(dir, 'values.yaml'), 'utf8'));
      expect(written).toMatchObject({ credentials: { mode: 'secret' }, defaultClass: { create: true } });
      expect(written.endpoints.ecs).toMatch(/^http:\/\/10\.\d+\.0\.1:\d+$/);
      // One node: one operator (in the host network each replica takes the node's ports).
      expect(written.operator.replicas).toBe(1);
      // A second cluster on the same work directory is refused in one line, and this one's files are untouched.
      const before = readFileSync(kubeconfig, 'utf8');
      const second = spawnSync(BIN, ['emulate', 'cluster', '--nodes', '1', '--work-dir', dir], { encoding: 'utf8' });
      expect(second.status).toBe(2);
      expect(second.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`the work directory ${dir} is in use by a running cluster \\(pid \\d+`)),
      ]);
      expect(readFileSync(kubeconfig, 'utf8')).toBe(before);
      const installed = await run(argv[0] === 'helm' ? tool('helm') : argv[0]!, [...argv.slice(1), '--timeout', '90s']);
      expect(installed.stderr).toBe('');
      expect(installed.code).toBe(0);
      const kubectl = (args: string[]) =>
        execFileSync('kubectl', ['--kubeconfig', kubeconfig, ...args], {
          encoding: 'utf8',
          env: { ...process.env, HOME: dir },
        });
      // helm --wait lets a DaemonSet be short of maxUnavailable (10%, at least one) agents; rollout status waits for all.
      kubectl(['rollout', 'status', '-n', 'kube-system', 'daemonset/eni-ipam-agent', '--timeout=60s']);
      const pods = JSON.parse(kubectl(['get', 'pods', '-n', 'kube-system', '-o', 'json'])).items as any[];
      expect(pods.map((p) => p.metadata.labels['app.kubernetes.io/component']).sort()).toEqual(['agent', 'operator']);
      // Readiness is a probe, so a pod may be between probes right after the rollout: wait as a user does, and say
      // which pod is not Ready, with its restarts and last state, if one stays so.
      try {
        kubectl(['wait', '-n', 'kube-system', 'pod', '--all', '--for=condition=Ready', '--timeout=60s']);
      } catch (e) {
        const now = JSON.parse(kubectl(['get', 'pods', '-n', 'kube-system', '-o', 'json'])).items as any[];
        const states = now.map((p) => ({
          pod: p.metadata.name,
          conditions: p.status.conditions,
          containers: p.status.containerStatuses,
        }));
        throw new Error(`pods not Ready 60 s after the rollout: ${JSON.stringify(states)}`, { cause: e });
      }
      await eventually(
        () =>
          JSON.parse(kubectl(['get', 'enipools', '-o', 'json'])).items[0]?.status?.conditions?.some(
            (c: any) => c.type === 'Ready' && c.status === 'True',
          ),
        30_000,
        200,
      );

      child.kill('SIGINT');
      const [code] = await once(child, 'exit');
      expect(code).toBe(0);
      // The bridge, its address and the nodes' namespaces are gone.
      expect(execFileSync('ip', ['-4', '-o', 'addr'], { encoding: 'utf8' })).not.toContain(` ${api[2]}/`);
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    }
  }, 150_000);
});
