import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
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
      const { stdout } = await run('kubectl', ['--kubeconfig', kubeconfig, 'get', 'configmap', 'survivor', '-o', 'jsonpath={.data.k}'], { env });
      expect(stdout).toBe('v');
    } finally {
      second.child.kill('SIGINT');
    }
    expect((await once(second.child, 'exit'))[0]).toBe(0);
  });

  it('describes its flags and refuses wrong ones', async () => {
    const help = await runCli(['emulate', 'kube', '--help']);
    for (const flag of ['--listen HOST:PORT', '--kubeconfig-out FILE', '--state FILE', '--history N']) expect(help.stdout).toContain(flag);
    const bad = await runCli(['emulate', 'kube', '--history', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('eni-ipam emulate kube: --history must be a positive integer\n');
  });
});
