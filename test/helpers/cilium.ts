/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { CILIUM_NODES, type CiliumNode } from '../../src/operator/cilium/types.js';
import { ciliumNodeCrd } from '../../testbed/cilium/index.js';
import type { Fixture } from '../../testbed/ecs/index.js';
import { standInFor, type AgentFlags, type CiliumAgentStandIn } from '../../testbed/cilium/agent.js';
import { testCluster, type TestCluster } from './cluster.js';
import { http } from './kube.js';

export interface CiliumCluster extends TestCluster {
  /** Registers the instance's Node and starts a stand-in cilium-agent for it. */
  addCiliumNode(
    instanceId: string,
    o?: { flags?: AgentFlags; updateRateMs?: number; labels?: Record<string, string> },
  ): Promise<CiliumAgentStandIn>;
  agents: CiliumAgentStandIn[];
  ciliumNode(name: string): Promise<CiliumNode>;
}

/** A test cluster with our CiliumNode CRD installed, whose nodes run stand-in cilium-agents. */
export async function ciliumCluster(patch?: (f: Fixture) => void): Promise<CiliumCluster> {
  const base = await testCluster(patch);
  await base.kube.createCrds([ciliumNodeCrd()]);
  const agents: CiliumAgentStandIn[] = [];
  const close = base.close.bind(base);
  return Object.assign(base, {
    agents,
    async addCiliumNode(instanceId: string, o: Parameters<CiliumCluster['addCiliumNode']>[1] = {}) {
      const name = await base.addNode(instanceId, o.labels);
      const node = (await http(base.kube, 'GET', `/api/v1/nodes/${name}`)).body as any;
      const agent = standInFor(base.ecs.world, {
        kc: base.kc,
        node: name,
        nodeUid: node.metadata.uid,
        flags: o.flags,
        updateRateMs: o.updateRateMs ?? 1000,
        labels: o.labels,
      });
      await agent.start();
      agents.push(agent);
      return agent;
    },
    ciliumNode: async (name: string) =>
      (await base.custom.getClusterCustomObject({ ...CILIUM_NODES, name })) as CiliumNode,
    async close() {
      await Promise.all(agents.map((a) => a.stop()));
      await close();
    },
  });
}
