/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runtimeUnavailable, startCluster, type EmulatedCluster } from '../../../testbed/cluster/index.js';
import { cniPluginsUnavailable } from '../../../testbed/cluster/runtime/node-image.js';
import { eventually } from '../../helpers/ecs.js';
import { kubectlFor, type Kubectl } from '../../helpers/kube.js';
import { installHostLocalConflist, nodeRoot } from '../../helpers/node-cni.js';

// Workload pods on the emulated cluster without the chart: toolbox pods set up by the node's CNI
// chain (real plugins: ptp, host-local, bandwidth, and a recording plugin of the test's own) as
// kubelet and containerd do it, and `kubectl exec` into them.
const why = runtimeUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`toolbox pod tests skipped: ${why}`);
const maybe = why ? describe.skip : describe;

let cluster: EmulatedCluster;
let kubectl: Kubectl;
const until = <T>(fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 30_000) =>
  eventually(fn as () => Promise<T>, ms, 100);
const getPod = async (name: string) => JSON.parse((await kubectl(['get', 'pod', name, '-o', 'json'])).stdout);
const running = (name: string) =>
  until(async () => {
    const p = await getPod(name);
    return p.status?.containerStatuses?.[0]?.state?.running && p.status.podIP && p;
  });
const events = async (name: string) =>
  JSON.parse((await kubectl(['get', 'events', '--field-selector', `involvedObject.name=${name}`, '-o', 'json'])).stdout)
    .items as any[];
const root = (node: string) => nodeRoot(cluster, node);
const run = (name: string, node: string, extra: string[] = []) =>
  kubectl(['run', name, '--image=eni-ipam/toolbox', `--overrides={"spec":{"nodeName":"${node}"}}`, ...extra]);
/** The traffic control of node `index`'s network namespace. */
const nodeQdiscs = (index: number) =>
  execFileSync('ip', ['netns', 'exec', `ecn${cluster.network.id}-${index}`, 'tc', 'qdisc', 'show'], {
    encoding: 'utf8',
  });
const podNamespaces = () =>
  execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith(`ecp${cluster.network.id}-`));

/**
 * A CNI plugin of the test's own, chained last: records each call's CNI_* environment and stdin
 * (and, on DEL, whether host-local still holds the address: DEL runs in reverse) and passes the
 * previous result on.
 */
const RECORDER = `#!/usr/bin/env node
const fs = require('fs');
const conf = JSON.parse(fs.readFileSync(0, 'utf8'));
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('CNI_')));
const ip = conf.prevResult && conf.prevResult.ips && conf.prevResult.ips[0].address.split('/')[0];
const held = ip ? fs.existsSync('/var/lib/cni/networks/' + conf.name + '/' + ip) : null;
fs.appendFileSync('/var/lib/cni/recorded.jsonl', JSON.stringify({ env, conf, held }) + '\\n');
if (env.CNI_COMMAND === 'ADD') process.stdout.write(JSON.stringify(conf.prevResult));
`;
const recorded = (node: string): any[] => {
  const file = join(root(node), 'var/lib/cni/recorded.jsonl');
  return existsSync(file)
    ? readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
    : [];
};

