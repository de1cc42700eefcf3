/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { describe, expect, test } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { podCapabilityArgs, podCniArgs, quantityValue } from '../../../testbed/cluster/runtime/cni-args.js';
import {
  CniConfigError,
  CniPluginError,
  CniRuntime,
  defaultNetwork,
  parseNetworkConfig,
  pluginFailure,
  pluginStdin,
  podAddresses,
  type NetworkConfigList,
  type PluginRun,
} from '../../../testbed/cluster/runtime/cni.js';
import type { KubeObject } from '../../../testbed/kube/core/types.js';

const LIST: NetworkConfigList = {
  cniVersion: '1.0.0',
  name: 'net',
  plugins: [
    { type: 'ptp', ipam: { type: 'eni-ipam-cni' } },
    { type: 'bandwidth', capabilities: { bandwidth: true } },
  ],
};
const attachment = {
  containerId: 'c0ffee',
  netns: '/var/run/netns/p1',
  ifName: 'eth0',
  args: [
    ['IgnoreUnknown', '1'],
    ['K8S_POD_NAME', 'p1'],
  ] as Array<[string, string]>,
  capabilityArgs: { bandwidth: { egressRate: 4_000_000, egressBurst: 1 }, portMappings: [{ hostPort: 80 }] },
};

/** Plugins as functions of (env, stdin), found at /opt/cni/bin/TYPE; every call is recorded. */
function fakeHost(plugins: Record<string, (env: Record<string, string>, conf: any) => PluginRun>) {
  const calls: Array<{ path: string; env: Record<string, string>; conf: any }> = [];
  return {
    calls,
    host: {
      cniPath: ['/opt/cni/bin'],
      exists: (path: string) => Object.keys(plugins).some((t) => path === `/opt/cni/bin/${t}`),
      run: async (path: string, env: Record<string, string>, stdin: string) => {
        const conf = JSON.parse(stdin);
        calls.push({ path, env, conf });
        return plugins[path.split('/').at(-1)!]!(env, conf);
      },
    },
  };
}
const ok = (body: unknown): PluginRun => ({ code: 0, stdout: JSON.stringify(body), stderr: '' });
const PTP_RESULT = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'veth1' }, { name: 'eth0', sandbox: '/var/run/netns/p1' }],
  ips: [{ address: '192.168.16.5/20', gateway: '192.168.31.253', interface: 1 }],
};

describe('network configuration files (libcni and containerd)', () => {
  test('the lexically first .conf, .conflist or .json is the default network; a .conf is a list of one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cni-conf-'));
    expect(defaultNetwork(dir)).toBeUndefined();
    expect(defaultNetwork(join(dir, 'absent'))).toBeUndefined();
    writeFileSync(join(dir, '99-other.conflist'), JSON.stringify(LIST));
    writeFileSync(join(dir, '00-notes.txt'), 'not a configuration');
    writeFileSync(join(dir, '20-single.conf'), JSON.stringify({ cniVersion: '0.4.0', name: 'single', type: 'bridge' }));
    const chosen = defaultNetwork(dir)!;
    expect(chosen.file).toBe(join(dir, '20-single.conf'));
    expect(chosen.list).toEqual({
      cniVersion: '0.4.0',
      name: 'single',
      plugins: [{ cniVersion: '0.4.0', name: 'single', type: 'bridge' }],
    });
  });

  test('an unusable configuration is refused with the file and what is wrong', () => {
    const bad = (file: string, text: string) => () => parseNetworkConfig(file, text);
    expect(bad('/x/10.conflist', '{')).toThrow(/\/x\/10\.conflist: not JSON/);
    expect(bad('/x/10.conflist', '{"cniVersion":"1.0.0","plugins":[{"type":"ptp"}]}')).toThrow(CniConfigError);
    expect(bad('/x/10.conflist', '{"name":"n","plugins":[]}')).toThrow(/no "plugins"/);
    expect(bad('/x/10.conflist', '{"name":"n","plugins":[{"type":"ptp"},{}]}')).toThrow(/plugins\[1\] has no "type"/);
    expect(bad('/x/10.conf', '{"name":"n"}')).toThrow(/the plugin has no "type"/);
  });
});

