/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { describe, expect, test } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { runtimeUnavailable } from '../../src/sim/cluster/index.js';
import { BIN } from '../helpers/cli.js';
import { eventually } from '../helpers/ecs.js';
import { run, tool } from '../helpers/helm.js';

const why = runtimeUnavailable();
if (why) console.warn(`emulate cluster test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

maybe('eni-ipam emulate cluster (root)', () => {
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
      const api = /^Kubernetes API (https:\/\/(\S+):\d+) \(TLS, RBAC\); nodes: node-01$/.exec(
        lines.find((l) => l.startsWith('Kubernetes API'))!,
      )!;
      expect(api).not.toBeNull();
      // The printed command, as a user pastes it.
      const start = lines.findIndex((l) => l.trim().startsWith('helm install'));
      const command = [lines[start]!, lines[start + 1]!].map((l) => l.replace(/\\$/, '').trim()).join(' ');
      const argv = command.split(/\s+/);
      expect(argv.slice(0, 3)).toEqual(['helm', 'install', 'eni-ipam']);
      expect(argv).toContain('--wait');
      // One node: one operator (in the host network each replica takes the node's ports).
      expect(argv).toContain('operator.replicas=1');
      const installed = await run(tool('helm'), [...argv.slice(1), '--timeout', '90s']);
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
      expect(pods.every((p) => p.status.conditions.some((c: any) => c.type === 'Ready' && c.status === 'True'))).toBe(
        true,
      );
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
