import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { runCli, startCli } from '../helpers/cli.js';

const run = promisify(execFile);

describe('eni-ipam emulate kube', () => {
  it('runs upstream kube-apiserver: a kubeconfig kubectl uses, objects kept across restarts in --work-dir', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'emulate-kube-'));
    const kubeconfig = join(dir, 'kubeconfig');
    const env = { ...process.env, HOME: dir, KUBECACHEDIR: join(dir, 'cache') };
    const args = [
      'emulate',
      'kube',
      '--listen',
      '127.0.0.1:0',
      '--kubeconfig-out',
      kubeconfig,
      '--work-dir',
      join(dir, 'cp'),
    ];
    const CONFIGMAP = join(dir, 'cm.yaml');
    writeFileSync(CONFIGMAP, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: survivor}\ndata: {k: v}\n');
    const first = await startCli(args, { until: /^listening (https:\/\/\S+)$/, timeoutMs: 90_000 });
    try {
      expect(existsSync(join(dir, 'ca.crt'))).toBe(true);
      const version = JSON.parse(
        (await run('kubectl', ['--kubeconfig', kubeconfig, 'version', '-o', 'json'], { env })).stdout,
      );
      expect(version.serverVersion.gitVersion).toBe('v1.33.13');
      await run('kubectl', ['--kubeconfig', kubeconfig, 'apply', '-f', CONFIGMAP], { env });
      const who = await run(
        'kubectl',
        ['--kubeconfig', kubeconfig, 'auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'],
        { env },
      );
      expect(who.stdout).toBe('kubernetes-admin');
      const denied = await run(
        'kubectl',
        ['--kubeconfig', kubeconfig, 'auth', 'can-i', 'list', 'pods', '--as=system:serviceaccount:default:default'],
        { env },
      ).catch((e: { stdout: string }) => e);
      expect(denied.stdout).toBe('no\n');
      // A second one on the same folder is refused while the first runs.
      const busy = await runCli([...args.slice(0, 2), '--listen', '127.0.0.1:0', '--work-dir', join(dir, 'cp')]);
      expect(busy.code).toBe(2);
      expect(busy.stderr).toContain('is in use by a running control plane');
    } finally {
      first.child.kill('SIGTERM');
    }
    expect((await once(first.child, 'exit'))[0]).toBe(0);
    const second = await startCli(args, { until: /^listening (https:\/\/\S+)$/, timeoutMs: 90_000 });
    try {
      const { stdout } = await run(
        'kubectl',
        ['--kubeconfig', kubeconfig, 'get', 'configmap', 'survivor', '-o', 'jsonpath={.data.k}'],
        { env },
      );
      expect(stdout).toBe('v');
    } finally {
      second.child.kill('SIGINT');
    }
    expect((await once(second.child, 'exit'))[0]).toBe(0);
  }, 240_000);

  it('describes its flags and refuses wrong ones', async () => {
    const help = await runCli(['emulate', 'kube', '--help']);
    for (const flag of ['--listen HOST:PORT', '--kubeconfig-out FILE', '--work-dir DIR', '--tls-san ADDR[,ADDR...]'])
      expect(help.stdout).toContain(flag);
    expect(help.stdout).toContain('v1.33.13');
    const bad = await runCli(['emulate', 'kube', '--tls-san', 'a,,b']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('eni-ipam emulate kube: --tls-san must be a comma-separated list of addresses or names\n');
  });
});