maybe('toolbox pods and kubectl exec on the emulated cluster (root)', () => {
  let podCIDR: string;
  beforeAll(async () => {
    cluster = await startCluster({
      nodes: 2,
      registerWithTaints: [],
      workDir: mkdtempSync(join(tmpdir(), 'toolbox-')),
      backoffBaseMs: 1000,
    });
    kubectl = kubectlFor(cluster.kube);
    podCIDR = JSON.parse((await kubectl(['get', 'node', cluster.nodes[0]!, '-o', 'json'])).stdout).spec.podCIDR;
  }, 60_000);

  afterAll(async () => {
    await cluster?.close();
  });

  test("without a CNI configuration a pod waits (NetworkNotReady); with one, kubelet runs the node's chain with the pod's CNI_ARGS and the result's address is status.podIP", async () => {
    const node = cluster.nodes[0]!;
    // The node image ships the standard plugins.
    for (const p of ['loopback', 'ptp', 'bandwidth', 'host-local'])
      expect(existsSync(join(root(node), 'opt/cni/bin', p))).toBe(true);
    expect((await run('t1', node)).code).toBe(0);
    const waiting = await until(async () => {
      const e = (await events('t1')).find((x) => x.reason === 'NetworkNotReady');
      return e && e;
    });
    expect(waiting).toMatchObject({ type: 'Warning', source: { component: 'kubelet', host: node } });
    expect(waiting.message).toContain('cni plugin not initialized');
    const pending = await getPod('t1');
    expect(pending.status.phase).toBe('Pending');
    expect(pending.status.containerStatuses[0].state.waiting.reason).toBe('ContainerCreating');
    expect((await kubectl(['get', 'pod', 't1'])).stdout).toMatch(/t1\s+0\/1\s+ContainerCreating/);

    writeFileSync(join(root(node), 'opt/cni/bin/recorder'), RECORDER);
    chmodSync(join(root(node), 'opt/cni/bin/recorder'), 0o755);
    installHostLocalConflist(cluster, node, 'test', { subnet: podCIDR }, [
      { type: 'bandwidth', capabilities: { bandwidth: true } },
      { type: 'recorder', capabilities: { bandwidth: true } },
    ]);
    const p = await running('t1');
    expect(p.status.podIP.startsWith(podCIDR.split('.').slice(0, 3).join('.'))).toBe(true);
    expect(p.status.podIPs).toEqual([{ ip: p.status.podIP }]);
    const add = recorded(node).find((r) => r.env.CNI_COMMAND === 'ADD')!;
    const sandbox = add.env.CNI_CONTAINERID;
    expect(sandbox).toMatch(/^[0-9a-f]{64}$/);
    expect(add.env).toEqual({
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: sandbox,
      CNI_NETNS: expect.stringMatching(new RegExp(`^/var/run/netns/ecp${cluster.network.id}-`)),
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=t1;K8S_POD_INFRA_CONTAINER_ID=${sandbox};K8S_POD_UID=${p.metadata.uid}`,
    });
    expect(add.conf).toMatchObject({ name: 'test', cniVersion: '1.0.0', type: 'recorder' });
    expect(add.conf.prevResult.ips[0].address).toBe(`${p.status.podIP}/24`);
    // No bandwidth annotation: no bandwidth argument.
    expect(add.conf.runtimeConfig).toBeUndefined();
    // Inside: the pod's own network namespace and hostname, on the machine's tools.
    const addr = await kubectl(['exec', 't1', '--', 'ip', '-4', '-o', 'addr', 'show', 'eth0']);
    expect(addr.stderr).toBe('');
    expect(addr.stdout).toContain(`inet ${p.status.podIP}/24`);
    expect((await kubectl(['exec', 't1', '--', 'hostname'])).stdout).toBe('t1\n');
    expect((await kubectl(['exec', 't1', '--', 'ip', 'link', 'show', 'lo'])).stdout).toMatch(/<LOOPBACK,UP,LOWER_UP>/);
  }, 90_000);

  test('kubectl exec: exit codes, stdin, and a terminal of its own at the size of the client’s', async () => {
    const failed = await kubectl(['exec', 't1', '--', 'sh', '-c', 'echo to stderr >&2; exit 3']);
    expect(failed.code).toBe(3);
    expect(failed.stderr).toContain('to stderr');
    expect(failed.stderr).toContain('command terminated with exit code 3');
    expect((await kubectl(['exec', '-i', 't1', '--', 'cat'], 'hi\n')).stdout).toBe('hi\n');
    // kubectl -t needs a terminal: it runs under one that script(1) makes, of 33 rows and 77 columns.
    const kubeconfig = join(kubectl.dir, 'kubeconfig');
    const term = spawn(
      'script',
      [
        '--quiet',
        '--return',
        '--command',
        `stty rows 33 cols 77; kubectl --kubeconfig ${kubeconfig} exec -it t1 -- sh -c 'tty; stty size; exit 5'`,
        '/dev/null',
      ],
      { env: { ...process.env, HOME: kubectl.dir, KUBECACHEDIR: join(kubectl.dir, 'cache') } },
    );
    let out = '';
    term.stdout.on('data', (d) => (out += d));
    const code = await new Promise<number | null>((resolve) => term.on('exit', resolve));
    term.stdin.end();
    expect(out).toMatch(/\/dev\/pts\/\d+\r\n33 77\r\n/);
    expect(code).toBe(5);
    // A pod that has completed cannot exec, and its sandbox is gone (its address released).
    expect((await run('gone', cluster.nodes[0]!, ['--restart=Never', '--', 'true'])).code).toBe(0);
    await until(async () => (await getPod('gone')).status?.phase === 'Succeeded');
    const done = await kubectl(['exec', 'gone', '--', 'true']);
    expect(done.code).not.toBe(0);
    expect(done.stderr).toContain('cannot exec into a container in a completed pod; current phase is Succeeded');
    const add = recorded(cluster.nodes[0]!).find((r) => r.env.CNI_ARGS.includes('K8S_POD_NAME=gone;'));
    await until(() => !podNamespaces().includes(add.env.CNI_NETNS.split('/').at(-1)));
    expect(recorded(cluster.nodes[0]!)).toContainEqual(
      expect.objectContaining({
        env: expect.objectContaining({ CNI_COMMAND: 'DEL', CNI_CONTAINERID: add.env.CNI_CONTAINERID }),
      }),
    );
  }, 60_000);

  test("two pods on one node reach each other through ptp; a bandwidth annotation becomes the runtime's bandwidth argument", async () => {
    const node = cluster.nodes[0]!;
    expect((await run('t2', node, ['--annotations=kubernetes.io/egress-bandwidth=4M'])).code).toBe(0);
    const t2 = await running('t2');
    const ping = await kubectl(['exec', 't1', '--', 'ping', '-c1', '-W2', t2.status.podIP]);
    expect(ping.stdout).toContain('1 received');
    expect(ping.code).toBe(0);
    const add = recorded(node).find((r) => r.env.CNI_COMMAND === 'ADD' && r.env.CNI_ARGS.includes('K8S_POD_NAME=t2;'));
    expect(add.conf.runtimeConfig).toEqual({ bandwidth: { egressRate: 4_000_000, egressBurst: 4294967295 } });
    // The bandwidth plugin got it too: the pod's egress is shaped on the node.
    expect(nodeQdiscs(0)).toMatch(/qdisc tbf .* rate 4Mbit/);
  }, 60_000);

  test('kubectl delete pod: CNI DEL in reverse order with the cached result, then the namespace goes', async () => {
    const node = cluster.nodes[0]!;
    const add = recorded(node).find((r) => r.env.CNI_COMMAND === 'ADD' && r.env.CNI_ARGS.includes('K8S_POD_NAME=t2;'));
    const ip = add.conf.prevResult.ips[0].address.split('/')[0];
    const netns = add.env.CNI_NETNS.split('/').at(-1);
    expect(podNamespaces()).toContain(netns);
    expect(existsSync(join(root(node), 'var/lib/cni/networks/test', ip))).toBe(true);
    expect((await kubectl(['delete', 'pod', 't2', '--wait=true', '--timeout=30s'])).code).toBe(0);
    const del = recorded(node).find(
      (r) => r.env.CNI_COMMAND === 'DEL' && r.env.CNI_CONTAINERID === add.env.CNI_CONTAINERID,
    );
    expect(del.env.CNI_ARGS).toBe(add.env.CNI_ARGS);
    expect(del.conf.prevResult).toEqual(add.conf.prevResult);
    // The last plugin's DEL ran while host-local still held the address: before ptp's.
    expect(del.held).toBe(true);
    expect(existsSync(join(root(node), 'var/lib/cni/networks/test', ip))).toBe(false);
    expect(podNamespaces()).not.toContain(netns);
    expect(nodeQdiscs(0)).not.toMatch(/rate 4Mbit/);
  }, 60_000);

  test("a failing ADD leaves the pod ContainerCreating with a FailedCreatePodSandBox Event naming the plugin's error, retried until it passes", async () => {
    const node = cluster.nodes[1]!;
    const cidr = JSON.parse((await kubectl(['get', 'node', node, '-o', 'json'])).stdout).spec.podCIDR as string;
    const only = `${cidr.split('.').slice(0, 3).join('.')}.10`;
    installHostLocalConflist(cluster, node, 'one', { subnet: cidr, rangeStart: only, rangeEnd: only }, []);
    expect((await run('f1', node)).code).toBe(0);
    expect((await running('f1')).status.podIP).toBe(only);
    expect((await run('f2', node)).code).toBe(0);
    const failed = await until(async () => (await events('f2')).find((e) => e.reason === 'FailedCreatePodSandBox'));
    expect(failed.type).toBe('Warning');
    expect(failed.message).toMatch(
      /^Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "[0-9a-f]{64}": plugin type="ptp" name="one" failed \(add\): failed to allocate for range 0: no IP addresses available in range set/,
    );
    const f2 = await getPod('f2');
    expect(f2.status.phase).toBe('Pending');
    expect(f2.status.podIP).toBeUndefined();
    expect(f2.status.containerStatuses[0].state.waiting.reason).toBe('ContainerCreating');
    // Retried with back-off: it starts once the address is free.
    expect((await kubectl(['delete', 'pod', 'f1', '--wait=true', '--timeout=30s'])).code).toBe(0);
    expect((await running('f2')).status.podIP).toBe(only);
    expect((await events('f2')).filter((e) => e.reason === 'FailedCreatePodSandBox').length).toBeGreaterThanOrEqual(1);
    // The failed attempts left no namespace behind: one per running pod outside the host network (t1, f2).
    expect(podNamespaces()).toHaveLength(2);
  }, 90_000);
});
