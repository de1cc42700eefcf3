import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { CiliumAgentStandIn } from '../../testbed/cilium/agent.js';
import { ciliumCluster, type CiliumCluster } from '../helpers/cilium.js';
import { POD_CLASS, allReady, deletePool, eventsFor } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

const cilium = { config: { poolApi: 'ciliumnode' as const } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The addresses the cloud has on the instance's ENIs now. */
function cloudAddresses(c: CiliumCluster, instanceId: string): Set<string> {
  const out = new Set<string>();
  for (const e of c.ecs.world.enis.values())
    if (e.instanceId === instanceId) for (const ip of e.secondaryIps) out.add(ip);
  return out;
}

/** Every address the agent handed out is still the node's in the cloud, and in its pool. */
async function nothingInUseLost(c: CiliumCluster, agent: CiliumAgentStandIn, instanceId: string): Promise<void> {
  const cn = await c.ciliumNode(agent.name);
  const cloud = cloudAddresses(c, instanceId);
  for (const ip of agent.allocations().keys()) {
    expect(cn.spec.ipam?.pool?.[ip]).toBeDefined();
    expect(cloud.has(ip)).toBe(true);
  }
}

describe('--pool-api ciliumnode, 8 nodes', () => {
  let c: CiliumCluster;
  beforeAll(async () => {
    c = await ciliumCluster();
  });
  afterAll(() => c.close());

  it('converges: every agent serves, and no address reaches a pool before its ENI is in status', async () => {
    await c.addClass('cilium', { ...POD_CLASS, preAllocate: 5 });
    const ids = Array.from({ length: 8 }, (_, n) => `i-demo-${String(n + 1).padStart(2, '0')}`);
    const agents = await Promise.all(ids.map((id) => c.addCiliumNode(id)));
    await c.startOperator(cilium);
    await allReady(
      c,
      agents.map((a) => a.name),
    );
    await Promise.all(agents.map((a) => a.untilServing()));
    // One create and one attach per node, as in the ENIPool mode.
    expect(c.mutatingCalls()).toEqual({ CreateNetworkInterface: 8, AttachNetworkInterface: 8 });
    for (const a of agents) {
      const got = a.allocateNext('default/pod-a');
      const cn = await c.ciliumNode(a.name);
      const eni = cn.status!['alibaba-cloud']!.enis![got.eni]!;
      expect(eni.tags['cilium-eni-index']).toBe(String(got.interfaceNumber));
      expect(got.interfaceNumber).toBeGreaterThan(0);
      expect(got.mac).toBe(eni['mac-address']);
      expect(got.gateway).toMatch(/\.253$/);
      // The primary ENI is listed too (the agent needs a non-empty list to start), never pooled.
      const primary = Object.values(cn.status!['alibaba-cloud']!.enis!).find((e) => e.type === 'Primary')!;
      expect(primary.tags['cilium-eni-index']).toBe('0');
      expect(Object.values(cn.spec.ipam!.pool!).some((p) => p.resource === primary['network-interface-id'])).toBe(
        false,
      );
      expect(a.unlisted.size).toBe(0);
    }
    // The agent's word reaches the pool the planner reads.
    await eventually(async () => {
      const p = await c.pool(agents[0]!.name);
      return Object.values(p.status?.used ?? {}).some((u) => u.pod === 'default/pod-a') ? p : undefined;
    });
  });

  it('leaves the CiliumNode alone when the agent writes it back as it reads it (Go drops empty fields)', async () => {
    const agent = c.agents[1]!;
    await sleep(1500);
    const before = await agent.settledForeignWrites();
    for (let n = 0; n < 3; n++) {
      const writes = agent.statusWrites.length;
      // A write of the same used: only the encoding of the operator's fields can differ.
      agent.release(agent.allocateNext('default/brief').ip);
      await eventually(() => (agent.statusWrites.length > writes ? true : undefined));
    }
    await sleep(1000);
    expect(await agent.settledForeignWrites()).toBe(before);
  });

  it('records the pool Events on the CiliumNode', async () => {
    const list = await c.kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: 'default' });
    const created = list.items.filter((e) => e.reason === 'CreatedENI');
    expect(created.length).toBeGreaterThanOrEqual(8);
    for (const e of created) expect(e.involvedObject).toMatchObject({ apiVersion: 'cilium.io/v2', kind: 'CiliumNode' });
  });
});

