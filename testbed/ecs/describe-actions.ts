import ipaddr from 'ipaddr.js';
import type { ActionContext } from './eni-actions.js';
import { apiError, invalid, missing } from './errors.js';
import type { Params } from './params.js';
import { apiTime, eniShape, instanceShape, instanceTypeShape, vSwitchShape } from './shapes.js';
import type { Tag } from './world.js';

interface PageRules {
  /** NextToken/MaxResults paging: the range MaxResults is clamped to, and its default. */
  token?: { min: number; max: number; default: number };
  /** Legacy PageNumber/PageSize paging (absent for actions without it). */
  legacy?: { max: number };
}

interface Page<T> {
  items: T[];
  nextToken: string;
  pageNumber: number;
  pageSize: number;
  totalCount: number;
}

/**
 * Pages a list sorted by id. NextToken marks the last id served, so a page boundary
 * stays put while ENIs come and go between calls.
 */
function paginate<T extends { id: string }>(all: T[], p: Params, rules: PageRules): Page<T> {
  const items = [...all].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const token = p.str('NextToken');
  const maxRaw = p.str('MaxResults');
  if (rules.token && (token !== undefined || maxRaw !== undefined || !rules.legacy)) {
    let max = rules.token.default;
    if (maxRaw !== undefined) {
      if (!/^\d+$/.test(maxRaw)) throw invalid('MaxResults', `"${maxRaw}" is not an integer`);
      max = Math.min(rules.token.max, Math.max(rules.token.min, Number(maxRaw)));
    }
    let start = 0;
    if (token !== undefined) {
      const after = Buffer.from(token, 'base64url').toString('utf8');
      if (!after.startsWith('after:')) throw invalid('NextToken', 'the token is malformed or expired');
      const last = after.slice(6);
      start = items.findIndex((x) => x.id > last);
      if (start < 0) start = items.length;
    }
    const slice = items.slice(start, start + max);
    const more = start + max < items.length;
    return {
      items: slice,
      nextToken: more ? Buffer.from(`after:${slice[slice.length - 1]!.id}`).toString('base64url') : '',
      pageNumber: 1,
      pageSize: max,
      totalCount: items.length,
    };
  }
  const pageNumber = p.int('PageNumber', 1, 1_000_000) ?? 1;
  const pageSize = p.int('PageSize', 1, rules.legacy?.max ?? 10) ?? 10;
  const start = (pageNumber - 1) * pageSize;
  return { items: items.slice(start, start + pageSize), nextToken: '', pageNumber, pageSize, totalCount: items.length };
}

/** The paging fields most describe answers carry. */
const pageFields = (page: Page<unknown>) => ({
  NextToken: page.nextToken,
  PageSize: page.pageSize,
  PageNumber: page.pageNumber,
  TotalCount: page.totalCount,
});

function matchesTags(have: Tag[], want: Tag[]): boolean {
  return want.every((w) => have.some((h) => h.key === w.key && (w.value === '' || h.value === w.value)));
}

export function describeNetworkInterfaces(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const ids = p.list('NetworkInterfaceId', 100);
  const privateIps = p.list('PrivateIpAddress', 100);
  const ipv6 = p
    .list('Ipv6Address', 100)
    .map((ip) => (ipaddr.IPv6.isValid(ip) ? ipaddr.IPv6.parse(ip).toString() : ip));
  const tags = p.tags();
  const f = {
    vpc: p.str('VpcId'),
    vsw: p.str('VSwitchId'),
    instance: p.str('InstanceId'),
    status: p.str('Status'),
    type: p.str('Type'),
    sg: p.str('SecurityGroupId'),
    name: p.str('NetworkInterfaceName'),
    primary: p.str('PrimaryIpAddress'),
  };
  if (f.status && !['Available', 'Attaching', 'InUse', 'Detaching', 'Deleting'].includes(f.status))
    throw invalid('Status', `"${f.status}" is not an ENI status`);
  if (f.type && !['Primary', 'Secondary', 'Trunk', 'Member'].includes(f.type))
    throw invalid('Type', `"${f.type}" is not an ENI type`);
  const idSet = new Set(ids);
  const found = [...w.enis.values()].filter(
    (e) =>
      (!ids.length || idSet.has(e.id)) &&
      (!f.vpc || e.vpcId === f.vpc) &&
      (!f.vsw || e.vSwitchId === f.vsw) &&
      (!f.instance || e.instanceId === f.instance) &&
      (!f.status || e.status === f.status) &&
      (!f.type || e.type === f.type) &&
      (!f.sg || e.securityGroupIds.includes(f.sg)) &&
      (!f.name || e.name === f.name) &&
      (!f.primary || e.primaryIp === f.primary) &&
      (!privateIps.length || privateIps.some((ip) => ip === e.primaryIp || e.secondaryIps.includes(ip))) &&
      (!ipv6.length || ipv6.some((ip) => e.ipv6.includes(ip))) &&
      matchesTags(e.tags, tags),
  );
  const page = paginate(found, p, { token: { min: 10, max: 500, default: 10 }, legacy: { max: 1000 } });
  return {
    ...pageFields(page),
    NetworkInterfaceSets: { NetworkInterfaceSet: page.items.map((e) => eniShape(e, ctx.ownerId)) },
  };
}

export function describeNetworkInterfaceAttribute(ctx: ActionContext) {
  const eni = ctx.world.eni(ctx.params.required('NetworkInterfaceId'));
  const attribute = ctx.params.str('Attribute');
  if (attribute && !['basic', 'attachment', 'connectionTrackingConfiguration'].includes(attribute)) {
    throw invalid('Attribute', `"${attribute}" is not a supported attribute`);
  }
  return { ...eniShape(eni, ctx.ownerId), TcpOptionAddressEnabled: '' };
}

