import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { CniRuntime, type PluginRun } from '../../../testbed/cluster/runtime/cni.js';
import { PodSandboxes, SandboxError } from '../../../testbed/cluster/runtime/pod-sandbox.js';

// A failed sandbox whose teardown fails too (an IPAM agent that does not answer: its ADD timed
// out after it allocated, and its DEL is refused with code 11): containerd keeps the sandbox and
// its namespace, and the kubelet stops it again later, so the DEL is retried and the address the
// agent allocated comes back. (Found by review: the namespace was removed and the DEL forgotten.)
const unreachable: PluginRun = {
  code: 11,
  stdout: JSON.stringify({ code: 11, msg: 'the eni-ipam agent at /run/eni-ipam/agent.sock did not answer' }),
  stderr: '',
};

describe('pod sandboxes: a failed one whose teardown fails too', () => {
  it('keeps its namespace and its DEL to do; removing it later runs the DEL and then removes the namespace', async () => {
    const confDir = mkdtempSync(join(tmpdir(), 'sandbox-cni-'));
    writeFileSync(
      join(confDir, '10-pods.conflist'),
      JSON.stringify({ cniVersion: '1.0.0', name: 'pods', plugins: [{ type: 'ptp', ipam: { type: 'eni-ipam-cni' } }] }),
    );
    const calls: string[] = [];
    let agentUp = false;
    const cni = new CniRuntime({
      cniPath: ['/opt/cni/bin'],
      exists: () => true,
      run: async (path, env) => {
        calls.push(`${basename(path)} ${env.CNI_COMMAND}`);
        if (basename(path) === 'loopback' || (agentUp && env.CNI_COMMAND === 'DEL'))
          return { code: 0, stdout: env.CNI_COMMAND === 'ADD' ? '{"cniVersion":"1.0.0"}' : '', stderr: '' };
        return unreachable;
      },
    });
    const removed: string[] = [];
    const sandboxes = new PodSandboxes({
      cni,
      confDir,
      createNetns: async (id) => `cni-${id.slice(0, 8)}`,
      removeNetns: async (netns) => void removed.push(netns),
    });
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'default', uid: 'u-1' }, spec: {} };
    const failure = await sandboxes.create(pod).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(SandboxError);
    const { leftover, message } = failure as SandboxError;
    expect(message).toMatch(/did not answer; failed to destroy network for sandbox "[0-9a-f]{64}": plugin type="ptp"/);
    expect(calls).toEqual(['loopback ADD', 'ptp ADD', 'ptp DEL']);
    // The DEL failed: the sandbox is kept, its namespace too, for the retried teardown.
    expect(removed).toEqual([]);
    expect(leftover?.netns).toMatch(/^cni-/);
    // While the agent still refuses, removing it fails and keeps the namespace.
    await expect(sandboxes.remove(leftover!)).rejects.toThrow(/failed to destroy network for sandbox/);
    expect(removed).toEqual([]);
    // Once the agent answers, the DEL of every network goes through, in reverse, then the namespace.
    agentUp = true;
    calls.length = 0;
    await sandboxes.remove(leftover!);
    expect(calls).toEqual(['ptp DEL', 'loopback DEL']);
    expect(removed).toEqual([leftover!.netns]);
  });
});
