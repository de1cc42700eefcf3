import ipaddr from 'ipaddr.js';
import { apiError, invalid, missing } from './errors.js';
import type { Params } from './params.js';
import { eniShape, tagsShape } from './shapes.js';
import type { Eni, Tag, VSwitch, World } from './world.js';

export interface ActionContext {
  world: World;
  params: Params;
  ownerId: string;
  delays: { attachMs: number; detachMs: number; deleteMs: number };
  limits: { createSecondaryIpsMax: number; assignPerCallWhenAvailable: number; enisPerRegion: number };
}

const MAX_IPS_ON_DETACHED_ENI = 50;

function invalidState(eni: Eni, op: string): never {
  throw apiError(
    'InvalidOperation.InvalidEniState',
    `The ENI ${eni.id} is ${eni.status}; ${op} is not allowed in this state.`,
  );
}

function checkTags(tags: Tag[]): void {
  const seen = new Set<string>();
  for (const t of tags) {
    if (/^(aliyun|acs:)/i.test(t.key) || t.key.length > 128) {
      throw apiError(
        'InvalidTagKey.Malformed',
        `The tag key "${t.key}" is malformed: it may not start with aliyun or acs: and has at most 128 characters.`,
      );
    }
    if (seen.has(t.key)) throw apiError('Duplicate.TagKey', `The tag key "${t.key}" is repeated.`);
    seen.add(t.key);
  }
}

function securityGroupsFor(ctx: ActionContext, vsw: VSwitch): string[] {
  const one = ctx.params.str('SecurityGroupId');
  const many = ctx.params.list('SecurityGroupIds', 10);
  if (one && many.length)
    throw apiError('InvalidParameter.Conflict', 'SecurityGroupId and SecurityGroupIds.N cannot be specified together.');
  const ids = one ? [one] : many;
  if (!ids.length) throw missing('SecurityGroupId');
  if (ids.length > 5) throw invalid('SecurityGroupIds', 'an ENI may join at most 5 security groups');
  for (const id of ids) {
    const g = ctx.world.securityGroups.get(id);
    if (!g) throw apiError('InvalidSecurityGroupId.NotFound', `The specified SecurityGroupId "${id}" does not exist.`);
    if (g.vpcId !== vsw.vpcId)
      throw apiError(
        'InvalidOperation.VpcMismatch',
        `Security group ${id} is not in VPC ${vsw.vpcId} of vSwitch ${vsw.id}.`,
      );
  }
  return ids;
}

/** Checks addresses a caller names: inside the vSwitch, free, not repeated. */
function checkRequestedIps(vsw: VSwitch, ips: string[]): void {
  const seen = new Set<string>();
  for (const ip of ips) {
    if (!ipaddr.IPv4.isValidFourPartDecimal(ip))
      throw apiError('InvalidIp.Address', `"${ip}" is not a valid IPv4 address.`);
    if (!vsw.pool.contains(ip))
      throw apiError('InvalidVSwitchId.IpInvalid', `The address ${ip} is not in vSwitch ${vsw.id} (${vsw.cidr}).`);
    if (seen.has(ip)) throw apiError('InvalidIp.IpRepeated', `The address ${ip} is repeated.`);
    if (vsw.pool.isUsed(ip))
      throw apiError('InvalidPrivateIpAddress.Duplicated', `The address ${ip} is already in use.`);
    seen.add(ip);
  }
}

const notEnough = (vsw: VSwitch, wanted: number): never => {
  throw apiError(
    'InvalidVSwitchId.IpNotEnough',
    `The vSwitch ${vsw.id} has ${vsw.pool.free} free addresses; ${wanted} are needed.`,
  );
};

