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
  it('writes a kubeconfig that kubectl uses, and keeps its state across restarts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'emulate-kube-'));
    const kubeconfig = join(dir, 'kubeconfig');
    const state = join(dir, 'state.json');
    const env = { ...process.env, HOME: dir, KUBECACHEDIR: join(dir, 'cache') };
    const args = ['emulate', 'kube', '--listen', '127.0.0.1:0', '--kubeconfig-out', kubeconfig, '--state', state];
    const CONFIGMAP = join(dir, 'cm.yaml');
    writeFileSync(CONFIGMAP, 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: survivor}\ndata: {k: v}\n');
    const first = await startCli(args);
    try {
      await run('kubectl', ['--kubeconfig', kubeconfig, 'apply', '-f', CONFIGMAP], { env });
    } finally {
      first.child.kill('SIGTERM');
    }
    expect((await once(first.child, 'exit'))[0]).toBe(0);
    const second = await startCli(args);
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
  });

  it('serves HTTPS with RBAC (--tls --auth), the CA beside the kubeconfig', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'emulate-kube-tls-'));
    const kubeconfig = join(dir, 'kubeconfig');
    const env = { ...process.env, HOME: dir, KUBECACHEDIR: join(dir, 'cache') };
    const cli = await startCli(
      [
        'emulate',
        'kube',
        '--listen',
        '127.0.0.1:0',
        '--kubeconfig-out',
        kubeconfig,
        '--tls',
        '--tls-san',
        '10.99.0.1',
        '--auth',
      ],
      { until: /^listening (https:\/\/\S+)$/ },
    );
    try {
      expect(existsSync(join(dir, 'ca.crt'))).toBe(true);
      const { stdout } = await run(
        'kubectl',
        ['--kubeconfig', kubeconfig, 'auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}'],
        { env },
      );
      expect(stdout).toBe('kubernetes-admin');
      const denied = await run(
        'kubectl',
        ['--kubeconfig', kubeconfig, 'auth', 'can-i', 'list', 'pods', '--as=system:serviceaccount:default:default'],
        { env },
      ).catch((e: { stdout: string }) => e);
      expect(denied.stdout).toBe('no\n');
    } finally {
      cli.child.kill('SIGTERM');
    }
    expect((await once(cli.child, 'exit'))[0]).toBe(0);
  });

  it('describes its flags and refuses wrong ones', async () => {
    const help = await runCli(['emulate', 'kube', '--help']);
    for (const flag of [
      '--listen HOST:PORT',
      '--kubeconfig-out FILE',
      '--state FILE',
      '--history N',
      '--tls',
      '--tls-san ADDR[,ADDR...]',
      '--auth',
    ])
      expect(help.stdout).toContain(flag);
    const noTls = await runCli(['emulate', 'kube', '--auth']);
    expect(noTls).toMatchObject({
      code: 2,
      stderr: 'eni-ipam emulate kube: --auth needs --tls (kubectl and client-go send credentials only over HTTPS)\n',
    });
    const bad = await runCli(['emulate', 'kube', '--history', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('eni-ipam emulate kube: --history must be a positive integer\n');
  });
});