describe('--pool-api ciliumnode, a class agents cannot use', () => {
  let c: CiliumCluster;
  beforeAll(async () => {
    c = await ciliumCluster();
  });
  afterAll(() => c.close());

  it('refuses a prefix class, makes no ENI for it, and says why on the class and the node', async () => {
    await c.addClass('prefix', { ...POD_CLASS, ipv4Mode: 'Prefix', preAllocate: 4 });
    const agent = await c.addCiliumNode('i-demo-02');
    await c.startOperator(cilium);
    const valid = await eventually(async () => {
      const cls = (await c.custom.getClusterCustomObject({
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'prefix',
      })) as { status?: { conditions?: Array<{ type: string; status: string; reason: string; message: string }> } };
      return cls.status?.conditions?.find((x) => x.type === 'Valid');
    });
    expect(valid).toMatchObject({ status: 'False', reason: 'UnservableByCilium' });
    expect(valid.message).toContain('ipv4Mode Prefix cannot be served to cilium-agents');
    await eventually(async () =>
      (await eventsFor(c, agent.name)).some((e) => e.startsWith('ClassInvalid:') && e.includes('UnservableByCilium'))
        ? true
        : undefined,
    );
    await sleep(1000);
    expect(c.mutatingCalls()).toEqual({});
    const cn = await c.ciliumNode(agent.name);
    expect(cn.spec.ipam?.pool ?? {}).toEqual({});
    expect(agent.serving()).toBe(false);
  });
});

