import { describe, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { runtimeUnavailable } from '../testbed/cluster/index.js';
import { cniPluginsUnavailable } from '../testbed/cluster/runtime/node-image.js';
import { ROOT } from './helpers/helm.js';

// The documented commands as a user runs them: the cluster line of "Try the chart locally"
// (testbed/README.md) in a terminal of its own, then its install and pods blocks and the README's
// verify and uninstall blocks (each marked `<!-- readme-test: NAME -->`) in one shell, as written.
const why = runtimeUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`README test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

/** The front page (install, verify, uninstall) and the testbed's page (the local cluster, pods on it). */
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const TESTBED = readFileSync(join(ROOT, 'testbed/README.md'), 'utf8');

/** The first ```sh block after `marker` in `doc`. */
function block(marker: string, doc = README): string {
  const at = doc.indexOf(marker);
  if (at < 0) throw new Error(`no ${marker} in ${doc === README ? 'README.md' : 'testbed/README.md'}`);
  const m = /```sh\n([\s\S]*?)```/.exec(doc.slice(at));
  if (!m) throw new Error(`no sh block after ${marker}`);
  return m[1]!;
}

maybe('the README, run as written (root)', () => {
  test('Try the chart locally: the cluster, then install, pods that reach each other and the VPC host, verify and uninstall leave no ENI behind', async () => {
    const clusterLine = block('## Try the chart locally', TESTBED).trim();
    expect(clusterLine).toMatch(/^\.\/bin\/eni-ipam emulate cluster /);
    const home = mkdtempSync(join(tmpdir(), 'readme-'));
    const env = { ...process.env, HOME: home, KUBECACHEDIR: join(home, 'cache') };
    const cluster = spawn('bash', ['-c', `exec ${clusterLine}`], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    cluster.stderr.on('data', (d) => (stderr += d));
    const lines: string[] = [];
    try {
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: cluster.stdout }).on('line', (l) => {
          lines.push(l);
          if (l.startsWith('Then:')) resolve();
        });
        cluster.on('exit', (code) => reject(new Error(`emulate cluster exited ${code}: ${stderr}`)));
      });
      const ecs = /^ECS emulator (\S+) /.exec(lines.find((l) => l.startsWith('ECS emulator'))!)![1]!;
      const script = [
        'set -euo pipefail',
        block('<!-- readme-test: local-install -->', TESTBED),
        'echo "=== pods"',
        block('<!-- readme-test: pods -->', TESTBED),
        'echo "=== verify"',
        block('<!-- readme-test: verify -->'),
        'echo "=== uninstall"',
        block('<!-- readme-test: uninstall -->'),
      ].join('\n');
      const shell = spawn('bash', ['-c', script], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      shell.stdout.on('data', (d) => (out += d));
      shell.stderr.on('data', (d) => (err += d));
      const [code] = await once(shell, 'exit');
      if (code !== 0) throw new Error(`the README's commands failed (${code}):\n${out}\n${err}`);
      const [install, pods, verify, uninstall] = out.split(/^=== \w+$/m) as [string, string, string, string];
      expect(install).toMatch(/STATUS: deployed/);
      expect(install).toMatch(/condition met/);
      // pod-a's address (from the VPC host's answer) is in its node's pool, by name, and the
      // node's rules route it; pod-b answered pod-a's pings.
      expect(pods).toMatch(/3 packets transmitted, 3 received/);
      const answer = JSON.parse(/^\{"server".*$/m.exec(pods)![0]) as { client: string };
      expect(pods).toMatch(
        new RegExp(`^\\{"${answer.client.replace(/\./g, '\\.')}":\\{[^}]*"pod":"default/pod-a"`, 'm'),
      );
      expect(pods).toMatch(new RegExp(`^20:\\s+from all to ${answer.client} lookup main proto 236`, 'm'));
      expect(pods).toMatch(new RegExp(`^111:\\s+from ${answer.client} lookup 30\\d\\d proto 236`, 'm'));
      expect(pods).toMatch(/pod "pod-b" deleted/);
      expect(verify).toMatch(/^eni_ipam_cloud_up 1$/m);
      expect(verify).toMatch(/^eni_ipam_openapi_requests_total\{action="DescribeNetworkInterfaces",code="OK"\} [1-9]/m);
      expect(uninstall).toMatch(/release "eni-ipam" uninstalled/);
      // Nothing of the cluster is left in the cloud.
      const state = (await (await fetch(`${ecs}/_emulator/state`)).json()) as {
        enis: Array<{ tags: Array<{ key: string; value: string }> }>;
      };
      expect(state.enis.filter((e) => e.tags.some((t) => t.key === 'eni-ipam.io/cluster'))).toEqual([]);
      cluster.kill('SIGINT');
      const [exit] = await once(cluster, 'exit');
      expect(exit).toBe(0);
    } finally {
      if (cluster.exitCode === null) {
        cluster.kill('SIGINT');
        await once(cluster, 'exit');
      }
    }
  }, 420_000);
});
