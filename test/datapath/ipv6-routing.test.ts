import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { IpRouteKernel } from '../../src/agent/datapath/kernel.js';
import { isEmptyPlan, type Desired } from '../../src/agent/datapath/model.js';
import { batchLines } from '../../src/agent/datapath/node-routing.js';
import { planDatapath } from '../../src/agent/datapath/plan.js';
import { datapathUnavailable, deleteNamespaces, inNs, ip, sh } from '../helpers/netns.js';

/*
 * The node datapath's two families against real iproute2 in a namespace: what the agent reads
 * back of what it wrote must be what it wants, in each family, so that a reconcile after an
 * apply has nothing left to do (a route read back in the wrong family would be deleted and
 * added again on every reconcile).
 */
const why = datapathUnavailable();
if (why) console.warn(`IPv6 routing test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const P = `eip6r${process.pid % 10000}-`;
const NS = `${P}node`;
const config = { tableBase: 3000, mtu: 1500 };
const kernel = new IpRouteKernel({ netns: NS });
const dual = {
  id: 'eni-dual',
  mac: '00:16:3e:00:00:1f',
  deviceIndex: 1,
  gatewayIP: '192.168.67.253',
  vSwitchCIDR: '192.168.64.0/22',
  gatewayIPv6: 'fe80::ecff:ffff:feff:ffff',
};
const v4only = { ...dual, id: 'eni-v4', mac: '00:16:3e:00:00:2f', deviceIndex: 2, gatewayIPv6: undefined };
const desired: Desired = {
  enis: [dual, v4only],
  addresses: [
    { ip: '192.168.64.10', eniId: 'eni-dual' },
    { ip: '2408:4005:3c0:a100::106', eniId: 'eni-dual' },
    { ip: '192.168.64.20', eniId: 'eni-v4' },
  ],
};

/** A table's IPv6 routes; none (an empty string) where the table has never held one. */
const routes6 = async (table: string) => (await sh('ip', ['-n', NS, '-6', 'route', 'show', 'table', table])).stdout;

async function reconcile(d: Desired): Promise<string[]> {
  const lines = batchLines(planDatapath(d, await kernel.read(), config)).map((l) => l.text);
  const failed = await kernel.apply(lines);
  expect([...failed]).toEqual([]);
  return lines;
}

beforeAll(async () => {
  if (why) return;
  deleteNamespaces(P);
  await ip('netns', 'add', NS);
  for (const [dev, mac] of [
    ['eth1', dual.mac],
    ['eth2', v4only.mac],
  ] as const) {
    await ip('-n', NS, 'link', 'add', dev, 'address', mac, 'type', 'veth', 'peer', 'name', `${dev}p`);
    await ip('-n', NS, 'link', 'set', `${dev}p`, 'up');
  }
});

afterAll(() => {
  if (!why) deleteNamespaces(P);
});

maybe('the node datapath in both families (root)', () => {
  it('writes each family’s rules and routes once, and a reconcile after it has nothing to do', async () => {
    const first = await reconcile(desired);
    expect(first).toContain(
      '-6 route add ::/0 via fe80::ecff:ffff:feff:ffff dev eth1 table 3001 proto 236 metric 1024',
    );
    expect(first).toContain('-6 rule add priority 111 protocol 236 from 2408:4005:3c0:a100::106/128 lookup 3001');
    // Read back, it is what is wanted: nothing to add or delete, again and again.
    for (let k = 0; k < 3; k++) expect(isEmptyPlan(planDatapath(desired, await kernel.read(), config))).toBe(true);
    expect(await inNs(NS, 'ip', '-6', 'route', 'show', 'table', '3001')).toMatch(
      /^default via fe80::ecff:ffff:feff:ffff dev eth1 proto 236 metric 1024/m,
    );
    // An ENI of a pool without IPv6 gets no IPv6 route.
    expect(await routes6('3002')).toBe('');
    expect(await inNs(NS, 'ip', '-4', 'route', 'show', 'table', '3002')).toContain(
      'default via 192.168.67.253 dev eth2',
    );
  });

  it('takes an IPv6 address’s rules away when its pod leaves, and an ENI’s IPv6 route when it leaves the pool', async () => {
    const without = { ...desired, addresses: desired.addresses.filter((a) => !a.ip.includes(':')) };
    const lines = await reconcile(without);
    expect(lines.filter((l) => l.startsWith('-6 rule del'))).toHaveLength(2);
    expect(await inNs(NS, 'ip', '-6', 'rule', 'show')).not.toContain('2408:4005:3c0:a100::106');
    await reconcile({ enis: [v4only], addresses: [{ ip: '192.168.64.20', eniId: 'eni-v4' }] });
    expect(await routes6('3001')).toBe('');
    expect(await inNs(NS, 'ip', '-4', 'route', 'show', 'table', '3001')).toBe('');
    expect(
      isEmptyPlan(planDatapath({ enis: [v4only], addresses: without.addresses.slice(1) }, await kernel.read(), config)),
    ).toBe(true);
  });
});