describe('--pool-api ciliumnode, release and restarts', () => {
  let c: CiliumCluster;
  beforeAll(async () => {
    c = await ciliumCluster();
  });
  afterAll(() => c.close());

  const classSpec = { ...POD_CLASS, preAllocate: 8, releaseExcessIPs: true, releaseDelaySeconds: 1 };
  const setPreAllocate = (preAllocate: number) =>
    c.custom.patchClusterCustomObject(
      {
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        name: 'release',
        body: { spec: { preAllocate } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

  /** The CiliumNode's pool is the ENIPool's published addresses, with no handshake open: the planner's result reached the agent. */
  const settled = (agent: CiliumAgentStandIn, test: (size: number) => boolean, timeoutMs = 30_000) => {
    let last: unknown;
    return eventually(async () => {
      const node = await c.ciliumNode(agent.name);
      const pool = await c.pool(agent.name);
      last = {
        pool: node.spec.ipam?.pool,
        states: node.status?.ipam?.['release-ips'],
        status: pool.status,
        spec: pool.spec,
      };
      const published = (pool.status?.enis ?? []).filter((e) => e.state === 'InUse').flatMap((e) => e.ips ?? []);
      const inCilium = Object.keys(node.spec.ipam?.pool ?? {});
      const open =
        Object.keys(node.status?.ipam?.['release-ips'] ?? {}).length +
        Object.keys(pool.status?.releaseRequests ?? {}).length;
      const same = inCilium.length === published.length && published.every((ip) => ip in node.spec.ipam!.pool!);
      return same && open === 0 && test(inCilium.length) ? node : undefined;
    }, timeoutMs).catch((e: unknown) => {
      if (process.env.DEBUG_CILIUM) console.log(JSON.stringify(last, null, 1));
      throw e;
    });
  };

  it('scales down only through the handshake, never releasing an address the agent holds', async () => {
    await c.addClass('release', classSpec);
    // A slow status writer: the operator learns of allocations late, and asks about some in use.
    const agent = await c.addCiliumNode('i-demo-01', { updateRateMs: 3000 });
    await c.startOperator(cilium);
    await agent.untilServing();
    await settled(agent, (n) => n >= 8);
    for (let n = 0; n < 3; n++) agent.allocateNext(`default/pod-${n}`);
    const before = cloudAddresses(c, 'i-demo-01').size;
    await setPreAllocate(1);
    // marked -> ready -> unassigned -> released -> out of the pool -> the agent drops the entry.
    const cn = await settled(agent, (n) => n < before);
    await nothingInUseLost(c, agent, 'i-demo-01');
    expect(cloudAddresses(c, 'i-demo-01').size).toBe(Object.keys(cn.spec.ipam!.pool!).length);
    expect(Object.keys(cn.status!.ipam!.used!).sort()).toEqual([...agent.allocations().keys()].sort());
    const events = await c.kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: 'default' });
    expect(events.items.some((e) => e.reason === 'ReleasedIPs' && e.involvedObject.name === agent.name)).toBe(true);
  });

  it('keeps the pool while the agent rewrites its CiliumNode every few hundred milliseconds', async () => {
    const agent = c.agents[0]!;
    let rewrites = 0;
    const churn = setInterval(() => void agent.updateCiliumNode().then(() => rewrites++), 300);
    try {
      // Up to the instance's limit (10 on an ecs.g7.large) while the agent rewrites its object.
      await setPreAllocate(4);
      await settled(agent, (n) => n >= agent.allocations().size + 4);
      for (let n = 3; n < 6; n++) agent.allocateNext(`default/pod-${n}`);
      await settled(agent, (n) => n === 10);
    } finally {
      clearInterval(churn);
    }
    expect(rewrites).toBeGreaterThan(5);
    const cn = await c.ciliumNode(agent.name);
    expect(cn.spec['alibaba-cloud']?.['instance-type']).toBeDefined();
    expect(agent.unlisted.size).toBe(0);
    await nothingInUseLost(c, agent, 'i-demo-01');
  });

  it('finishes a handshake after the operator restarts in the middle of it', async () => {
    const agent = c.agents[0]!;
    const before = cloudAddresses(c, 'i-demo-01').size;
    // Three pods leave: their addresses become excess.
    for (const ip of [...agent.allocations().keys()].slice(0, 3)) agent.release(ip);
    await setPreAllocate(1);
    // Marked, and the operator goes before it has seen the answer.
    await eventually(
      async () => {
        const states = Object.values((await c.ciliumNode(agent.name)).status?.ipam?.['release-ips'] ?? {});
        return states.includes('marked-for-release') ? true : undefined;
      },
      20_000,
      10,
    );
    await c.operators[0]!.stop();
    await sleep(1500);
    await c.startOperator(cilium);
    await settled(agent, (n) => n < before, 40_000);
    await nothingInUseLost(c, agent, 'i-demo-01');
    expect(agent.unlisted.size).toBe(0);
  });
});

describe('--pool-api ciliumnode, a pool deleted while its node runs', () => {
  let c: CiliumCluster;
  beforeAll(async () => {
    c = await ciliumCluster();
  });
  afterAll(() => c.close());

  it('gives an ENI back only once the agent let its address go, through a refusal and a fresh ask', async () => {
    await c.addClass('cilium', { ...POD_CLASS, preAllocate: 8 });
    const agent = await c.addCiliumNode('i-demo-01', { updateRateMs: 500 });
    await c.startOperator(cilium);
    const [pool] = await allReady(c, [agent.name]);
    await agent.untilServing();
    const held = agent.allocateNext('default/web');
    await eventually(async () => ((await c.pool(agent.name)).status?.used?.[held.ip] ? true : undefined));
    const enis = pool!.status!.enis!.map((e) => e.id);
    expect(enis).toContain(held.eni);
    await deletePool(c, agent.name);
    // Every other ENI goes; the held one waits on the agent's refusal.
    await eventually(
      () => (enis.every((id) => id === held.eni || !c.ecs.world.enis.has(id)) ? true : undefined),
      20_000,
    );
    const refused = await eventually(async () => {
      const states = (await c.ciliumNode(agent.name)).status?.ipam?.['release-ips'] ?? {};
      return states[held.ip] === 'do-not-release' ? states : undefined;
    });
    expect(refused[held.ip]).toBe('do-not-release');
    await sleep(1500);
    expect(c.ecs.world.enis.has(held.eni)).toBe(true);
    expect(cloudAddresses(c, 'i-demo-01').has(held.ip)).toBe(true);
    // The pod goes: the refusal is withdrawn, the address asked for afresh, confirmed, and the ENI goes.
    agent.release(held.ip);
    await eventually(() => (c.ecs.world.enis.has(held.eni) ? undefined : true), 30_000);
    // The node still runs and its class selects it: a new pool, and the agent serves from it.
    const again = await eventually(async () => {
      const p = (await c.pools()).find((x) => x.metadata.name === agent.name);
      return p && p.metadata.uid !== pool!.metadata.uid && !p.metadata.deletionTimestamp ? p : undefined;
    }, 15_000);
    await allReady(c, [again.metadata.name]);
    const next = await eventually(async () => {
      const cn = await c.ciliumNode(agent.name);
      const inPool = Object.values(cn.spec.ipam?.pool ?? {}).map((a) => a.resource);
      // The old handshakes end: released, then dropped by the agent.
      const open = Object.keys(cn.status?.ipam?.['release-ips'] ?? {}).length;
      return inPool.length >= 8 && inPool.every((id) => !enis.includes(id!)) && open === 0 ? cn : undefined;
    }, 20_000);
    expect(next.status?.ipam?.used).toBeUndefined();
    expect(agent.allocateNext('default/web-2').eni).not.toBe(held.eni);
  });
});