describe("each plugin's stdin and environment", () => {
  test("the list's name and version, runtimeConfig with only the capabilities the plugin declares, prevResult", () => {
    expect(pluginStdin(LIST, { ...LIST.plugins[0]!, name: 'mine' }, attachment.capabilityArgs, undefined)).toEqual({
      type: 'ptp',
      ipam: { type: 'eni-ipam-cni' },
      name: 'net',
      cniVersion: '1.0.0',
    });
    expect(pluginStdin(LIST, LIST.plugins[1]!, attachment.capabilityArgs, PTP_RESULT)).toEqual({
      type: 'bandwidth',
      capabilities: { bandwidth: true },
      name: 'net',
      cniVersion: '1.0.0',
      runtimeConfig: { bandwidth: { egressRate: 4_000_000, egressBurst: 1 } },
      prevResult: PTP_RESULT,
    });
    // A declared capability the runtime has no argument for is left out.
    expect(pluginStdin(LIST, LIST.plugins[1]!, {}, undefined)).not.toHaveProperty('runtimeConfig');
  });

  test("a failed plugin's message, as libcni makes it", () => {
    expect(
      pluginFailure({ code: 1, stdout: '{"code":11,"msg":"pool empty","details":"node-01"}', stderr: '' }),
    ).toEqual({ code: 11, message: 'pool empty; node-01' });
    expect(pluginFailure({ code: 2, stdout: '', stderr: 'boom\n' }).message).toBe('netplugin failed: "boom\\n"');
    expect(pluginFailure({ code: 2, stdout: '', stderr: '' }).message).toBe(
      'netplugin failed with no error message: exit status 2',
    );
    expect(pluginFailure({ code: 1, stdout: 'oops', stderr: '' }).message).toMatch(
      /^netplugin failed but error parsing its diagnostic message "oops": /,
    );
  });
});

describe('ADD and DEL of a list', () => {
  test('ADD runs the plugins in order, each with the previous result; DEL in reverse with the cached result', async () => {
    const { host, calls } = fakeHost({
      ptp: (env) => (env.CNI_COMMAND === 'ADD' ? ok(PTP_RESULT) : { code: 0, stdout: '', stderr: '' }),
      bandwidth: (env, conf) => (env.CNI_COMMAND === 'ADD' ? ok(conf.prevResult) : { code: 0, stdout: '', stderr: '' }),
    });
    const cni = new CniRuntime(host);
    expect(await cni.add(LIST, attachment)).toEqual(PTP_RESULT);
    expect(calls.map((c) => [c.env.CNI_COMMAND, c.path])).toEqual([
      ['ADD', '/opt/cni/bin/ptp'],
      ['ADD', '/opt/cni/bin/bandwidth'],
    ]);
    expect(calls[0]!.env).toEqual({
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c0ffee',
      CNI_NETNS: '/var/run/netns/p1',
      CNI_IFNAME: 'eth0',
      CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAME=p1',
      CNI_PATH: '/opt/cni/bin',
    });
    expect(calls[0]!.conf.prevResult).toBeUndefined();
    expect(calls[1]!.conf.prevResult).toEqual(PTP_RESULT);
    calls.length = 0;
    await cni.del(LIST, attachment);
    expect(calls.map((c) => [c.env.CNI_COMMAND, c.path, c.conf.prevResult])).toEqual([
      ['DEL', '/opt/cni/bin/bandwidth', PTP_RESULT],
      ['DEL', '/opt/cni/bin/ptp', PTP_RESULT],
    ]);
    // The cache went with the DEL: a repeated DEL has no result to give.
    calls.length = 0;
    await cni.del(LIST, attachment);
    expect(calls.map((c) => c.conf.prevResult)).toEqual([undefined, undefined]);
  });

  test('a failing plugin stops the chain with its error; a missing plugin is named with CNI_PATH', async () => {
    const { host, calls } = fakeHost({
      ptp: () => ({ code: 1, stdout: '{"code":11,"msg":"no free address on node-01"}', stderr: '' }),
      bandwidth: () => ok({}),
    });
    const cni = new CniRuntime(host);
    const err = await cni.add(LIST, attachment).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniPluginError);
    expect((err as Error).message).toBe('plugin type="ptp" name="net" failed (add): no free address on node-01');
    expect((err as CniPluginError).code).toBe(11);
    expect(calls).toHaveLength(1);
    const missing = await cni
      .add({ ...LIST, plugins: [{ type: 'macvlan' }] }, attachment)
      .catch((e: unknown) => (e as Error).message);
    expect(missing).toBe(
      'plugin type="macvlan" name="net" failed (add): failed to find plugin "macvlan" in path [/opt/cni/bin]',
    );
  });

  test("the pod's addresses are those of its interface in the sandbox, IPv4 first; an address naming no interface is refused", () => {
    const dual = {
      interfaces: [{ name: 'veth1' }, { name: 'eth0', sandbox: '/var/run/netns/p1' }, { name: 'net1', sandbox: '/x' }],
      ips: [
        { address: 'fd00::5/64', interface: 1 },
        { address: '10.0.0.9/24', interface: 2 },
        { address: '192.168.16.5/20', interface: 1 },
      ],
    };
    expect(podAddresses(dual, 'eth0')).toEqual(['192.168.16.5', 'fd00::5']);
    expect(podAddresses(undefined, 'eth0')).toEqual([]);
    expect(() => podAddresses({ ips: [{ address: '10.0.0.1/24' }] }, 'eth0')).toThrow(/interface number missing/);
  });
});

