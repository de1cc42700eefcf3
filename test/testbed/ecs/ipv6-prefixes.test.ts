import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type RPCClient from '@alicloud/pop-core';
import ipaddr from 'ipaddr.js';
import type { EcsEmulator } from '../../../testbed/ecs/index.js';
import { REGION, emulator, eventually, failure, pop } from '../../helpers/ecs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */

/*
 * IPv6 /80 prefixes (Ipv6PrefixCount, Ipv6Prefix.N), through the real pop-core client. vsw-j-pods
 * has the /64 2408:4005:3c0:a100::/64; vsw-h-pods has no IPv6. i-demo-09 is an ecs.g7.large in
 * zone j (EniIpv6AddressQuantity 6); i-nov6, added here, a type that takes no IPv6.
 */
const V6_SWITCH = 'vsw-j-pods';
const RANGE = ipaddr.IPv6.parseCIDR('2408:4005:3c0:a100::/64');
const PREFIX = /^2408:4005:3c0:a100:[1-9a-f][0-9a-f]{0,3}::\/80$/;

let emu: EcsEmulator;
let ecs: RPCClient;
beforeAll(async () => {
  emu = await emulator((f) => {
    f.instanceTypes.push({
      id: 'ecs.t6.nov6',
      cpuCores: 2,
      memoryGiB: 4,
      eniQuantity: 3,
      eniPrivateIpAddressQuantity: 6,
      eniIpv6AddressQuantity: 0,
    });
    f.instances.push({
      id: 'i-nov6',
      instanceType: 'ecs.t6.nov6',
      vSwitchId: 'vsw-j-nodes',
      securityGroupIds: ['sg-demo-nodes'],
    });
  });
  ecs = pop(emu.url);
});
afterAll(() => emu.close());

const create = (extra: Record<string, unknown> = {}): Promise<any> =>
  ecs.request(
    'CreateNetworkInterface',
    { RegionId: REGION, VSwitchId: V6_SWITCH, SecurityGroupIds: ['sg-demo-pods'], ...extra },
    { method: 'POST' },
  );
const assign6 = (id: string, extra: Record<string, unknown>): Promise<any> =>
  ecs.request('AssignIpv6Addresses', { RegionId: REGION, NetworkInterfaceId: id, ...extra });
const unassign6 = (id: string, extra: Record<string, unknown>): Promise<any> =>
  ecs.request('UnassignIpv6Addresses', { RegionId: REGION, NetworkInterfaceId: id, ...extra });
const describeEni = async (id: string): Promise<any> =>
  ((await ecs.request('DescribeNetworkInterfaces', { RegionId: REGION, NetworkInterfaceId: [id] })) as any)
    .NetworkInterfaceSets.NetworkInterfaceSet[0];
const prefixesOf = (e: any): string[] => e.Ipv6PrefixSets.Ipv6PrefixSet.map((s: any) => s.Ipv6Prefix);
const addressesOf = (e: any): string[] => e.Ipv6Sets.Ipv6Set.map((s: any) => s.Ipv6Address);
const statusOf = async (id: string): Promise<string | undefined> => (await describeEni(id))?.Status;
const inside = (ip: string, prefix: string) => ipaddr.IPv6.parse(ip).match(ipaddr.IPv6.parseCIDR(prefix));
/** An address of a /80: its base plus `offset` (within its 48 host bits). */
const addressIn = (prefix: string, offset: bigint): string => {
  const base = BigInt(`0x${Buffer.from(ipaddr.IPv6.parseCIDR(prefix)[0].toByteArray()).toString('hex')}`);
  const hex = (base + offset).toString(16).padStart(32, '0');
  return ipaddr.IPv6.parse(hex.match(/.{4}/g)!.join(':')).toString();
};
/** The /80 `k` slots after `prefix` in the same /64. */
const slotAfter = (prefix: string, k: number): string => `${addressIn(prefix, BigInt(k) << 48n)}/80`;

