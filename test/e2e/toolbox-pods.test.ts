/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { runtimeUnavailable, type EmulatedCluster } from '../../testbed/cluster/index.js';
import { cniPluginsUnavailable } from '../../testbed/cluster/runtime/node-image.js';
import { eventually } from '../helpers/ecs.js';
import { type Kubectl } from '../helpers/kube.js';
import { allPoolsReady, chartCluster, kubectlJson, type Helm, installChart } from '../helpers/chart-cluster.js';

// Workload pods with the chart installed, as a user tries it: `kubectl run` toolbox pods get ENI
// addresses from their node's pool through the CNI chain the agent's init container installed
// (ptp, eni-ipam-cni, bandwidth), `kubectl exec` works in them and in eni-ipam's own pods, and
// `kubectl delete pod` gives the address back.
const why = runtimeUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`toolbox e2e tests skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const NS = 'kube-system';
let cluster: EmulatedCluster;
let kubectl: Kubectl;
const until = <T>(fn: () => Promise<T | undefined | false>, ms = 60_000) => eventually(fn as () => Promise<T>, ms, 200);
const json = kubectlJson(() => kubectl);
const pool = (node: string) => json(['get', 'enipool', node]);
const runToolbox = (name: string, node: string, extra: string[] = []) =>
  kubectl(['run', name, '--image=eni-ipam/toolbox:latest', `--overrides={"spec":{"nodeName":"${node}"}}`, ...extra]);
const runningPod = (name: string) =>
  until(async () => {
    const p = await json(['get', 'pod', name]);
    return p.status?.containerStatuses?.[0]?.state?.running && p.status.podIP && p;
  });
const poolIps = (p: any): string[] => (p.status?.enis ?? []).flatMap((e: any) => e.ips ?? []);

maybe('toolbox pods on the emulated cluster with the chart installed (root)', () => {
  beforeAll(async () => {
    let helm: Helm;
    ({ cluster, kubectl, helm } = await chartCluster({ nodes: 2, backoffBaseMs: 1000, name: 'toolbox-e2e' }));
    const install = await installChart(helm, cluster);
    if (install.code !== 0) throw new Error(`helm install failed: ${install.stderr}`);
    await until(() => allPoolsReady(json, cluster), 90_000);
  }, 180_000);

  afterAll(async () => {
    await cluster?.close();
  });

  test("kubectl run: each toolbox pod gets an address of its node's pool, in status.used with the pod's name", async () => {
    const node = cluster.nodes[0]!;
    expect((await runToolbox('a', node)).code).toBe(0);
    expect((await runToolbox('b', node)).code).toBe(0);
    for (const name of ['a', 'b']) {
      const p = await runningPod(name);
      const ip = p.status.podIP;
      expect(poolIps(await pool(node))).toContain(ip);
      const used = await until(async () => (await pool(node)).status?.used?.[ip]);
      expect(used).toEqual({
        pod: `default/${name}`,
        containerID: expect.stringMatching(/^[0-9a-f]{64}$/),
        ifName: 'eth0',
      });
    }
  }, 90_000);

  test('kubectl exec in a toolbox pod: its address, a ping to the other pod through ptp, exit codes, stdin', async () => {
    const a = await json(['get', 'pod', 'a']);
    const b = await json(['get', 'pod', 'b']);
    const addr = await kubectl(['exec', 'a', '--', 'ip', '-4', '-o', 'addr', 'show', 'eth0']);
    expect(addr.code).toBe(0);
    expect(addr.stdout).toContain(`inet ${a.status.podIP}/`);
    const ping = await kubectl(['exec', 'a', '--', 'ping', '-c1', '-W2', b.status.podIP]);
    expect(ping.stdout).toContain('1 received');
    expect((await kubectl(['exec', 'a', '--', 'sh', '-c', 'exit 3'])).code).toBe(3);
    expect((await kubectl(['exec', '-i', 'b', '--', 'cat'], 'hi\n')).stdout).toBe('hi\n');
  }, 60_000);

  test("kubectl exec into eni-ipam's own pods: the operator as its user, the agent beside its socket", async () => {
    const [operator] = (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=operator'])).items;
    const [agent] = (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items;
    expect((await kubectl(['exec', '-n', NS, operator.metadata.name, '--', 'id', '-u'])).stdout).toBe('65532\n');
    const ls = await kubectl(['exec', '-n', NS, agent.metadata.name, '-c', 'agent', '--', 'ls', '/run/eni-ipam']);
    expect(ls.stdout).toContain('agent.sock');
  }, 60_000);

  test("kubectl delete pod runs the CNI DEL: the address leaves the pool's status.used", async () => {
    const a = await json(['get', 'pod', 'a']);
    expect((await kubectl(['delete', 'pod', 'a', '--wait=true', '--timeout=30s'])).code).toBe(0);
    await until(async () => !(await pool(cluster.nodes[0]!)).status?.used?.[a.status.podIP]);
    // The other pod keeps its own.
    const b = await json(['get', 'pod', 'b']);
    expect((await pool(cluster.nodes[0]!)).status.used[b.status.podIP]).toMatchObject({ pod: 'default/b' });
  }, 60_000);

  test("with no agent on its node, a pod's ADD fails with eni-ipam-cni's error in a FailedCreatePodSandBox Event; it starts once the agent is back", async () => {
    const [, other] = cluster.nodes;
    const keep = { spec: { template: { spec: { nodeSelector: { 'kubernetes.io/hostname': cluster.nodes[0] } } } } };
    const patched = await kubectl([
      'patch',
      'daemonset',
      '-n',
      NS,
      'eni-ipam-agent',
      '--type=merge',
      '-p',
      JSON.stringify(keep),
    ]);
    expect(patched.code).toBe(0);
    await until(async () => {
      const agents = (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items as any[];
      return agents.every((p) => p.spec.nodeName !== other);
    });
    expect((await runToolbox('late', other!)).code).toBe(0);
    const failed = await until(async () =>
      ((await json(['get', 'events', '--field-selector', 'involvedObject.name=late'])).items as any[]).find(
        (e) => e.reason === 'FailedCreatePodSandBox',
      ),
    );
    expect(failed.type).toBe('Warning');
    expect(failed.message).toMatch(
      /failed to setup network for sandbox "[0-9a-f]{64}": plugin type="ptp" name="eni-ipam" failed \(add\): .*\/run\/eni-ipam\/agent\.sock/,
    );
    expect((await json(['get', 'pod', 'late'])).status.phase).toBe('Pending');
    const restore = { spec: { template: { spec: { nodeSelector: { 'kubernetes.io/hostname': null } } } } };
    expect(
      (await kubectl(['patch', 'daemonset', '-n', NS, 'eni-ipam-agent', '--type=merge', '-p', JSON.stringify(restore)]))
        .code,
    ).toBe(0);
    const late = await runningPod('late');
    expect(poolIps(await pool(other!))).toContain(late.status.podIP);
  }, 120_000);

  test('toolbox pods on every node reach each other and a host of the VPC through their ENIs, with their own addresses', async () => {
    const host = cluster.vpc.vpcHost!;
    const all = ['b', 'late'];
    const ipOf = async (name: string) => (await json(['get', 'pod', name])).status.podIP as string;
    for (const from of all) {
      for (const to of all.filter((x) => x !== from)) {
        const ping = await kubectl(['exec', from, '--', 'ping', '-c1', '-W2', await ipOf(to)]);
        expect(ping.stdout).toContain('1 received');
      }
      const answer = await kubectl(['exec', from, '--', 'curl', '-s', '--max-time', '3', `http://${host.ip}/`]);
      expect(answer.code).toBe(0);
      expect(JSON.parse(answer.stdout)).toMatchObject({ client: await ipOf(from) });
    }
    // The node's rules for the pod, as the agent set them (seen from the agent, in the node's network).
    const late = await json(['get', 'pod', 'late']);
    const agent = (
      (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items as any[]
    ).find((p) => p.spec.nodeName === late.spec.nodeName);
    const rules = await kubectl(['exec', '-n', NS, agent.metadata.name, '-c', 'agent', '--', 'ip', 'rule']);
    expect(rules.stdout).toMatch(new RegExp(`^20:\\s+from all to ${late.status.podIP} lookup main proto 236`, 'm'));
    expect(rules.stdout).toMatch(new RegExp(`^111:\\s+from ${late.status.podIP} lookup 30\\d\\d proto 236`, 'm'));
  }, 90_000);
});