/** Takes named addresses, then `count` more, then `prefixes` /28s; all or nothing. */
function allocate(
  vsw: VSwitch,
  named: string[],
  count: number,
  prefixes: number,
): { ips: string[]; prefixes: string[] } {
  checkRequestedIps(vsw, named);
  if (vsw.pool.free < named.length + count + 16 * prefixes) notEnough(vsw, named.length + count + 16 * prefixes);
  const got: string[] = [];
  for (const ip of named) vsw.pool.takeSpecific(ip);
  got.push(...named, ...(vsw.pool.take(count) ?? []));
  const pfx: string[] = [];
  for (let i = 0; i < prefixes; i++) {
    const p = vsw.pool.takePrefix28();
    if (!p) {
      got.forEach((ip) => vsw.pool.release(ip));
      pfx.forEach((q) => vsw.pool.releasePrefix(q));
      throw apiError('InvalidVSwitchId.IpNotEnough', `The vSwitch ${vsw.id} has no free aligned /28 prefix left.`);
    }
    pfx.push(p);
  }
  return { ips: got, prefixes: pfx };
}

/** Takes named IPv6 addresses, then `count` more, then `prefixes` /80s; all or nothing. */
function takeIpv6(vsw: VSwitch, named: string[], count: number, prefixes = 0): { ips: string[]; prefixes: string[] } {
  if (!vsw.pool6 || !vsw.ipv6Cidr)
    throw apiError('InvalidVSwitch.Ipv6NotTurnOn', `IPv6 is not enabled on vSwitch ${vsw.id}.`);
  const range = ipaddr.IPv6.parseCIDR(vsw.ipv6Cidr);
  const pool6 = vsw.pool6;
  const seen = new Set<string>();
  for (const ip of named) {
    if (!ipaddr.IPv6.isValid(ip) || !ipaddr.IPv6.parse(ip).match(range)) {
      throw apiError('InvalidVSwitchId.IpInvalid', `The address ${ip} is not in the IPv6 range of vSwitch ${vsw.id}.`);
    }
    const normal = ipaddr.IPv6.parse(ip).toString();
    if (seen.has(normal)) throw apiError('InvalidIp.IpRepeated', `The address ${ip} is repeated.`);
    // An address an ENI holds (or the vpc-host) is no one else's: as ECS, and as for IPv4. So is
    // every address of an ENI's /80 prefix.
    if (pool6.isUsed(normal))
      throw apiError('InvalidPrivateIpAddress.Duplicated', `The address ${ip} is already in use.`);
    const inPrefix = pool6.prefixOf(normal);
    if (inPrefix)
      throw apiError('InvalidPrivateIpAddress.Duplicated', `The address ${ip} is in use: it is in prefix ${inPrefix}.`);
    seen.add(normal);
  }
  for (const ip of seen) pool6.takeSpecific(ip);
  const ips = [...seen, ...pool6.take(count)];
  const got: string[] = [];
  for (let i = 0; i < prefixes; i++) {
    const p = pool6.takePrefix80();
    if (!p) {
      ips.forEach((ip) => pool6.release(ip));
      got.forEach((q) => pool6.releasePrefix(q));
      throw apiError('InvalidVSwitchId.IpNotEnough', `The vSwitch ${vsw.id} has no free aligned /80 prefix left.`);
    }
    got.push(p);
  }
  return { ips, prefixes: got };
}

/** A prefix as the emulator keeps it (`2408:4005:3c0:a100:1::/80`), or the text as given when it is none. */
const normalPrefix6 = (p: string): string => {
  if (!ipaddr.IPv6.isValidCIDR(p)) return p;
  const [addr, bits] = ipaddr.IPv6.parseCIDR(p);
  return `${addr.toString()}/${bits}`;
};

/** The one-of-two form (`X.N` or `XCount`) the ECS API uses for addresses. */
function addressRequest(p: Params, listName: string, countName: string, listMax: number, countMax: number) {
  const named = p.list(listName, listMax);
  const count = p.int(countName, 1, countMax);
  if (named.length && count !== undefined) {
    throw apiError('InvalidParameter.Conflict', `${listName}.N and ${countName} cannot be specified together.`);
  }
  return { named, count: count ?? 0, total: named.length + (count ?? 0) };
}

const ipv4Count = (e: Eni): number => 1 + e.secondaryIps.length + e.ipv4Prefixes.length;
/** An ENI's IPv6 entries: its addresses and its /80 prefixes, each one of EniIpv6AddressQuantity. */
const ipv6Count = (e: Eni): number => e.ipv6.length + e.ipv6Prefixes.length;