describe('IPv6 /80 prefixes', () => {
  it('creates an ENI with Ipv6PrefixCount: aligned /80s of the vSwitch’s /64, never its first, listed by every describe', async () => {
    const created = await create({ Ipv6PrefixCount: 2 });
    const prefixes = prefixesOf(created);
    expect(prefixes).toHaveLength(2);
    for (const p of prefixes) {
      expect(p).toMatch(PREFIX);
      expect(ipaddr.IPv6.parseCIDR(p)[0].match(RANGE)).toBe(true);
    }
    expect(new Set(prefixes).size).toBe(2);
    expect(prefixes).not.toContain('2408:4005:3c0:a100::/80');
    expect(addressesOf(created)).toEqual([]);
    const id = created.NetworkInterfaceId;
    expect(prefixesOf(await describeEni(id))).toEqual(prefixes);
    const attr: any = await ecs.request('DescribeNetworkInterfaceAttribute', {
      RegionId: REGION,
      NetworkInterfaceId: id,
    });
    expect(attr.Ipv6PrefixSets).toEqual({ Ipv6PrefixSet: prefixes.map((Ipv6Prefix) => ({ Ipv6Prefix })) });
    expect(emu.state().enis.find((e) => e.id === id)!.ipv6Prefixes).toEqual(prefixes);
    // The journal names the prefixes a create made.
    expect(emu.calls({ action: 'CreateNetworkInterface' }).at(-1)!.ips).toEqual(
      expect.arrayContaining([created.PrivateIpAddress, ...prefixes]),
    );
  });

  it('assigns /80s with AssignIpv6Addresses (Ipv6PrefixSets.Ipv6Prefix) and unassigns them by Ipv6Prefix.N', async () => {
    const eni = await create({ Ipv6AddressCount: 1 });
    const id = eni.NetworkInterfaceId;
    const got = await assign6(id, { Ipv6PrefixCount: 3 });
    expect(got.NetworkInterfaceId).toBe(id);
    expect(got.Ipv6Sets).toEqual({ Ipv6Address: [] });
    const prefixes: string[] = got.Ipv6PrefixSets.Ipv6Prefix;
    expect(prefixes).toHaveLength(3);
    for (const p of prefixes) expect(p).toMatch(PREFIX);
    const described = await describeEni(id);
    expect(prefixesOf(described)).toEqual(prefixes);
    expect(addressesOf(described)).toEqual(addressesOf(eni));
    expect(emu.calls({ action: 'AssignIpv6Addresses' }).at(-1)!.ips).toEqual(prefixes);

    // A prefix given in another spelling is the same prefix.
    const spelled = ipaddr.IPv6.parseCIDR(prefixes[0]!)[0].toNormalizedString().toUpperCase() + '/80';
    expect(await unassign6(id, { Ipv6Prefix: [spelled, prefixes[2]!] })).toMatchObject({
      RequestId: expect.any(String),
    });
    expect(prefixesOf(await describeEni(id))).toEqual([prefixes[1]]);
    expect(emu.calls({ action: 'UnassignIpv6Addresses' }).at(-1)!.ips).toEqual(
      expect.arrayContaining([prefixes[0], prefixes[2]]),
    );

    // A prefix the ENI does not hold: the answer for an address it does not hold.
    const notHeldAddress = await failure(unassign6(id, { Ipv6Address: ['2408:4005:3c0:a100::beef'] }));
    const notHeld = await failure(unassign6(id, { Ipv6Prefix: [prefixes[0]!] }));
    expect(notHeld).toMatchObject({ code: notHeldAddress.code, status: notHeldAddress.status });
    expect(notHeld.code).toBe('InvalidIp.IpUnassigned');
    const other = await create({ Ipv6PrefixCount: 1 });
    expect((await failure(unassign6(id, { Ipv6Prefix: prefixesOf(other) }))).code).toBe('InvalidIp.IpUnassigned');
    // All or nothing: one prefix not held, none is unassigned.
    expect((await failure(unassign6(id, { Ipv6Prefix: [prefixes[1]!, prefixes[0]!] }))).code).toBe(
      'InvalidIp.IpUnassigned',
    );
    expect(prefixesOf(await describeEni(id))).toEqual([prefixes[1]]);
    // Addresses and prefixes in one unassign.
    await unassign6(id, { Ipv6Address: addressesOf(eni), Ipv6Prefix: [prefixes[1]!] });
    const left = await describeEni(id);
    expect([addressesOf(left), prefixesOf(left)]).toEqual([[], []]);
    // What was unassigned is free again: an address of it may be named.
    const named = addressIn(prefixes[0]!, 7n);
    expect((await assign6(id, { Ipv6Address: [named] })).Ipv6Sets.Ipv6Address).toEqual([named]);
  });

  it('never overlaps: the prefixes of two ENIs, and single addresses picked or named', async () => {
    const a = await create({ Ipv6PrefixCount: 4 });
    const b = await create({ Ipv6PrefixCount: 3, Ipv6AddressCount: 2 });
    const all = [...prefixesOf(a), ...prefixesOf(b)];
    expect(new Set(all).size).toBe(7);
    // Picked addresses are never inside a prefix.
    const c = await create({ Ipv6AddressCount: 10 });
    const picked = [...addressesOf(b), ...addressesOf(c)];
    for (const ip of picked) for (const p of all) expect(inside(ip, p)).toBe(false);
    // A named address inside another ENI's prefix is that ENI's: refused as one another ENI holds.
    const inA = addressIn(prefixesOf(a)[1]!, 0x1234_5678n);
    const dup = await failure(assign6(b.NetworkInterfaceId, { Ipv6Address: [inA] }));
    const heldByA = await failure(assign6(a.NetworkInterfaceId, { Ipv6Address: [addressesOf(b)[0]!] }));
    expect(heldByA.code).toBe('InvalidPrivateIpAddress.Duplicated');
    expect(dup).toMatchObject({ code: heldByA.code, status: heldByA.status });
    expect(dup.data.Message).toContain(prefixesOf(a)[1]);
    expect((await failure(create({ Ipv6Address: [inA] }))).code).toBe('InvalidPrivateIpAddress.Duplicated');
    expect(addressesOf(await describeEni(b.NetworkInterfaceId))).toEqual(addressesOf(b));
    // A /80 that holds a named address is never handed out as a prefix.
    const last = all.at(-1)!;
    const blockers = Array.from({ length: 10 }, (_, k) => addressIn(slotAfter(last, k + 1), 5n));
    await assign6(c.NetworkInterfaceId, { Ipv6Address: blockers });
    const next: string[] = (await assign6(b.NetworkInterfaceId, { Ipv6PrefixCount: 2 })).Ipv6PrefixSets.Ipv6Prefix;
    for (const p of next) {
      expect(all).not.toContain(p);
      for (const ip of [...blockers, ...picked]) expect(inside(ip, p)).toBe(false);
    }
  });

  it('frees an ENI’s prefixes when it is deleted', async () => {
    const eni = await create({ Ipv6PrefixCount: 2 });
    const [p0] = prefixesOf(eni);
    const named = addressIn(p0!, 1n);
    const user = await create();
    expect((await failure(assign6(user.NetworkInterfaceId, { Ipv6Address: [named] }))).code).toBe(
      'InvalidPrivateIpAddress.Duplicated',
    );
    await ecs.request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: eni.NetworkInterfaceId });
    expect(emu.calls({ action: 'DeleteNetworkInterface' }).at(-1)!.ips).toEqual(
      expect.arrayContaining(prefixesOf(eni)),
    );
    await eventually(async () => (await statusOf(eni.NetworkInterfaceId)) === undefined);
    expect((await assign6(user.NetworkInterfaceId, { Ipv6Address: [named] })).Ipv6Sets.Ipv6Address).toEqual([named]);
  });

  it('refuses prefixes by name, prefixes with addresses in one assign, and counts out of range', async () => {
    const eni = await create();
    const id = eni.NetworkInterfaceId;
    const byName = await failure(create({ Ipv6Prefix: ['2408:4005:3c0:a100:99::/80'] }));
    expect(byName).toMatchObject({ code: 'InvalidParameter', status: 400 });
    expect(byName.data.Message).toMatch(/not emulated/);
    const assignByName = await failure(assign6(id, { Ipv6Prefix: ['2408:4005:3c0:a100:99::/80'] }));
    expect(assignByName.code).toBe('InvalidParameter');
    expect(assignByName.data.Message).toMatch(/not emulated/);
    expect((await failure(assign6(id, { Ipv6AddressCount: 1, Ipv6PrefixCount: 1 }))).code).toBe(
      'InvalidParameter.Conflict',
    );
    for (const n of [0, 11]) {
      expect((await failure(assign6(id, { Ipv6PrefixCount: n }))).code).toBe('InvalidParameter');
      expect((await failure(create({ Ipv6PrefixCount: n }))).code).toBe('InvalidParameter');
    }
    expect((await failure(assign6(id, {}))).code).toBe('MissingParameter');
    expect(prefixesOf(await describeEni(id))).toEqual([]);
  });

  it('takes no prefix on a vSwitch without IPv6', async () => {
    const before = emu.state().enis.length;
    const f = await failure(create({ VSwitchId: 'vsw-h-pods', Ipv6PrefixCount: 1 }));
    expect(f).toMatchObject({ code: 'InvalidVSwitch.Ipv6NotTurnOn', status: 403 });
    expect(emu.state().enis.length).toBe(before);
    const v4only = await create({ VSwitchId: 'vsw-h-pods' });
    expect((await failure(assign6(v4only.NetworkInterfaceId, { Ipv6PrefixCount: 1 }))).code).toBe(
      'InvalidVSwitch.Ipv6NotTurnOn',
    );
  });

  it('counts prefixes as IPv6 entries: 10 a call on an ENI not attached, EniIpv6AddressQuantity once attached', async () => {
    // Not attached: at most 10 addresses and prefixes a call (and again 10 the next call).
    expect((await failure(create({ Ipv6PrefixCount: 6, Ipv6AddressCount: 5 }))).code).toBe('InvalidParameter');
    const ten = await create({ Ipv6PrefixCount: 10 });
    expect(prefixesOf(ten)).toHaveLength(10);
    expect((await assign6(ten.NetworkInterfaceId, { Ipv6PrefixCount: 10 })).Ipv6PrefixSets.Ipv6Prefix).toHaveLength(10);

    // i-demo-09 (ecs.g7.large) takes 6 IPv6 entries per ENI: 3 addresses and 4 prefixes are too many.
    const eni = await create({ Ipv6AddressCount: 3, Ipv6PrefixCount: 4 });
    const id = eni.NetworkInterfaceId;
    const attach = () =>
      ecs.request('AttachNetworkInterface', { RegionId: REGION, NetworkInterfaceId: id, InstanceId: 'i-demo-09' });
    expect(await failure(attach())).toMatchObject({ code: 'InvalidOperation.Ipv6CountExceeded', status: 403 });
    await unassign6(id, { Ipv6Prefix: [prefixesOf(eni)[0]!] });
    await attach();
    await eventually(async () => (await statusOf(id)) === 'InUse');
    expect(await failure(assign6(id, { Ipv6PrefixCount: 1 }))).toMatchObject({
      code: 'InvalidOperation.Ipv6CountExceeded',
      status: 403,
    });
    expect((await failure(assign6(id, { Ipv6AddressCount: 1 }))).code).toBe('InvalidOperation.Ipv6CountExceeded');
    await unassign6(id, { Ipv6Address: [addressesOf(eni)[0]!] });
    expect((await assign6(id, { Ipv6PrefixCount: 1 })).Ipv6PrefixSets.Ipv6Prefix).toHaveLength(1);
    expect(prefixesOf(await describeEni(id))).toHaveLength(4);

    // A type with EniIpv6AddressQuantity 0 takes none: not on attach, not on assign.
    const withPrefix = await create({ Ipv6PrefixCount: 1 });
    expect(
      (
        await failure(
          ecs.request('AttachNetworkInterface', {
            RegionId: REGION,
            NetworkInterfaceId: withPrefix.NetworkInterfaceId,
            InstanceId: 'i-nov6',
          }),
        )
      ).code,
    ).toBe('InvalidOperation.Ipv6CountExceeded');
    const plain = await create();
    await ecs.request('AttachNetworkInterface', {
      RegionId: REGION,
      NetworkInterfaceId: plain.NetworkInterfaceId,
      InstanceId: 'i-nov6',
    });
    await eventually(async () => (await statusOf(plain.NetworkInterfaceId)) === 'InUse');
    expect((await failure(assign6(plain.NetworkInterfaceId, { Ipv6PrefixCount: 1 }))).code).toBe(
      'InvalidOperation.Ipv6CountExceeded',
    );
  });
});

