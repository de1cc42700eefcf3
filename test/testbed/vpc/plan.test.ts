import { describe, expect, it } from '@jest/globals';
import { diffVpc, rules6For, rulesFor, type KernelState } from '../../../testbed/vpc/diff.js';
import { parseIptablesSave } from '../../../testbed/vpc/kernel.js';
import { choosePlace } from '../../../testbed/vpc/host.js';
import {
  GATEWAY_MAC,
  gatewayOf,
  linkLocalOf,
  planPorts,
  portName,
  type PlanInput,
  type Port,
  type WorldView,
} from '../../../testbed/vpc/plan.js';

const eni = (id: string, over: Partial<WorldView['enis'][number]> = {}): WorldView['enis'][number] => ({
  id,
  mac: `00:16:3e:00:00:${id.slice(-2)}`,
  type: 'Secondary',
  status: 'InUse',
  vpcId: 'vpc-1',
  vSwitchId: 'vsw-pods',
  primaryIp: '10.1.16.5',
  secondaryIps: [],
  ipv4Prefixes: [],
  ipv6: [],
  ipv6Prefixes: [],
  instanceId: 'i-1',
  deviceIndex: 1,
  ...over,
});

const world = (enis: WorldView['enis']): WorldView => ({
  enis,
  vSwitches: [
    { id: 'vsw-nodes', vpcId: 'vpc-1', cidr: '10.1.0.0/24' },
    { id: 'vsw-pods', vpcId: 'vpc-1', cidr: '10.1.16.0/20' },
    { id: 'vsw-other', vpcId: 'vpc-2', cidr: '10.2.0.0/24' },
  ],
  instances: [
    { id: 'i-1', instanceType: 'jumbo', vpcId: 'vpc-1' },
    { id: 'i-2', instanceType: 'plain', vpcId: 'vpc-1' },
  ],
  instanceTypes: [{ id: 'jumbo', mtu: 8500 }, { id: 'plain' }],
});

const plan = (w: WorldView, over: Partial<PlanInput> = {}) =>
  planPorts({
    world: w,
    vpcId: 'vpc-1',
    nodes: [
      { instanceId: 'i-1', netns: 'n1' },
      { instanceId: 'i-2', netns: 'n2', primaryDevice: null },
    ],
    now: 1000,
    deviceDelayMs: 0,
    inUseSince: new Map(),
    deviceName: () => 'eth%d',
    ...over,
  });

/** What the kernel holds once `ports` are applied. */
const applied = (ports: Port[]): KernelState => ({
  links: [
    { name: 'lo', mtu: 65536, mac: '00:00:00:00:00:00', up: true },
    ...ports.map((p) => ({ name: p.name, alias: p.alias, mtu: p.mtu, mac: GATEWAY_MAC, up: true })),
  ],
  addresses: ports.map((p) => ({ dev: p.name, address: `${p.gateway}/32` })),
  routes: [
    { dst: 'default', type: 'blackhole' },
    ...ports.flatMap((p) => [
      ...p.addresses.map((a) => ({ dst: `${a}/32`, dev: p.name })),
      ...p.prefixes.map((pf) => ({ dst: pf, dev: p.name, via: p.primaryIp })),
    ]),
  ],
  neighbours: ports.flatMap((p) => p.addresses.map((a) => ({ dst: a, dev: p.name, mac: p.peerMac }))),
  iptables: rulesFor(ports),
  routes6: [
    { dst: 'default', type: 'blackhole' },
    ...ports.flatMap((p) => [
      ...p.addresses6.map((a) => ({ dst: a, dev: p.name })),
      ...p.prefixes6.map((pf) => ({ dst: pf, dev: p.name, via: linkLocalOf(p.peerMac) })),
    ]),
  ],
  neighbours6: ports.flatMap((p) => [
    ...p.addresses6.map((a) => ({ dst: a, dev: p.name, mac: p.peerMac })),
    ...(p.prefixes6.length ? [{ dst: linkLocalOf(p.peerMac), dev: p.name, mac: p.peerMac }] : []),
  ]),
  ip6tables: rules6For(ports),
});

