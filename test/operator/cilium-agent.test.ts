import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { CiliumNode } from '../../src/operator/cilium/types.js';
import { CILIUM_NODES } from '../../src/operator/cilium/types.js';
import { gatewayOf, type CiliumAgentStandIn } from '../../testbed/cilium/agent.js';
import { ciliumCluster, type CiliumCluster } from '../helpers/cilium.js';
import { eventually } from '../helpers/ecs.js';

/** The stand-in agent checked against reference/cilium-node.md §2, rule by rule, with no operator: the test writes what one would. */
let c: CiliumCluster;
let agent: CiliumAgentStandIn;
const RATE_MS = 600;
beforeAll(async () => {
  c = await ciliumCluster();
  agent = await c.addCiliumNode('i-demo-01', { updateRateMs: RATE_MS, labels: { team: 'a' } });
});
afterAll(() => c.close());

const eni = (id: string, index: string) => ({
  'network-interface-id': id,
  'mac-address': '00:16:3e:00:00:01',
  type: 'Secondary',
  vswitch: { 'vswitch-id': 'vsw-1', cidr: '10.1.2.0/24' },
  'primary-ip-address': '10.1.2.9',
  'private-ipsets': [],
  tags: { 'cilium-eni-index': index },
});

/** Writes, as an operator would: the status (UpdateStatus), then the spec (Update), each on a fresh read. */
async function operatorWrites(
  status: CiliumNode['status'],
  pool?: Record<string, { resource: string; owner?: string }>,
) {
  // The agent writes too: a write it beat is done again on what it wrote, as an operator would.
  for (let attempt = 0; ; attempt++) {
    try {
      return await writeOnce(status, pool);
    } catch (e) {
      if ((e as { code?: number }).code !== 409 || attempt > 5) throw e;
    }
  }
}

async function writeOnce(status: CiliumNode['status'], pool?: Record<string, { resource: string; owner?: string }>) {
  let node = await c.ciliumNode(agent.name);
  node = (await c.custom.replaceClusterCustomObjectStatus({
    ...CILIUM_NODES,
    name: agent.name,
    body: { ...node, status: { ...node.status, ...status, ipam: { ...node.status?.ipam, ...status?.ipam } } },
  })) as CiliumNode;
  if (pool)
    await c.custom.replaceClusterCustomObject({
      ...CILIUM_NODES,
      name: agent.name,
      body: { ...node, spec: { ...node.spec, ipam: { ...node.spec.ipam, pool } } },
    });
}