/** How many IPv6 entries (addresses and /80 prefixes) an ENI that is not attached takes in one call. */
const IPV6_PER_CALL_WHEN_AVAILABLE = 10;

/** `Ipv6Prefix.N` / `Ipv6PrefixCount`: counted prefixes only (naming them is not emulated). */
function ipv6PrefixRequest(p: Params) {
  const pfx = addressRequest(p, 'Ipv6Prefix', 'Ipv6PrefixCount', 10, 10);
  if (pfx.named.length) throw invalid('Ipv6Prefix.N', 'naming prefixes is not emulated; use Ipv6PrefixCount');
  return pfx;
}

export function createNetworkInterface(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const vsw = w.vSwitch(p.required('VSwitchId'));
  const sgs = securityGroupsFor(ctx, vsw);
  const type = p.str('InstanceType') ?? 'Secondary';
  if (type !== 'Secondary')
    throw invalid('InstanceType', `"${type}" is not supported here; only Secondary ENIs are emulated`);
  const name = p.str('NetworkInterfaceName');
  if (name !== undefined && (name.length < 2 || name.length > 128))
    throw invalid('NetworkInterfaceName', 'must be 2-128 characters');
  const description = p.str('Description');
  if (
    description !== undefined &&
    (description.length < 2 || description.length > 256 || /^https?:\/\//.test(description))
  ) {
    throw invalid('Description', 'must be 2-256 characters and may not start with http:// or https://');
  }
  const tags = p.tags();
  checkTags(tags);
  const v4 = addressRequest(
    p,
    'PrivateIpAddress',
    'SecondaryPrivateIpAddressCount',
    10,
    ctx.limits.createSecondaryIpsMax,
  );
  const pfx = addressRequest(p, 'Ipv4Prefix', 'Ipv4PrefixCount', 10, 10);
  if (pfx.named.length) throw invalid('Ipv4Prefix.N', 'naming prefixes is not emulated; use Ipv4PrefixCount');
  const v6 = addressRequest(p, 'Ipv6Address', 'Ipv6AddressCount', 10, 10);
  const pfx6 = ipv6PrefixRequest(p);
  if (v6.total + pfx6.total > IPV6_PER_CALL_WHEN_AVAILABLE)
    throw invalid(
      'Ipv6AddressCount',
      `at most ${IPV6_PER_CALL_WHEN_AVAILABLE} IPv6 addresses and prefixes per call on an ENI that is not attached`,
    );
  if (w.secondaryEniCount() >= ctx.limits.enisPerRegion) {
    throw apiError(
      'MaxEniCountExceeded',
      `The account already has ${ctx.limits.enisPerRegion} secondary ENIs in ${w.region}, its quota.`,
    );
  }
  if ((v6.total || pfx6.total) && !vsw.pool6)
    throw apiError('InvalidVSwitch.Ipv6NotTurnOn', `IPv6 is not enabled on vSwitch ${vsw.id}.`);
  const primary = p.str('PrimaryIpAddress');
  const got = allocate(vsw, primary ? [primary, ...v4.named] : v4.named, v4.count + (primary ? 0 : 1), pfx.count);
  let got6: { ips: string[]; prefixes: string[] } = { ips: [], prefixes: [] };
  try {
    if (v6.total || pfx6.total) got6 = takeIpv6(vsw, v6.named, v6.count, pfx6.count);
  } catch (e) {
    // A refused create takes nothing: the IPv4 side goes back too.
    got.ips.forEach((ip) => vsw.pool.release(ip));
    got.prefixes.forEach((q) => vsw.pool.releasePrefix(q));
    throw e;
  }
  // The ENI's own primary address is the named one, else the first counted one.
  const primaryAt = primary ? 0 : v4.named.length;
  const eni = w.newEni({
    type: 'Secondary',
    vsw,
    securityGroupIds: sgs,
    primaryIp: got.ips[primaryAt]!,
    tags,
    name,
    description,
  });
  eni.secondaryIps = got.ips.filter((_, i) => i !== primaryAt);
  eni.ipv4Prefixes = got.prefixes;
  eni.ipv6 = got6.ips;
  eni.ipv6Prefixes = got6.prefixes;
  const s = eniShape(eni, ctx.ownerId);
  return {
    NetworkInterfaceId: eni.id,
    Status: eni.status,
    Type: eni.type,
    VpcId: eni.vpcId,
    VSwitchId: eni.vSwitchId,
    ZoneId: eni.zoneId,
    PrivateIpAddress: eni.primaryIp,
    MacAddress: eni.mac,
    NetworkInterfaceName: s.NetworkInterfaceName,
    Description: s.Description,
    ResourceGroupId: '',
    ServiceID: 0,
    ServiceManaged: false,
    OwnerId: ctx.ownerId,
    SourceDestCheck: false,
    SecurityGroupIds: s.SecurityGroupIds,
    PrivateIpSets: s.PrivateIpSets,
    Tags: tagsShape(eni.tags),
    Ipv6Sets: s.Ipv6Sets,
    Ipv4PrefixSets: s.Ipv4PrefixSets,
    Ipv6PrefixSets: s.Ipv6PrefixSets,
  };
}

export function attachNetworkInterface(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const eni = w.eni(p.required('NetworkInterfaceId'));
  const inst = w.instance(p.required('InstanceId'));
  const card = p.int('NetworkCardIndex', 0, 7);
  if (card !== undefined && card !== 0)
    throw invalid('NetworkCardIndex', 'the emulated instance types have one network card');
  if (eni.status !== 'Available') invalidState(eni, 'AttachNetworkInterface');
  if (inst.status !== 'Running' && inst.status !== 'Stopped') {
    throw apiError(
      'InvalidOperation.InvalidEcsState',
      `The instance ${inst.id} is ${inst.status}; it must be Running or Stopped.`,
    );
  }
  if (eni.vpcId !== inst.vpcId)
    throw apiError(
      'InvalidOperation.VpcMismatch',
      `ENI ${eni.id} is in ${eni.vpcId}, instance ${inst.id} in ${inst.vpcId}.`,
    );
  if (eni.zoneId !== inst.zoneId) {
    throw apiError(
      'InvalidOperation.AvailabilityZoneMismatch',
      `ENI ${eni.id} is in ${eni.zoneId}, instance ${inst.id} in ${inst.zoneId}.`,
    );
  }
  const type = w.instanceType(inst.instanceType);
  const attached = w.enisOf(inst.id);
  if (attached.length >= type.eniQuantity) {
    throw apiError(
      'EniPerInstanceLimitExceeded',
      `The instance ${inst.id} (${type.id}) already has ${attached.length} of ${type.eniQuantity} ENIs.`,
    );
  }
  if (ipv4Count(eni) > type.eniPrivateIpAddressQuantity) {
    throw apiError(
      'InvalidOperation.Ipv4CountExceeded',
      `ENI ${eni.id} has ${ipv4Count(eni)} IPv4 addresses; ` +
        `${type.id} allows ${type.eniPrivateIpAddressQuantity} per ENI.`,
    );
  }
  if (ipv6Count(eni) > type.eniIpv6AddressQuantity) {
    throw apiError(
      'InvalidOperation.Ipv6CountExceeded',
      `ENI ${eni.id} has ${ipv6Count(eni)} IPv6 addresses and prefixes; ` +
        `${type.id} allows ${type.eniIpv6AddressQuantity}.`,
    );
  }
  const used = new Set(attached.map((e) => e.deviceIndex));
  let index = 1;
  while (used.has(index)) index++;
  eni.instanceId = inst.id;
  eni.deviceIndex = index;
  const fails = w.faultInjector.attachFails();
  w.transition(eni, 'Attaching', fails ? 'Available' : 'InUse', ctx.delays.attachMs);
  return {};
}

export function detachNetworkInterface(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const eni = w.eni(p.required('NetworkInterfaceId'));
  const inst = w.instance(p.required('InstanceId'));
  if (eni.type === 'Primary') {
    throw apiError(
      'InvalidOperation.DetachPrimaryEniNotAllowed',
      `ENI ${eni.id} is the primary ENI of ${inst.id} and cannot be detached.`,
    );
  }
  if (eni.status !== 'InUse' && eni.status !== 'Detaching') invalidState(eni, 'DetachNetworkInterface');
  if (eni.instanceId !== inst.id) {
    throw apiError(
      'InvalidOperation.InvalidEniState',
      `ENI ${eni.id} is attached to ${eni.instanceId}, not to ${inst.id}.`,
    );
  }
  // A Detaching ENI without a pending change is stuck: issuing the detach again retries it.
  if (eni.status === 'Detaching' && eni.pending) return {};
  w.transition(eni, 'Detaching', w.faultInjector.detachSticks() ? null : 'Available', ctx.delays.detachMs);
  return {};
}

export function deleteNetworkInterface(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const eni = w.eni(p.required('NetworkInterfaceId'));
  if (eni.type === 'Primary')
    throw apiError('InvalidOperation.InvalidEniType', `ENI ${eni.id} is a primary ENI and cannot be deleted.`);
  if (eni.status === 'Deleting') return {};
  if (eni.status !== 'Available') invalidState(eni, 'DeleteNetworkInterface');
  w.transition(eni, 'Deleting', 'gone', ctx.delays.deleteMs);
  return {};
}

function assignable(ctx: ActionContext, op: string): Eni {
  const eni = ctx.world.eni(ctx.params.required('NetworkInterfaceId'));
  if (eni.status !== 'Available' && eni.status !== 'InUse') invalidState(eni, op);
  return eni;
}

export function assignPrivateIpAddresses(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const eni = assignable(ctx, 'AssignPrivateIpAddresses');
  const v4 = addressRequest(p, 'PrivateIpAddress', 'SecondaryPrivateIpAddressCount', 50, 50);
  const pfx = addressRequest(p, 'Ipv4Prefix', 'Ipv4PrefixCount', 10, 10);
  if (pfx.named.length) throw invalid('Ipv4Prefix.N', 'naming prefixes is not emulated; use Ipv4PrefixCount');
  if (!v4.total && !pfx.total) throw missing('SecondaryPrivateIpAddressCount');
  if (v4.total && pfx.total)
    throw apiError('InvalidParameter.Conflict', 'Addresses and prefixes cannot be assigned in one call.');
  const after = ipv4Count(eni) + v4.total + pfx.total;
  if (eni.status === 'InUse') {
    const type = w.instanceType(w.instance(eni.instanceId!).instanceType);
    if (after > type.eniPrivateIpAddressQuantity) {
      throw apiError(
        'InvalidOperation.Ipv4CountExceeded',
        `ENI ${eni.id} would have ${after} IPv4 addresses and prefixes; ` +
          `${type.id} allows ${type.eniPrivateIpAddressQuantity}.`,
      );
    }
  } else {
    if (v4.total + pfx.total > ctx.limits.assignPerCallWhenAvailable) {
      throw invalid(
        'SecondaryPrivateIpAddressCount',
        `at most ${ctx.limits.assignPerCallWhenAvailable} addresses per call on an ENI that is not attached`,
      );
    }
    if (after > MAX_IPS_ON_DETACHED_ENI) {
      throw apiError(
        'MaxEniPrivateIpsCountExceeded',
        `ENI ${eni.id} would have ${after} addresses; at most ${MAX_IPS_ON_DETACHED_ENI}.`,
      );
    }
  }
  const got = allocate(w.vSwitch(eni.vSwitchId), v4.named, v4.count, pfx.count);
  eni.secondaryIps.push(...got.ips);
  eni.ipv4Prefixes.push(...got.prefixes);
  return {
    AssignedPrivateIpAddressesSet: {
      NetworkInterfaceId: eni.id,
      PrivateIpSet: { PrivateIpAddress: got.ips },
      Ipv4PrefixSet: { Ipv4Prefixes: got.prefixes },
    },
  };
}

export function unassignPrivateIpAddresses(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const eni = assignable(ctx, 'UnassignPrivateIpAddresses');
  const ips = p.list('PrivateIpAddress', 50);
  const prefixes = p.list('Ipv4Prefix', 10);
  if (!ips.length && !prefixes.length) throw missing('PrivateIpAddress.1');
  for (const ip of ips) {
    if (!eni.secondaryIps.includes(ip))
      throw apiError('InvalidIp.IpUnassigned', `The address ${ip} is not a secondary address of ENI ${eni.id}.`);
  }
  for (const pf of prefixes) {
    if (!eni.ipv4Prefixes.includes(pf))
      throw apiError('InvalidIp.IpUnassigned', `The prefix ${pf} is not assigned to ENI ${eni.id}.`);
  }
  const vsw = w.vSwitch(eni.vSwitchId);
  ips.forEach((ip) => vsw.pool.release(ip));
  prefixes.forEach((pf) => vsw.pool.releasePrefix(pf));
  eni.secondaryIps = eni.secondaryIps.filter((ip) => !ips.includes(ip));
  eni.ipv4Prefixes = eni.ipv4Prefixes.filter((pf) => !prefixes.includes(pf));
  return {};
}

export function assignIpv6Addresses(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const eni = assignable(ctx, 'AssignIpv6Addresses');
  const v6 = addressRequest(p, 'Ipv6Address', 'Ipv6AddressCount', 10, 10);
  const pfx = ipv6PrefixRequest(p);
  if (!v6.total && !pfx.total) throw missing('Ipv6AddressCount');
  if (v6.total && pfx.total)
    throw apiError('InvalidParameter.Conflict', 'Addresses and prefixes cannot be assigned in one call.');
  if (eni.status === 'InUse') {
    const type = w.instanceType(w.instance(eni.instanceId!).instanceType);
    const after = ipv6Count(eni) + v6.total + pfx.total;
    if (after > type.eniIpv6AddressQuantity) {
      throw apiError(
        'InvalidOperation.Ipv6CountExceeded',
        `ENI ${eni.id} would have ${after} IPv6 addresses and prefixes; ` +
          `${type.id} allows ${type.eniIpv6AddressQuantity}.`,
      );
    }
  }
  const got = takeIpv6(w.vSwitch(eni.vSwitchId), v6.named, v6.count, pfx.count);
  eni.ipv6.push(...got.ips);
  eni.ipv6Prefixes.push(...got.prefixes);
  return {
    NetworkInterfaceId: eni.id,
    Ipv6Sets: { Ipv6Address: got.ips },
    Ipv6PrefixSets: { Ipv6Prefix: got.prefixes },
  };
}

export function unassignIpv6Addresses(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const eni = assignable(ctx, 'UnassignIpv6Addresses');
  const ips = p.list('Ipv6Address', 10);
  const prefixes = p.list('Ipv6Prefix', 10).map(normalPrefix6);
  if (!ips.length && !prefixes.length) throw missing('Ipv6Address.1');
  const norm = (ip: string) => (ipaddr.IPv6.isValid(ip) ? ipaddr.IPv6.parse(ip).toString() : ip);
  for (const ip of ips) {
    if (!eni.ipv6.includes(norm(ip)))
      throw apiError('InvalidIp.IpUnassigned', `The address ${ip} is not assigned to ENI ${eni.id}.`);
  }
  for (const pf of prefixes) {
    if (!eni.ipv6Prefixes.includes(pf))
      throw apiError('InvalidIp.IpUnassigned', `The prefix ${pf} is not assigned to ENI ${eni.id}.`);
  }
  const vsw = w.vSwitch(eni.vSwitchId);
  ips.forEach((ip) => vsw.pool6?.release(norm(ip)));
  prefixes.forEach((pf) => vsw.pool6?.releasePrefix(pf));
  eni.ipv6 = eni.ipv6.filter((ip) => !ips.map(norm).includes(ip));
  eni.ipv6Prefixes = eni.ipv6Prefixes.filter((pf) => !prefixes.includes(pf));
  return {};
}