describe("the pod's CNI arguments (kubelet and containerd)", () => {
  const pod = (annotations?: Record<string, string>, ports: unknown[] = []): KubeObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', namespace: 'team', uid: 'u-1', annotations },
    spec: { containers: [{ name: 'c', image: 'eni-ipam/toolbox', ports }] },
  });

  test('quantities as Kubernetes reads them', () => {
    expect(quantityValue('4M')).toBe(4e6);
    expect(quantityValue('1.5Gi')).toBe(1.5 * 2 ** 30);
    expect(quantityValue('100k')).toBe(1e5);
    expect(quantityValue('2e6')).toBe(2e6);
    expect(quantityValue('1500m')).toBe(2);
    expect(quantityValue('fast')).toBeUndefined();
    expect(quantityValue('4 M')).toBeUndefined();
  });

  test('bandwidth from the annotations with containerd’s burst, host ports as portMappings, the annotations themselves', () => {
    const args = podCapabilityArgs(
      pod({ 'kubernetes.io/egress-bandwidth': '4M', 'kubernetes.io/ingress-bandwidth': '10M' }, [
        { containerPort: 8080, hostPort: 80 },
        { containerPort: 9090 },
      ]),
    );
    expect(args).toEqual({
      bandwidth: { ingressRate: 1e7, ingressBurst: 4294967295, egressRate: 4e6, egressBurst: 4294967295 },
      portMappings: [{ hostPort: 80, containerPort: 8080, protocol: 'tcp' }],
      'io.kubernetes.cri.pod-annotations': {
        'kubernetes.io/egress-bandwidth': '4M',
        'kubernetes.io/ingress-bandwidth': '10M',
      },
    });
    expect(podCapabilityArgs(pod())).toEqual({ 'io.kubernetes.cri.pod-annotations': {} });
  });

  test('a bandwidth annotation that is not a reasonable quantity is refused, naming it', () => {
    expect(() => podCapabilityArgs(pod({ 'kubernetes.io/egress-bandwidth': 'fast' }))).toThrow(
      /annotation kubernetes.io\/egress-bandwidth: "fast" is not a quantity/,
    );
    expect(() => podCapabilityArgs(pod({ 'kubernetes.io/ingress-bandwidth': '10' }))).toThrow(/unreasonably small/);
    expect(() => podCapabilityArgs(pod({ 'kubernetes.io/ingress-bandwidth': '2E' }))).toThrow(/unreasonably large/);
  });

  test('CNI_ARGS name the pod, its uid and its sandbox', () => {
    expect(podCniArgs(pod(), 'abc')).toEqual([
      ['IgnoreUnknown', '1'],
      ['K8S_POD_NAMESPACE', 'team'],
      ['K8S_POD_NAME', 'web'],
      ['K8S_POD_INFRA_CONTAINER_ID', 'abc'],
      ['K8S_POD_UID', 'u-1'],
    ]);
  });
});