describe('the VPC emulation’s plan (pure)', () => {
  it('puts the gateway at the third-from-last address of the vSwitch', () => {
    expect(gatewayOf('192.168.0.0/24')).toBe('192.168.0.253');
    expect(gatewayOf('192.168.16.0/20')).toBe('192.168.31.253');
    expect(gatewayOf('192.168.56.0/27')).toBe('192.168.56.29');
  });

  it('plans a port per ENI InUse on a node of the VPC, with its addresses, MTU and sources', () => {
    const { ports } = plan(
      world([
        eni('eni-a1', { secondaryIps: ['10.1.16.6', '10.1.16.7'], ipv4Prefixes: ['10.1.17.0/28'] }),
        eni('eni-b2', { status: 'Attaching' }),
        eni('eni-c3', { instanceId: 'i-9' }), // not a node
        eni('eni-d4', { type: 'Primary', vSwitchId: 'vsw-nodes', primaryIp: '10.1.0.10', deviceIndex: 0 }),
        eni('eni-e5', { type: 'Primary', instanceId: 'i-2', vSwitchId: 'vsw-nodes', primaryIp: '10.1.0.11' }),
        eni('eni-f6', { instanceId: 'i-2', primaryIp: '10.1.16.9' }),
      ]),
    );
    expect(ports.map((p) => p.key).sort()).toEqual(['eni-a1', 'eni-d4', 'eni-f6']);
    const a = ports.find((p) => p.key === 'eni-a1')!;
    expect(a).toMatchObject({
      name: portName('eni-a1'),
      netns: 'n1',
      peerName: 'eth%d',
      peerMac: '00:16:3e:00:00:a1',
      peerMtu: 1500,
      mtu: 8500,
      gateway: '10.1.31.253',
      addresses: ['10.1.16.5', '10.1.16.6', '10.1.16.7'],
      prefixes: ['10.1.17.0/28'],
      sources: ['10.1.16.5/32', '10.1.16.6/32', '10.1.16.7/32', '10.1.17.0/28'],
      configure: undefined,
    });
    expect(a.name).toHaveLength(15);
    // The primary ENI's device is the node's eth0, configured as DHCP would.
    expect(ports.find((p) => p.key === 'eni-d4')).toMatchObject({
      peerName: 'eth0',
      peerMtu: 8500,
      configure: { address: '10.1.0.10/24', gateway: '10.1.0.253' },
    });
    expect(ports.find((p) => p.key === 'eni-f6')!.mtu).toBe(1500);
  });

  it('plugs a secondary ENI only `deviceDelayMs` after it was first seen InUse, and waits again after a detach', () => {
    const attached = world([eni('eni-a1')]);
    const t0 = plan(attached, { now: 1000, deviceDelayMs: 500 });
    expect(t0.ports).toEqual([]);
    const t1 = plan(attached, { now: 1400, deviceDelayMs: 500, inUseSince: t0.inUseSince });
    expect(t1.ports).toEqual([]);
    const t2 = plan(attached, { now: 1500, deviceDelayMs: 500, inUseSince: t1.inUseSince });
    expect(t2.ports.map((p) => p.key)).toEqual(['eni-a1']);
    const detached = plan(world([eni('eni-a1', { status: 'Detaching' })]), { now: 1600, inUseSince: t2.inUseSince });
    expect(detached.inUseSince.size).toBe(0);
    const again = plan(attached, { now: 1700, deviceDelayMs: 500, inUseSince: detached.inUseSince });
    expect(again.ports).toEqual([]);
  });

  it('makes every port from an empty namespace, and has nothing to do once the kernel holds the plan', () => {
    const { ports } = plan(world([eni('eni-a1', { secondaryIps: ['10.1.16.6'], ipv4Prefixes: ['10.1.17.0/28'] })]));
    const fromEmpty = diffVpc(ports, {
      links: [{ name: 'lo', mtu: 65536, mac: '00:00:00:00:00:00', up: true }],
      addresses: [],
      routes: [],
      neighbours: [],
      iptables: new Map(),
      routes6: [],
      neighbours6: [],
      ip6tables: new Map(),
    });
    const name = portName('eni-a1');
    expect(fromEmpty.vpc).toEqual([
      `link add ${name} mtu 8500 address ee:ff:ff:ff:ff:ff type veth peer name eth%d netns n1 address 00:16:3e:00:00:a1 mtu 1500 gso_max_segs 1`,
      `link set ${name} alias eni-a1@n1 up`,
      `ntable change name arp_cache dev ${name} proxy_delay 0`,
      `addr add 10.1.31.253/32 dev ${name}`,
      'route replace blackhole default',
      `route replace 10.1.16.5/32 dev ${name}`,
      `route replace 10.1.16.6/32 dev ${name}`,
      `route replace 10.1.17.0/28 via 10.1.16.5 dev ${name} onlink`,
      `neigh replace 10.1.16.5 lladdr 00:16:3e:00:00:a1 dev ${name} nud permanent`,
      `neigh replace 10.1.16.6 lladdr 00:16:3e:00:00:a1 dev ${name} nud permanent`,
      // IPv6: nothing is delivered but what an ENI holds (this vSwitch has no IPv6 CIDR).
      'route replace blackhole ::/0',
    ]);
    expect(fromEmpty.iptables).toBe(
      [
        '*raw',
        '-F PREROUTING',
        `:${name} - [0:0]`,
        `:${name}-src - [0:0]`,
        `-A PREROUTING -i ${name} -j ${name}`,
        `-A ${name} -m length --length 8501:65535 -j DROP`,
        `-A ${name} -m mac ! --mac-source 00:16:3e:00:00:a1 -j DROP`,
        `-A ${name} -j ${name}-src`,
        `-A ${name} -j DROP`,
        `-A ${name}-src -s 10.1.16.5/32 -j ACCEPT`,
        `-A ${name}-src -s 10.1.16.6/32 -j ACCEPT`,
        `-A ${name}-src -s 10.1.17.0/28 -j ACCEPT`,
        'COMMIT',
        '',
      ].join('\n'),
    );
    expect(diffVpc(ports, applied(ports))).toEqual({
      vpc: [],
      configure: [],
      iptables: undefined,
      made: [],
      removed: [],
    });
  });

  it('moves an address from one ENI to another: the route and the neighbour move, only the two -src chains are rewritten', () => {
    const before = plan(
      world([eni('eni-a1', { secondaryIps: ['10.1.16.6'] }), eni('eni-b2', { primaryIp: '10.1.16.8' })]),
    );
    const after = plan(world([eni('eni-a1'), eni('eni-b2', { primaryIp: '10.1.16.8', secondaryIps: ['10.1.16.6'] })]));
    const [a, b] = [portName('eni-a1'), portName('eni-b2')];
    const changes = diffVpc(after.ports, applied(before.ports));
    expect(changes.vpc).toEqual([
      `route replace 10.1.16.6/32 dev ${b}`,
      `neigh del 10.1.16.6 dev ${a}`,
      `neigh replace 10.1.16.6 lladdr 00:16:3e:00:00:b2 dev ${b} nud permanent`,
    ]);
    const chains = changes.iptables!.split('\n').filter((l) => l.startsWith(':'));
    expect(chains.sort()).toEqual([`:${a}-src - [0:0]`, `:${b}-src - [0:0]`].sort());
  });

  it('delivers an ENI’s IPv6 /80 prefixes via its EUI-64 link-local address, to its MAC, and accepts them as sources', () => {
    expect(linkLocalOf('00:16:3e:00:00:a1')).toBe('fe80::216:3eff:fe00:a1');
    const world6 = (enis: WorldView['enis']): WorldView => {
      const w = world(enis);
      w.vSwitches.push({ id: 'vsw-v6', vpcId: 'vpc-1', cidr: '10.1.64.0/22', ipv6Cidr: '2408:4005:3c0:a100::/64' });
      return w;
    };
    const v6 = { vSwitchId: 'vsw-v6', primaryIp: '10.1.64.5', ipv6: ['2408:4005:3c0:a100::100'] };
    const with1 = plan(world6([eni('eni-a1', { ...v6, ipv6Prefixes: ['2408:4005:3c0:a100:1::/80'] })]));
    const port = with1.ports[0]!;
    expect(port.prefixes6).toEqual(['2408:4005:3c0:a100:1::/80']);
    const name = portName('eni-a1');
    const ll = 'fe80::216:3eff:fe00:a1';
    const fromNoPrefix = diffVpc(with1.ports, applied(plan(world6([eni('eni-a1', v6)])).ports));
    expect(fromNoPrefix.vpc).toEqual([
      `route replace 2408:4005:3c0:a100:1::/80 via ${ll} dev ${name}`,
      `neigh replace ${ll} lladdr 00:16:3e:00:00:a1 dev ${name} nud permanent`,
    ]);
    expect(fromNoPrefix.ip6tables).toContain(`-A ${name}-src -s 2408:4005:3c0:a100:1::/80 -j ACCEPT`);
    expect(rules6For(with1.ports).get(`${name}-src`)).toEqual([
      `-A ${name}-src -s 2408:4005:3c0:a100::100/128 -j ACCEPT`,
      `-A ${name}-src -s 2408:4005:3c0:a100:1::/80 -j ACCEPT`,
      `-A ${name}-src -s fe80::/10 -j ACCEPT`,
      `-A ${name}-src -s ::/128 -j ACCEPT`,
    ]);
    expect(diffVpc(with1.ports, applied(with1.ports)).vpc).toEqual([]);
    // Unassigned: the route, the link-local neighbour and the source go; the address stays.
    const gone = diffVpc(plan(world6([eni('eni-a1', v6)])).ports, applied(with1.ports));
    expect(gone.vpc).toEqual([`route del 2408:4005:3c0:a100:1::/80`, `neigh del ${ll} dev ${name}`]);
    expect(gone.ip6tables).toContain(`:${name}-src`);
    expect(gone.ip6tables).not.toContain('a100:1::/80');
    // A vSwitch without IPv6 carries none (ECS refuses them there).
    expect(plan(world6([eni('eni-a1', { ipv6Prefixes: ['2408:4005:3c0:a100:1::/80'] })])).ports[0]!.prefixes6).toEqual(
      [],
    );
  });

  it('remakes a port that is not what the plan says, and removes what is not the VPC’s', () => {
    const { ports } = plan(world([eni('eni-a1')]));
    const name = portName('eni-a1');
    const kernel = applied(ports);
    kernel.links[1]!.alias = 'eni-a1@n2'; // the ENI was on another node
    kernel.links.push({ name: 'stray', mtu: 1500, mac: GATEWAY_MAC, up: true });
    kernel.routes.push({ dst: '10.9.9.9/32', dev: 'stray' }, { dst: '10.1.0.0/16', dev: name });
    kernel.iptables.set('stray', ['-A stray -j DROP']);
    const changes = diffVpc(ports, kernel);
    expect(changes.removed).toEqual(['stray']);
    expect(changes.made.map((p) => p.key)).toEqual(['eni-a1']);
    expect(changes.vpc.slice(0, 2)).toEqual([`link del ${name}`, 'link del stray']);
    // What was on the remade port went with it; it is added again.
    expect(changes.vpc).toContain(`route replace 10.1.16.5/32 dev ${name}`);
    expect(changes.vpc).not.toContain('route del 10.9.9.9/32');
    expect(changes.iptables).toContain('-X stray');
  });

  it('reads the raw table and its counters as iptables-save prints them', () => {
    const saved = [
      '*raw',
      ':PREROUTING ACCEPT [10:800]',
      ':vabc - [0:0]',
      '[3:252] -A PREROUTING -i vabc -j vabc',
      '[1:1501] -A vabc -m length --length 1501:65535 -j DROP',
      '[0:0] -A vabc -j DROP',
      'COMMIT',
    ].join('\n');
    const parsed = parseIptablesSave(saved);
    expect(parsed.chains.get('vabc')).toEqual(['-A vabc -m length --length 1501:65535 -j DROP', '-A vabc -j DROP']);
    expect(parsed.packets.get('vabc')).toEqual([1, 0]);
    expect(parsed.packets.get('PREROUTING')).toEqual([3]);
  });

  it('puts the vpc-host in a vSwitch no node is in, at its highest free address, or where it is told', () => {
    const w = world([eni('eni-n1', { type: 'Primary', vSwitchId: 'vsw-nodes' })]);
    expect(choosePlace(w, 'vpc-1', (_, ip) => ip === '10.1.31.252')).toEqual({
      vSwitchId: 'vsw-pods',
      ip: '10.1.31.251',
    });
    expect(choosePlace(w, 'vpc-1', () => false, { vSwitchId: 'vsw-nodes' })).toEqual({
      vSwitchId: 'vsw-nodes',
      ip: '10.1.0.252',
    });
    expect(() => choosePlace(w, 'vpc-1', () => false, { vSwitchId: 'vsw-other' })).toThrow(
      'vpc-host: vSwitch vsw-other is not in VPC vpc-1; pick one of vsw-nodes, vsw-pods',
    );
    expect(() => choosePlace(w, 'vpc-1', () => true)).toThrow(/vsw-pods \(10\.1\.16\.0\/20\) has no free address/);
  });
});
