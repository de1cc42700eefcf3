/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { runtimeUnavailable, type EmulatedCluster } from '../../testbed/cluster/index.js';
import { cniPluginsUnavailable } from '../../testbed/cluster/runtime/node-image.js';
import { eventually } from '../helpers/ecs.js';
import { type Kubectl } from '../helpers/kube.js';
import { inNs } from '../helpers/netns.js';
import { allPoolsReady, chartCluster, kubectlJson, type Helm, installChart } from '../helpers/chart-cluster.js';

// eniMode Exclusive as a user runs it: the chart installed with agent.exclusiveENIs, an Exclusive
// class for two nodes beside the default Shared one, and toolbox pods that request eniipam.io/eni.
// The scheduler places them by the resource the agents advertise; each gets a whole ENI whose
// device the agent moved into the pod (through the conflist the agent switched to), on the
// emulated cluster's strict VPC.
const why = runtimeUnavailable() ?? cniPluginsUnavailable();
if (why) console.warn(`exclusive e2e tests skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const NS = 'kube-system';
const RESOURCE = 'eniipam.io/eni';
let cluster: EmulatedCluster;
let kubectl: Kubectl;
const until = <T>(fn: () => Promise<T | undefined | false>, ms = 60_000) => eventually(fn as () => Promise<T>, ms, 200);
const json = kubectlJson(() => kubectl);

/** A toolbox pod on `node`, asking for a whole ENI unless `eni` is false (scheduled by the scheduler). */
const podManifest = (name: string, node: string, eni = true) =>
  JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default' },
    spec: {
      nodeSelector: { 'kubernetes.io/hostname': node },
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'main',
          image: 'eni-ipam/toolbox:latest',
          ...(eni ? { resources: { limits: { [RESOURCE]: '1' }, requests: { [RESOURCE]: '1' } } } : {}),
        },
      ],
    },
  });
const startPod = async (name: string, node: string, eni = true) => {
  const r = await kubectl(['apply', '-f', '-'], podManifest(name, node, eni));
  if (r.code !== 0) throw new Error(`kubectl apply ${name}: ${r.stderr}`);
};
const runningPod = (name: string) =>
  until(async () => {
    const p = await json(['get', 'pod', name]);
    return p.status?.containerStatuses?.[0]?.state?.running && p.status.podIP && p;
  }, 90_000);
const deletePod = async (name: string) => {
  const r = await kubectl(['delete', 'pod', name, '--wait=true', '--timeout=60s']);
  if (r.code !== 0) throw new Error(`kubectl delete pod ${name}: ${r.stderr}`);
};
const ipOf = async (name: string) => (await json(['get', 'pod', name])).status.podIP as string;
const exec = (pod: string, ...argv: string[]) => kubectl(['exec', pod, '--', ...argv]);
/** The node's namespace on the machine (the emulated cluster's naming). */
const nodeNetns = (node: string) => `ecn${cluster.network.id}-${cluster.nodes.indexOf(node)}`;
const enis = () => [...cluster.ecs.world.enis.values()];
const eniOf = (ip: string) => enis().find((e) => e.primaryIp === ip);
const nodeLinks = async (node: string) =>
  JSON.parse(await inNs(nodeNetns(node), 'ip', '-j', 'addr', 'show')) as Array<{
    ifname: string;
    address: string;
    operstate: string;
    addr_info: Array<{ local: string }>;
  }>;
/** What the scheduler counts: the node's allocatable eniipam.io/eni, and the requests of the pods bound to it. */
const eniAccount = async (node: string) => {
  const n = await json(['get', 'node', node]);
  const pods = (await json(['get', 'pods', '--field-selector', `spec.nodeName=${node}`])).items as any[];
  const requested = pods
    .filter((p) => !['Succeeded', 'Failed'].includes(p.status?.phase))
    .flatMap((p) => p.spec.containers)
    .reduce((sum: number, c: any) => sum + Number(c.resources?.requests?.[RESOURCE] ?? 0), 0);
  return { allocatable: n.status.allocatable?.[RESOURCE], requested };
};

maybe('exclusive ENIs through the chart on the emulated cluster (root)', () => {
  let exNode: string; // ecs.g7.large: two secondary ENIs
  let exNode2: string; // ecs.g7.xlarge: three
  let sharedNode: string;

  beforeAll(async () => {
    let helm: Helm;
    ({ cluster, kubectl, helm } = await chartCluster({ nodes: 3, backoffBaseMs: 1000, name: 'exclusive-e2e' }));
    [exNode, exNode2, sharedNode] = cluster.nodes as [string, string, string];
    for (const node of [exNode, exNode2]) {
      const labelled = await kubectl(['label', 'node', node, 'eni-mode=exclusive']);
      if (labelled.code !== 0) throw new Error(`kubectl label: ${labelled.stderr}`);
    }
    const install = await installChart(helm, cluster, ['agent.exclusiveENIs=true', 'defaultClass.spec.preAllocate=4']);
    if (install.code !== 0) throw new Error(`helm install failed: ${install.stderr}`);
    const exclusiveClass = {
      apiVersion: 'eniipam.io/v1alpha1',
      kind: 'ENIPoolClass',
      metadata: { name: 'exclusive' },
      spec: {
        eniMode: 'Exclusive',
        priority: 10,
        preAllocate: 1,
        releaseDelaySeconds: 0,
        vSwitchTags: { role: 'pods' },
        securityGroupTags: { role: 'pods' },
        nodeSelector: { matchLabels: { 'eni-mode': 'exclusive' } },
      },
    };
    const applied = await kubectl(['apply', '-f', '-'], JSON.stringify(exclusiveClass));
    if (applied.code !== 0) throw new Error(`kubectl apply class: ${applied.stderr}`);
    await until(async () => {
      if (!(await allPoolsReady(json, cluster))) return false;
      const modes = await Promise.all(cluster.nodes.map(async (n) => (await json(['get', 'enipool', n])).spec.eniMode));
      return modes[0] === 'Exclusive' && modes[1] === 'Exclusive' && modes[2] !== 'Exclusive';
    }, 120_000);
  }, 240_000);

  afterAll(async () => {
    await cluster?.close();
  });

  test('the agents advertise each Exclusive node’s ENIs as eniipam.io/eni and keep its conflist to the mode; kubectl get enipools shows the mode', async () => {
    const types = cluster.ecs.world.instanceTypes;
    const secondaries = (node: string) => {
      const inst = [...cluster.ecs.world.instances.values()].find((i) => i.hostName === node)!;
      return types.get(inst.instanceType)!.eniQuantity - 1;
    };
    for (const node of [exNode, exNode2])
      await until(async () => (await eniAccount(node)).allocatable === String(secondaries(node)));
    expect((await eniAccount(sharedNode)).allocatable).toBeUndefined();
    const wide = await kubectl(['get', 'enipools', '-o', 'wide']);
    expect(wide.stdout).toMatch(/ENI-MODE/);
    expect(wide.stdout.split('\n').find((l) => l.startsWith(exNode))).toMatch(/Exclusive/);
    // The conflist on the node's disk: eni-ipam-cni as the main plugin there, ptp's IPAM on the Shared node.
    const agentOn = async (node: string) =>
      ((await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items as any[]).find(
        (p) => p.spec.nodeName === node,
      ).metadata.name as string;
    const conflist = async (node: string) =>
      JSON.parse(
        (
          await kubectl([
            'exec',
            '-n',
            NS,
            await agentOn(node),
            '-c',
            'agent',
            '--',
            'cat',
            '/host/cni/net.d/10-eni-ipam.conflist',
          ])
        ).stdout,
      );
    expect((await conflist(exNode)).plugins.map((p: any) => p.type)).toEqual(['eni-ipam-cni']);
    expect((await conflist(sharedNode)).plugins.map((p: any) => p.type)).toEqual(['ptp', 'bandwidth']);
  }, 120_000);

  test('pods requesting eniipam.io/eni get distinct whole ENIs, their devices moved in as eth0; one beyond the node’s count stays Pending with the scheduler’s reason', async () => {
    await startPod('ex-a', exNode);
    await startPod('ex-b', exNode);
    await startPod('ex-c', exNode2);
    const pods = await Promise.all(['ex-a', 'ex-b', 'ex-c'].map(runningPod));
    const used = pods.map((p) => eniOf(p.status.podIP));
    expect(used.every(Boolean)).toBe(true);
    expect(new Set(used.map((e) => e!.id)).size).toBe(3);
    for (const [k, p] of pods.entries()) {
      const eni = used[k]!;
      const inst = cluster.ecs.world.instances.get(eni.instanceId ?? '')!;
      expect(inst.hostName).toBe(p.spec.nodeName);
      expect(eni.secondaryIps).toEqual([]);
      const links = JSON.parse((await exec(p.metadata.name, 'ip', '-j', 'link', 'show')).stdout) as any[];
      expect(links.filter((l) => l.ifname !== 'lo').map((l) => [l.ifname, l.address, l.link_type])).toEqual([
        ['eth0', eni.mac, 'ether'],
      ]);
      // Gone from the node's namespace.
      expect((await nodeLinks(p.spec.nodeName)).some((l) => l.address === eni.mac)).toBe(false);
    }
    expect(await eniAccount(exNode)).toEqual({ allocatable: '2', requested: 2 });
    // Both ENIs of the node are taken: a third pod is not placed, and the scheduler says why.
    await startPod('ex-late', exNode);
    const pending = await until(async () => {
      const p = await json(['get', 'pod', 'ex-late']);
      return p.status?.conditions?.find((c: any) => c.type === 'PodScheduled' && c.status === 'False') && p;
    });
    expect(pending.spec.nodeName).toBeUndefined();
    expect(pending.status.conditions.find((c: any) => c.type === 'PodScheduled').message).toMatch(
      /0\/3 nodes are available: 1 Insufficient eniipam\.io\/eni/,
    );
  }, 180_000);

  test('exclusive pods reach each other, the VPC host (as themselves) and a pod of the Shared node', async () => {
    await startPod('sh-a', sharedNode, false);
    await runningPod('sh-a');
    const host = cluster.vpc.vpcHost!;
    for (const from of ['ex-a', 'ex-b', 'ex-c']) {
      for (const to of ['ex-a', 'ex-b', 'ex-c', 'sh-a'].filter((x) => x !== from)) {
        const ping = await exec(from, 'ping', '-c1', '-W2', await ipOf(to));
        expect(ping.stdout).toContain('1 received');
      }
      const answer = await exec(from, 'curl', '-s', '--max-time', '3', `http://${host.ip}/`);
      expect(JSON.parse(answer.stdout)).toMatchObject({ client: await ipOf(from) });
      expect((await exec('sh-a', 'ping', '-c1', '-W2', await ipOf(from))).stdout).toContain('1 received');
    }
  }, 120_000);

  test('a pod without the request on an Exclusive node is refused by the CNI, naming the resource', async () => {
    await startPod('plain', exNode2, false);
    const failed = await until(async () =>
      ((await json(['get', 'events', '--field-selector', 'involvedObject.name=plain'])).items as any[]).find(
        (e) => e.reason === 'FailedCreatePodSandBox',
      ),
    );
    expect(failed.message).toContain(`does not request ${RESOURCE}`);
    expect((await json(['get', 'pod', 'plain'])).status.phase).toBe('Pending');
    await deletePod('plain');
  }, 90_000);

  test('an agent restart with exclusive pods running changes nothing: same devices, same ENIs, still connected', async () => {
    const agent = (
      (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items as any[]
    ).find((p) => p.spec.nodeName === exNode)!.metadata.name as string;
    const before = await Promise.all(['ex-a', 'ex-b'].map((p) => exec(p, 'ip', '-j', 'addr', 'show', 'eth0')));
    // The node's ENIs (both its pods'): none moves, none is attached or detached.
    const instance = [...cluster.ecs.world.instances.values()].find((i) => i.hostName === exNode)!.id;
    const onNode = () =>
      enis()
        .filter((e) => e.instanceId === instance)
        .map((e) => [e.id, e.status, e.primaryIp]);
    const enisBefore = onNode();
    expect((await kubectl(['delete', 'pod', '-n', NS, agent, '--wait=true', '--timeout=60s'])).code).toBe(0);
    await until(async () => {
      const agents = (await json(['get', 'pods', '-n', NS, '-l', 'app.kubernetes.io/component=agent'])).items as any[];
      const next = agents.find((p) => p.spec.nodeName === exNode && p.metadata.name !== agent);
      return next?.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');
    }, 90_000);
    const after = await Promise.all(['ex-a', 'ex-b'].map((p) => exec(p, 'ip', '-j', 'addr', 'show', 'eth0')));
    expect(after.map((r) => JSON.parse(r.stdout))).toEqual(before.map((r) => JSON.parse(r.stdout)));
    expect(onNode()).toEqual(enisBefore);
    for (const p of ['ex-a', 'ex-b'])
      expect((await exec(p, 'ping', '-c1', '-W2', cluster.vpc.vpcHost!.ip)).stdout).toContain('1 received');
    expect(await eniAccount(exNode)).toEqual({ allocatable: '2', requested: 2 });
  }, 150_000);

  test('kubectl delete pod gives the ENI back: the device returns to the node, down and without address, and the Pending pod takes it', async () => {
    const ip = await ipOf('ex-a');
    const eni = eniOf(ip)!;
    await deletePod('ex-a');
    // The scheduler's count falls with the pod, and the waiting pod is placed on the freed ENI.
    const late = await runningPod('ex-late');
    expect(late.spec.nodeName).toBe(exNode);
    expect(late.status.podIP).toBe(eni.primaryIp);
    expect(await eniAccount(exNode)).toEqual({ allocatable: '2', requested: 2 });
    expect((await exec('ex-late', 'ping', '-c1', '-W2', await ipOf('ex-b'))).stdout).toContain('1 received');
    // Now one goes without a successor: its device is back on the node, down, without address.
    const b = eniOf(await ipOf('ex-b'))!;
    await deletePod('ex-b');
    const back = await until(async () => (await nodeLinks(exNode)).find((l) => l.address === b.mac));
    expect(back.operstate).toBe('DOWN');
    expect(back.addr_info.filter((a) => !a.local.startsWith('fe80'))).toEqual([]);
    await until(async () => !(await json(['get', 'enipool', exNode])).status?.used?.[b.primaryIp]);
    expect(await eniAccount(exNode)).toEqual({ allocatable: '2', requested: 1 });
  }, 180_000);
});
