import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { IpRouteKernel } from '../../src/agent/datapath/kernel.js';
import { parseBatchErrors } from '../../src/agent/datapath/iproute.js';
import { datapathUnavailable, deleteNamespaces, inNs, ip } from '../helpers/netns.js';

/* What the agent reads of a real kernel (ip -N -d -json in a namespace of its own) and how it reads ip -batch's errors. */
const why = datapathUnavailable();
const maybe = why ? describe.skip : describe;
const NS = `eipip${process.pid % 10000}`;

beforeAll(async () => {
  if (why) return;
  deleteNamespaces(NS);
  await ip('netns', 'add', NS);
  await inNs(NS, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', 'net.ipv6.conf.default.disable_ipv6=1');
  await inNs(
    NS,
    'ip',
    'link',
    'add',
    'lan7',
    'address',
    '00:16:3E:AA:00:07',
    'mtu',
    '1400',
    'type',
    'veth',
    'peer',
    'name',
    'peer7',
  );
  await inNs(NS, 'ip', 'link', 'add', 'br0', 'type', 'bridge');
  await inNs(NS, 'ip', 'link', 'set', 'peer7', 'master', 'br0');
  await inNs(NS, 'ip', 'link', 'set', 'lan7', 'up');
  await inNs(NS, 'ip', 'addr', 'add', '10.1.3.5/24', 'dev', 'lan7');
  // A global IPv6 address the node itself uses (its own, as an image configures it); its link-local one is no pod's.
  await inNs(NS, 'sysctl', '-qw', 'net.ipv6.conf.lan7.disable_ipv6=0');
  await inNs(NS, 'ip', '-6', 'addr', 'add', '2408:4005:3c0:a200::5/64', 'dev', 'lan7', 'nodad');
  await inNs(NS, 'ip', 'route', 'add', '10.1.3.253', 'dev', 'lan7', 'scope', 'link', 'table', '3002', 'proto', '236');
  await inNs(NS, 'ip', 'route', 'add', 'default', 'via', '10.1.3.253', 'dev', 'lan7', 'table', '3002', 'proto', '236');
  await inNs(
    NS,
    'ip',
    'route',
    'add',
    '10.9.0.0/16',
    'table',
    '3003',
    'nexthop',
    'via',
    '10.1.3.1',
    'nexthop',
    'via',
    '10.1.3.2',
  );
  await inNs(NS, 'ip', 'rule', 'add', 'from', '10.1.3.10/32', 'lookup', '3002', 'priority', '111', 'protocol', '236');
  await inNs(NS, 'ip', 'rule', 'add', 'to', '10.1.3.10', 'lookup', 'main', 'priority', '20', 'protocol', '236');
  await inNs(NS, 'ip', 'rule', 'add', 'from', '10.1.0.0/16', 'fwmark', '0x10', 'lookup', '100', 'priority', '111');
}, 30_000);
afterAll(() => {
  if (!why) deleteNamespaces(NS);
});

maybe('iproute2 as the agent reads and drives it (root)', () => {
  it('reads links (MAC in lower case, MTU, up, master, peer, IPv4 and global IPv6 addresses), routes and rules as numbers', async () => {
    const view = await new IpRouteKernel({ netns: NS }).read();
    expect(view.links.find((l) => l.name === 'lan7')).toMatchObject({
      mac: '00:16:3e:aa:00:07',
      mtu: 1400,
      up: true,
      parent: 'peer7',
      addresses: ['10.1.3.5', '2408:4005:3c0:a200::5'],
    });
    expect(view.links.find((l) => l.name === 'peer7')).toMatchObject({ master: 'br0', up: false });
    expect(view.routes.filter((r) => r.table === 3002)).toEqual([
      { table: 3002, type: 1, dst: 'default', gateway: '10.1.3.253', dev: 'lan7', scope: 0, protocol: 236 },
      { table: 3002, type: 1, dst: '10.1.3.253', dev: 'lan7', scope: 253, protocol: 236 },
    ]);
    expect(view.routes.find((r) => r.table === 3003)).toMatchObject({ dst: '10.9.0.0/16', multipath: true });
    // The kernel's own routes of the device's address: in main (254) and local (255), protocol kernel (2).
    expect(view.routes).toContainEqual(
      expect.objectContaining({ table: 254, dst: '10.1.3.0/24', dev: 'lan7', protocol: 2, scope: 253 }),
    );
    expect(view.rules.filter((r) => r.priority === 20 || r.priority === 111)).toEqual([
      { priority: 20, dst: '10.1.3.10/32', table: 254, protocol: 236 },
      { priority: 111, src: '10.1.3.10/32', table: 3002, protocol: 236 },
      { priority: 111, src: '10.1.0.0/16', table: 100, protocol: 0, extra: true },
    ]);
  });

  it('runs every line of a batch and says which failed, with the kernel’s answer', async () => {
    const kernel = new IpRouteKernel({ netns: NS });
    const failed = await kernel.apply([
      'rule add priority 20 protocol 236 to 10.1.3.11/32 lookup 254',
      'rule add priority 20 protocol 236 to 10.1.3.11/32 lookup 254',
      'link set dev nosuch up',
      'rule add priority 111 protocol 236 from 10.1.3.11/32 lookup 3002',
    ]);
    expect([...failed.keys()]).toEqual([2, 3]);
    expect(failed.get(2)).toMatch(/File exists/);
    expect(failed.get(3)).toMatch(/nosuch/);
    const view = await kernel.read();
    expect(view.rules.filter((r) => r.src === '10.1.3.11/32' || r.dst === '10.1.3.11/32')).toHaveLength(2);
    // A line ip cannot parse stops it without a line number: which ran is unknown.
    expect([...(await kernel.apply(['rule add priority 20 to 10.1.3.12/32 lookup 254 nosuchkey'])).keys()]).toEqual([
      0,
    ]);
  });

  it('pairs each "Command failed" with the lines before it', () => {
    expect(
      parseBatchErrors(
        'RTNETLINK answers: File exists\nCommand failed -:2\nCannot find device "x"\nCommand failed -:5\n',
      ),
    ).toEqual(
      new Map([
        [2, 'RTNETLINK answers: File exists'],
        [5, 'Cannot find device "x"'],
      ]),
    );
  });
});