export function describeInstanceTypes(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const wanted = p.list('InstanceTypes', 10);
  const family = p.str('InstanceTypeFamily');
  const types = [...w.instanceTypes.values()].filter(
    (t) => (!wanted.length || wanted.includes(t.id)) && (!family || instanceTypeShape(t).InstanceTypeFamily === family),
  );
  const page = paginate(types, p, { token: { min: 1, max: 1600, default: 1600 } });
  return { NextToken: page.nextToken, InstanceTypes: { InstanceType: page.items.map(instanceTypeShape) } };
}

export function describeInstances(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const ids = p.jsonList('InstanceIds', 100);
  const ips = p.jsonList('PrivateIpAddresses', 100);
  const f = {
    vpc: p.str('VpcId'),
    vsw: p.str('VSwitchId'),
    zone: p.str('ZoneId'),
    type: p.str('InstanceType'),
    status: p.str('Status'),
  };
  const found = [...w.instances.values()].filter(
    (i) =>
      (!ids || ids.includes(i.id)) &&
      (!ips || ips.includes(w.enis.get(i.primaryEniId)!.primaryIp)) &&
      (!f.vpc || i.vpcId === f.vpc) &&
      (!f.vsw || i.vSwitchId === f.vsw) &&
      (!f.zone || i.zoneId === f.zone) &&
      (!f.type || i.instanceType === f.type) &&
      (!f.status || i.status === f.status),
  );
  const page = paginate(found, p, { token: { min: 10, max: 100, default: 10 }, legacy: { max: 100 } });
  return {
    ...pageFields(page),
    Instances: { Instance: page.items.map((i) => instanceShape(i, w)) },
  };
}

export function describeSecurityGroups(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const ids = p.jsonList('SecurityGroupIds', 100);
  const one = p.str('SecurityGroupId');
  const vpc = p.str('VpcId');
  const name = p.str('SecurityGroupName');
  const tags = p.tags();
  const found = [...w.securityGroups.values()].filter(
    (g) =>
      (!ids || ids.includes(g.id)) &&
      (!one || g.id === one) &&
      (!vpc || g.vpcId === vpc) &&
      (!name || g.name === name) &&
      matchesTags(g.tags, tags),
  );
  const page = paginate(found, p, { token: { min: 1, max: 100, default: 10 }, legacy: { max: 100 } });
  return {
    RegionId: w.region,
    ...pageFields(page),
    SecurityGroups: {
      SecurityGroup: page.items.map((g) => ({
        SecurityGroupId: g.id,
        SecurityGroupName: g.name ?? '',
        Description: '',
        SecurityGroupType: 'normal',
        VpcId: g.vpcId,
        CreationTime: apiTime(g.creationTime),
        EcsCount: [...w.instances.values()].filter((i) => i.securityGroupIds.includes(g.id)).length,
        AvailableInstanceAmount: 2000,
        ResourceGroupId: '',
        ServiceManaged: false,
        ServiceID: 0,
        RuleCount: 0,
        GroupToGroupRuleCount: 0,
        Tags: { Tag: g.tags.map((t) => ({ TagKey: t.key, TagValue: t.value })) },
      })),
    },
  };
}

export function describeVSwitches(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const vpc = p.str('VpcId');
  if (!p.str('RegionId') && !vpc) throw missing('RegionId');
  if (vpc && !w.vpcs.has(vpc)) throw apiError('InvalidVpcId.NotFound', `The specified VpcId "${vpc}" does not exist.`);
  const f = { id: p.str('VSwitchId'), zone: p.str('ZoneId'), name: p.str('VSwitchName'), ipv6: p.bool('EnableIpv6') };
  const tags = p.tags();
  const found = [...w.vSwitches.values()].filter(
    (v) =>
      (!vpc || v.vpcId === vpc) &&
      (!f.id || v.id === f.id) &&
      (!f.zone || v.zoneId === f.zone) &&
      (!f.name || v.name === f.name) &&
      (f.ipv6 === undefined || Boolean(v.ipv6Cidr) === f.ipv6) &&
      matchesTags(v.tags, tags),
  );
  const page = paginate(found, p, { legacy: { max: 50 } });
  return {
    PageSize: page.pageSize,
    PageNumber: page.pageNumber,
    TotalCount: page.totalCount,
    VSwitches: { VSwitch: page.items.map((v) => vSwitchShape(v, ctx.ownerId)) },
  };
}

export function describeVpcs(ctx: ActionContext) {
  const { world: w, params: p } = ctx;
  const id = p.str('VpcId');
  const found = [...w.vpcs.values()].filter((v) => !id || v.id === id);
  const page = paginate(found, p, { legacy: { max: 50 } });
  return {
    PageSize: page.pageSize,
    PageNumber: page.pageNumber,
    TotalCount: page.totalCount,
    Vpcs: {
      Vpc: page.items.map((v) => ({
        VpcId: v.id,
        VpcName: v.name ?? '',
        RegionId: w.region,
        Status: 'Available',
        CidrBlock: v.cidr,
        CreationTime: apiTime(v.creationTime),
        IsDefault: false,
        VSwitchIds: { VSwitchId: [...w.vSwitches.values()].filter((s) => s.vpcId === v.id).map((s) => s.id) },
        Tags: { Tag: [] },
      })),
    },
  };
}