describe('a /64 with no free /80 left', () => {
  let full: EcsEmulator;
  let client: RPCClient;
  beforeAll(async () => {
    full = await emulator();
    client = pop(full.url);
  });
  afterAll(() => full.close());

  it('answers InvalidVSwitchId.IpNotEnough and takes nothing', async () => {
    // Every /80 but the first (never a prefix) held outside the API, as other tenants' would be.
    const pool6 = full.world.vSwitches.get(V6_SWITCH)!.pool6!;
    const held: string[] = [];
    for (let p = pool6.takePrefix80(); p; p = pool6.takePrefix80()) held.push(p);
    expect(held).toHaveLength(0xffff);
    expect(held).not.toContain('2408:4005:3c0:a100::/80');
    pool6.releasePrefix(held.pop()!);
    const createIn = (extra: Record<string, unknown>): Promise<any> =>
      client.request(
        'CreateNetworkInterface',
        { RegionId: REGION, VSwitchId: V6_SWITCH, SecurityGroupIds: ['sg-demo-pods'], ...extra },
        { method: 'POST' },
      );
    const before = full.state();
    const f = await failure(createIn({ Ipv6PrefixCount: 2 }));
    expect(f).toMatchObject({ code: 'InvalidVSwitchId.IpNotEnough', status: 403 });
    expect(f.data.Message).toMatch(/no free aligned \/80/);
    // A refused create takes nothing, IPv4 included.
    expect(full.state().enis.length).toBe(before.enis.length);
    expect(full.state().vSwitches).toEqual(before.vSwitches);
    // The one /80 left is still there; then none is.
    const eni = await createIn({ Ipv6PrefixCount: 1, Ipv6AddressCount: 1 });
    expect(prefixesOf(eni)).toEqual(['2408:4005:3c0:a100:ffff::/80']);
    const assigned: any = client.request('AssignIpv6Addresses', {
      RegionId: REGION,
      NetworkInterfaceId: eni.NetworkInterfaceId,
      Ipv6PrefixCount: 1,
    });
    expect((await failure(assigned)).code).toBe('InvalidVSwitchId.IpNotEnough');
    // Single addresses are still handed out (the first /80 is theirs).
    const more: any = await client.request('AssignIpv6Addresses', {
      RegionId: REGION,
      NetworkInterfaceId: eni.NetworkInterfaceId,
      Ipv6AddressCount: 2,
    });
    expect(more.Ipv6Sets.Ipv6Address).toHaveLength(2);
  });
});
