import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { standInFor, type CiliumAgentStandIn } from '../../testbed/cilium/agent.js';
import { CILIUM_NODE_CRD_PATH } from '../../testbed/cilium/index.js';
import { chartValues, runtimeUnavailable, type EmulatedCluster } from '../../testbed/cluster/index.js';
import { eventually } from '../helpers/ecs.js';
import { CHART, ROOT, setArgs, template } from '../helpers/helm.js';
import { type Kubectl } from '../helpers/kube.js';
import { chartCluster, kubectlJson, type Helm } from '../helpers/chart-cluster.js';
import { roleAudit } from '../helpers/rbac-audit.js';

// The chart with operator.poolApi=ciliumnode as a Cilium user installs it, under its own RBAC:
// stand-in cilium-agents (Cilium's, not under test, so with their own rights) serve pods from
// their CiliumNodes, addresses no longer needed go back through their handshake, the README's
// uninstall gives every ENI back, and the audit log holds the operator's requests against the
// chart's roles: every one allowed, every grant of this mode used.
const why = runtimeUnavailable();
if (why) console.warn(`helm Cilium-mode tests skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const NS = 'kube-system';
const OPERATOR = `system:serviceaccount:${NS}:eni-ipam-operator`;
let cluster: EmulatedCluster;
let kubectl: Kubectl;
let helm: Helm;
let values: string[];
let uninstalledAt = Infinity;
const agents: CiliumAgentStandIn[] = [];

const until = <T>(fn: () => Promise<T | undefined | false | ''>, ms = 30_000) =>
  eventually(fn as () => Promise<T>, ms, 250);
const json = kubectlJson(() => kubectl);
const calls = (action: string, since = 0) => cluster.ecs.calls({ since, action });
const ours = () =>
  [...cluster.ecs.world.enis.values()].filter((e) =>
    e.tags.some((t) => t.key === 'eni-ipam.io/cluster' && t.value === 'emulated'),
  );

/** A stand-in cilium-agent for each node, with the cluster's admin credentials (the agents are Cilium's). */
async function startAgents(): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  for (const node of cluster.nodes) {
    const nodeUid = (await json(['get', 'node', node])).metadata.uid;
    const agent = standInFor(cluster.ecs.world, { kc, node, nodeUid, updateRateMs: 500 });
    await agent.start();
    agents.push(agent);
  }
}

maybe('the chart with operator.poolApi=ciliumnode, under its own RBAC (root)', () => {
  beforeAll(async () => {
    ({ cluster, kubectl, helm } = await chartCluster({ nodes: 2, backoffBaseMs: 1000, name: 'helm-cilium' }));
    values = [
      ...chartValues(cluster),
      'operator.poolApi=ciliumnode',
      'defaultClass.spec.preAllocate=2',
      'defaultClass.spec.releaseExcessIPs=true',
      'defaultClass.spec.releaseDelaySeconds=2',
      'defaultClass.spec.deleteEmptyENIs=true',
    ];
    // Cilium's CRD, as Cilium's operator registers it.
    expect((await kubectl(['apply', '-f', CILIUM_NODE_CRD_PATH])).code).toBe(0);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await cluster?.close();
  });

  test('installs with no agent of its own, and every cilium-agent serves from its CiliumNode', async () => {
    const r = await helm(['install', 'eni-ipam', CHART, '--wait', '--timeout', '90s', ...setArgs(values)]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((await json(['get', 'daemonsets', '-n', NS])).items).toEqual([]);
    await startAgents();
    await Promise.all(agents.map((a) => a.untilServing(60_000)));
    for (const a of agents) {
      const got = a.allocateNext('default/first');
      expect(got.interfaceNumber).toBeGreaterThan(0);
      a.release(got.ip);
    }
    expect(agents.every((a) => a.unlisted.size === 0)).toBe(true);
  }, 150_000);

  test('addresses a node no longer needs go back through the agent’s handshake', async () => {
    const agent = agents[0]!;
    const since = Date.now();
    const held: string[] = [];
    // Pods arrive faster than the pool holds: each waits for the operator to add addresses.
    for (let i = 0; i < 8; i++)
      held.push(await until(async () => agent.allocateNext(`default/burst-${i}`).ip || undefined, 60_000));
    const grown = Object.keys((await json(['get', 'ciliumnode', agent.name])).spec.ipam.pool).length;
    for (const ip of held) agent.release(ip);
    // Excess for releaseDelaySeconds (2 s), marked, the agent's ready-for-release, a live read, the unassign.
    await until(
      async () => calls('UnassignPrivateIpAddresses', since).length + calls('DeleteNetworkInterface', since).length > 0,
      60_000,
    );
    await until(async () => {
      const cn = await json(['get', 'ciliumnode', agent.name]);
      return (
        Object.keys(cn.spec.ipam.pool).length < grown && !Object.keys(cn.status?.ipam?.['release-ips'] ?? {}).length
      );
    }, 30_000);
    const logs = (await kubectl(['logs', '-n', NS, 'deployment/eni-ipam-operator'])).stdout;
    expect(logs).not.toContain('403');
  }, 150_000);

  test('the README’s uninstall gives every ENI back through the agents’ handshake', async () => {
    expect((await kubectl(['delete', 'enipoolclasses', '--all'])).code).toBe(0);
    expect((await kubectl(['delete', 'enipools', '--all', '--wait=false'])).code).toBe(0);
    await until(async () => (await json(['get', 'enipools'])).items.length === 0, 120_000);
    uninstalledAt = Date.now();
    expect((await helm(['uninstall', 'eni-ipam', '--wait', '--timeout', '90s'])).code).toBe(0);
    expect((await kubectl(['delete', '-f', `${ROOT}/crds`])).code).toBe(0);
    await until(async () => ours().length === 0, 30_000);
    expect(ours()).toEqual([]);
  }, 240_000);

  test('the chart’s operator role grants exactly what the operator used in this run', async () => {
    const objs = await template(values);
    const entries = cluster.kube.audit({ user: OPERATOR });
    expect(entries.some((e) => e.resource === 'ciliumnodes' && e.subresource === 'status')).toBe(true);
    const audit = roleAudit(entries, objs, 'eni-ipam-operator', uninstalledAt);
    expect(audit.refused).toEqual([]);
    expect(audit.ungranted).toEqual([]);
    // Every grant this mode adds was used (the others' paths, a node leaving, the Lease made again,
    // are the lifecycle test's).
    expect(audit.unused.filter((g) => g.includes('cilium.io'))).toEqual([]);
  }, 60_000);
});
