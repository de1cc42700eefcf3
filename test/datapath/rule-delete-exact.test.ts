import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { IpRouteKernel } from '../../src/agent/datapath/kernel.js';
import { batchLines } from '../../src/agent/datapath/node-routing.js';
import { planDatapath } from '../../src/agent/datapath/plan.js';
import { datapathUnavailable, deleteNamespaces, inNs, ip } from '../helpers/netns.js';

/*
 * On a real kernel, whose rule and route deletes treat what a line does not give as a wildcard
 * and remove the first match: a rule at the agent's priority and protocol with a selector the
 * agent never sets (iif) is not the agent's, so reconciling leaves it and the pod's own rules in
 * place; and a stale route of a detached ENI's table that has a metric is deleted itself, not a
 * route beside it. (Found by review: the delete line named only priority, protocol, from, to and
 * lookup, so it removed the pod's egress rule instead.)
 */
const why = datapathUnavailable();
if (why) console.warn(`rule-delete test skipped: ${why}`);
const maybe = why ? describe.skip : describe;
const NS = `eiprd${process.pid % 10000}`;
const ENI = {
  id: 'eni-a',
  mac: '00:16:3e:aa:00:01',
  deviceIndex: 1,
  gatewayIP: '10.1.1.253',
  vSwitchCIDR: '10.1.1.0/24',
};
const POD = '10.1.1.10';
const rule = (...args: string[]) => inNs(NS, 'ip', 'rule', 'add', ...args, 'protocol', '236');

beforeAll(async () => {
  if (why) return;
  deleteNamespaces(NS);
  await ip('netns', 'add', NS);
  await inNs(NS, 'ip', 'link', 'set', 'lo', 'up');
  // The ENI's device: a veth (its peer stays in the namespace, down).
  await inNs(NS, 'ip', 'link', 'add', 'eth1', 'address', ENI.mac, 'type', 'veth', 'peer', 'name', 'peer1');
  // The pod's two rules, as the agent sets them at its ADD, and one more at its priority and protocol on iif.
  await rule('to', `${POD}/32`, 'lookup', 'main', 'priority', '20');
  await rule('from', `${POD}/32`, 'lookup', '3001', 'priority', '111');
  await rule('from', `${POD}/32`, 'iif', 'lo', 'lookup', '3001', 'priority', '111');
  // A detached ENI's table (3002): two default routes of ours that differ only by their metric.
  for (const metric of ['10', '20'])
    await inNs(NS, 'ip', 'route', 'add', 'blackhole', 'default', 'table', '3002', 'proto', '236', 'metric', metric);
}, 30_000);
afterAll(() => {
  if (!why) deleteNamespaces(NS);
});

maybe('the agent’s deletes on a real kernel (root)', () => {
  it('leaves a rule with a selector it never sets, and the pod’s rules; removes each stale route exactly', async () => {
    const kernel = new IpRouteKernel({ netns: NS });
    const before = await kernel.read();
    const desired = { enis: [ENI], addresses: [{ ip: POD, eniId: ENI.id }] };
    const plan = planDatapath(desired, before, { tableBase: 3000, mtu: 1500 });
    expect(plan.delRules).toEqual([]);
    expect(plan.delRoutes.map((r) => [r.table, r.metric])).toEqual([
      [3002, 10],
      [3002, 20],
    ]);
    // Deleted one at a time, the second first, each line must remove the route it names (not the first match).
    const [first, second] = batchLines(plan).filter((l) => l.change === 'route-del');
    expect(await kernel.apply([second!.text])).toEqual(new Map());
    expect((await kernel.read()).routes.filter((r) => r.table === 3002).map((r) => r.metric)).toEqual([10]);
    expect(await kernel.apply([first!.text])).toEqual(new Map());
    expect(
      await kernel.apply(
        batchLines(plan)
          .filter((l) => l.change !== 'route-del')
          .map((l) => l.text),
      ),
    ).toEqual(new Map());
    const after = await kernel.read();
    expect(after.routes.filter((r) => r.table === 3002)).toEqual([]);
    const rules = after.rules.filter((r) => r.protocol === 236);
    expect(rules).toEqual(
      expect.arrayContaining([
        { priority: 20, dst: `${POD}/32`, table: 254, protocol: 236 },
        { priority: 111, src: `${POD}/32`, table: 3001, protocol: 236 },
        { priority: 111, src: `${POD}/32`, table: 3001, protocol: 236, extra: true },
      ]),
    );
    expect(rules).toHaveLength(3);
  });
});