describe('the stand-in cilium-agent', () => {
  it('creates its CiliumNode from the instance metadata, owned by its Node', async () => {
    const node = await c.ciliumNode(agent.name);
    expect(node.spec['instance-id']).toBe('i-demo-01');
    expect(node.spec['alibaba-cloud']).toMatchObject({ 'instance-type': 'ecs.g7.large', 'vpc-id': 'vpc-demo' });
    expect(node.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'Node', name: agent.name });
  });

  it('does not serve before two addresses are pooled and an ENI is in status', async () => {
    await operatorWrites({}, { '10.1.2.10': { resource: 'eni-2' } });
    await new Promise((r) => setTimeout(r, 300));
    expect(agent.serving()).toBe(false);
    await operatorWrites({}, { '10.1.2.10': { resource: 'eni-2' }, '10.1.2.11': { resource: 'eni-2' } });
    await new Promise((r) => setTimeout(r, 300));
    expect(agent.serving()).toBe(false);
    // The pool names an ENI the status does not list: the allocation fails, no other address is tried.
    await operatorWrites({ 'alibaba-cloud': { enis: { 'eni-1': eni('eni-1', '0') as never } } });
    await eventually(() => (agent.serving() ? true : undefined));
    expect(() => agent.allocateNext('ns/p')).toThrow('unable to find ENI eni-2');
  });

  it('allocates in pool order, skipping owned addresses, with the route facts of the ENI', async () => {
    await operatorWrites(
      { 'alibaba-cloud': { enis: { 'eni-2': eni('eni-2', '3') as never } } },
      {
        '10.1.2.10': { resource: 'eni-2', owner: 'someone' },
        '10.1.2.11': { resource: 'eni-2' },
        '10.1.2.12': { resource: 'eni-2' },
      },
    );
    await eventually(() => (agent.view()?.spec.ipam?.pool?.['10.1.2.12'] ? true : undefined));
    const got = agent.allocateNext('ns/p1');
    expect(got).toMatchObject({ ip: '10.1.2.11', eni: 'eni-2', gateway: '10.1.2.253', interfaceNumber: 3 });
    expect(gatewayOf('10.1.0.0/20')).toBe('10.1.15.253');
    // Its used, written through the status subresource.
    await eventually(async () =>
      (await c.ciliumNode(agent.name)).status?.ipam?.used?.['10.1.2.11'] ? true : undefined,
    );
  });

  it('answers release requests as §2.4 says', async () => {
    await operatorWrites({
      ipam: {
        'release-ips': {
          '10.1.2.11': 'marked-for-release', // allocated: do-not-release
          '10.1.2.12': 'marked-for-release', // free: ready-for-release
          '10.1.2.99': 'marked-for-release', // not in the pool: do-not-release
          '10.1.2.98': 'released', // not in the pool: the entry goes
        },
      },
    });
    const states = await eventually(async () => {
      const s = (await c.ciliumNode(agent.name)).status?.ipam?.['release-ips'] ?? {};
      return s['10.1.2.12'] === 'ready-for-release' && !('10.1.2.98' in s) ? s : undefined;
    });
    expect(states).toEqual({
      '10.1.2.11': 'do-not-release',
      '10.1.2.12': 'ready-for-release',
      '10.1.2.99': 'do-not-release',
    });
    // Once marked, an address is not handed out.
    expect(() => agent.allocateNext('ns/p2')).toThrow('no more IPs available');
  });

  it('writes its status at most once per update rate', () => {
    const gaps = agent.statusWrites.slice(1).map((t, i) => t - agent.statusWrites[i]!);
    expect(agent.statusWrites.length).toBeGreaterThan(1);
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(RATE_MS - 20);
  });

  it('sends its status back as Go encodes it: false and empty fields are dropped (omitempty)', async () => {
    const withEmpties = {
      ...eni('eni-2', '3'),
      'private-ipsets': [{ 'private-ip-address': '10.1.2.11', primary: false }],
    };
    await operatorWrites({ 'alibaba-cloud': { enis: { 'eni-2': withEmpties as never } }, ipam: { 'release-ips': {} } });
    await eventually(() =>
      agent.view()?.status?.['alibaba-cloud']?.enis?.['eni-2']?.['private-ipsets'].length ? true : undefined,
    );
    const writes = agent.statusWrites.length;
    agent.release('10.1.2.11');
    const after = await eventually(async () =>
      agent.statusWrites.length > writes ? c.ciliumNode(agent.name) : undefined,
    );
    expect(after.status!['alibaba-cloud']!.enis!['eni-2']!['private-ipsets']).toEqual([
      { 'private-ip-address': '10.1.2.11' },
    ]);
    expect(after.status?.ipam?.['release-ips']).toBeUndefined();
    expect(after.status?.ipam?.used).toBeUndefined();
  });

  it('resets its alibaba-cloud spec and labels on every update, leaving the pool alone', async () => {
    const before = await c.ciliumNode(agent.name);
    await c.custom.replaceClusterCustomObject({
      ...CILIUM_NODES,
      name: agent.name,
      body: {
        ...before,
        metadata: { ...before.metadata, labels: { added: 'by-someone' } },
        spec: { ...before.spec, 'alibaba-cloud': { ...before.spec['alibaba-cloud'], vswitches: ['vsw-x'] } },
      },
    });
    await agent.updateCiliumNode();
    const after = await c.ciliumNode(agent.name);
    expect(after.metadata.labels).toEqual({ team: 'a' });
    expect(after.spec['alibaba-cloud']?.vswitches).toBeUndefined();
    expect(after.spec.ipam?.pool).toEqual(before.spec.ipam?.pool);
  });
});
