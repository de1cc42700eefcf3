import { NumberedListing, TokenListing } from './paging.js';
import type { RpcCaller, RpcParams } from './rpc.js';
import type {
  CreateEniRequest,
  EniFilter,
  EniStatus,
  Instance,
  InstanceTypeLimits,
  NetworkInterface,
  SecurityGroup,
  VSwitch,
  Vpc,
} from './types.js';

/*
 * Wire shapes are mapped to typed data right here; rpc.ts has checked each answer against what its
 * action promises (answers.ts) before, so a list that is left out here is one the API may leave out.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */

const list = <T = any>(wrapper: any, key: string): T[] => (Array.isArray(wrapper?.[key]) ? wrapper[key] : []);
const num = (v: unknown): number => Number(v ?? 0);

function tagMap(tags: any, keyField: 'TagKey' | 'Key', valueField: 'TagValue' | 'Value'): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of list(tags, 'Tag')) out[String(t[keyField])] = String(t[valueField] ?? '');
  return out;
}

const tagParams = (tags: Record<string, string> = {}): Array<Record<string, string>> =>
  Object.entries(tags).map(([Key, Value]) => ({ Key, Value }));

export function toNetworkInterface(e: any): NetworkInterface {
  const instanceId = e.InstanceId || e.Attachment?.InstanceId || undefined;
  return {
    id: e.NetworkInterfaceId,
    mac: e.MacAddress,
    status: e.Status as EniStatus,
    type: e.Type,
    vpcId: e.VpcId,
    vSwitchId: e.VSwitchId,
    zoneId: e.ZoneId,
    instanceId,
    deviceIndex: e.Attachment?.DeviceIndex === undefined ? undefined : num(e.Attachment.DeviceIndex),
    primaryIp: e.PrivateIpAddress,
    secondaryIps: list(e.PrivateIpSets, 'PrivateIpSet')
      .filter((s) => !s.Primary)
      .map((s) => s.PrivateIpAddress),
    ipv4Prefixes: list(e.Ipv4PrefixSets, 'Ipv4PrefixSet').map((s) => s.Ipv4Prefix),
    ipv6: list(e.Ipv6Sets, 'Ipv6Set').map((s) => s.Ipv6Address),
    ipv6Prefixes: list(e.Ipv6PrefixSets, 'Ipv6PrefixSet').map((s) => s.Ipv6Prefix),
    securityGroupIds: list(e.SecurityGroupIds, 'SecurityGroupId').map(String),
    tags: tagMap(e.Tags, 'TagKey', 'TagValue'),
    creationTime: e.CreationTime ?? '',
  };
}

function filterParams(f: EniFilter): RpcParams {
  return {
    VpcId: f.vpcId,
    VSwitchId: f.vSwitchId,
    InstanceId: f.instanceId,
    Status: f.status,
    Type: f.type,
    Tag: f.tags && Object.keys(f.tags).length ? tagParams(f.tags) : undefined,
  };
}

const defined = (p: RpcParams): RpcParams => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined));

/** Typed ECS and VPC actions. Every call goes through its action's limiter and retry policy. */
export class EcsApi {
  constructor(
    private readonly ecs: RpcCaller,
    private readonly vpc: RpcCaller,
    readonly region: string,
  ) {}

  /** Mutating calls sent and not yet answered: a leader handing over waits for them. */
  get mutationsInFlight(): number {
    return this.ecs.mutationsInFlight + this.vpc.mutationsInFlight;
  }

  private call<T = any>(
    action: string,
    params: RpcParams,
    o: { idempotent?: boolean; clientToken?: string; check?: (answer: any) => string | undefined } = {},
  ): Promise<T> {
    return this.ecs.call<T>(action, defined({ RegionId: this.region, ...params }), o);
  }

  async createNetworkInterface(r: CreateEniRequest): Promise<NetworkInterface> {
    const res = await this.call(
      'CreateNetworkInterface',
      {
        VSwitchId: r.vSwitchId,
        SecurityGroupIds: r.securityGroupIds,
        SecondaryPrivateIpAddressCount: r.secondaryIpCount || undefined,
        Ipv6AddressCount: r.ipv6Count || undefined,
        Ipv4PrefixCount: r.ipv4PrefixCount || undefined,
        Ipv6PrefixCount: r.ipv6PrefixCount || undefined,
        Tag: r.tags && Object.keys(r.tags).length ? tagParams(r.tags) : undefined,
        NetworkInterfaceName: r.name,
        Description: r.description,
      },
      { idempotent: true, clientToken: r.clientToken },
    );
    return toNetworkInterface(res);
  }

  async attachNetworkInterface(eniId: string, instanceId: string): Promise<void> {
    await this.call('AttachNetworkInterface', { NetworkInterfaceId: eniId, InstanceId: instanceId });
  }

  async detachNetworkInterface(eniId: string, instanceId: string): Promise<void> {
    await this.call('DetachNetworkInterface', { NetworkInterfaceId: eniId, InstanceId: instanceId });
  }

  async deleteNetworkInterface(eniId: string): Promise<void> {
    await this.call('DeleteNetworkInterface', { NetworkInterfaceId: eniId });
  }

  /** Adds `count` secondary IPv4 addresses (or the named ones) and returns those assigned. */
  async assignPrivateIpAddresses(
    eniId: string,
    req: { count?: number; ips?: string[]; clientToken?: string },
  ): Promise<string[]> {
    const res = await this.call(
      'AssignPrivateIpAddresses',
      {
        NetworkInterfaceId: eniId,
        SecondaryPrivateIpAddressCount: req.ips?.length ? undefined : req.count,
        PrivateIpAddress: req.ips?.length ? req.ips : undefined,
      },
      { idempotent: true, clientToken: req.clientToken },
    );
    return list(res.AssignedPrivateIpAddressesSet?.PrivateIpSet, 'PrivateIpAddress').map(String);
  }

  async unassignPrivateIpAddresses(eniId: string, ips: string[]): Promise<void> {
    await this.call('UnassignPrivateIpAddresses', { NetworkInterfaceId: eniId, PrivateIpAddress: ips });
  }

  /** Adds `count` IPv4 /28 prefixes (at most 10 a call) and returns those assigned. */
  async assignIpv4Prefixes(eniId: string, req: { count: number; clientToken?: string }): Promise<string[]> {
    const res = await this.call(
      'AssignPrivateIpAddresses',
      { NetworkInterfaceId: eniId, Ipv4PrefixCount: req.count },
      { idempotent: true, clientToken: req.clientToken },
    );
    return list(res.AssignedPrivateIpAddressesSet?.Ipv4PrefixSet, 'Ipv4Prefixes').map(String);
  }

  /** Takes IPv4 prefixes off an ENI (UnassignPrivateIpAddresses with Ipv4Prefix.N, at most 10). */
  async unassignIpv4Prefixes(eniId: string, prefixes: string[]): Promise<void> {
    await this.call('UnassignPrivateIpAddresses', { NetworkInterfaceId: eniId, Ipv4Prefix: prefixes });
  }

  async assignIpv6Addresses(
    eniId: string,
    req: { count?: number; ips?: string[]; clientToken?: string },
  ): Promise<string[]> {
    const res = await this.call(
      'AssignIpv6Addresses',
      {
        NetworkInterfaceId: eniId,
        Ipv6AddressCount: req.ips?.length ? undefined : req.count,
        Ipv6Address: req.ips?.length ? req.ips : undefined,
      },
      { idempotent: true, clientToken: req.clientToken },
    );
    return list(res.Ipv6Sets, 'Ipv6Address').map(String);
  }

  async unassignIpv6Addresses(eniId: string, ips: string[]): Promise<void> {
    await this.call('UnassignIpv6Addresses', { NetworkInterfaceId: eniId, Ipv6Address: ips });
  }

  /** Adds `count` IPv6 /80 prefixes (at most 10 a call) and returns those assigned. */
  async assignIpv6Prefixes(eniId: string, req: { count: number; clientToken?: string }): Promise<string[]> {
    const res = await this.call(
      'AssignIpv6Addresses',
      { NetworkInterfaceId: eniId, Ipv6PrefixCount: req.count },
      { idempotent: true, clientToken: req.clientToken },
    );
    return list(res.Ipv6PrefixSets, 'Ipv6Prefix').map(String);
  }

  /** Takes IPv6 prefixes off an ENI (UnassignIpv6Addresses with Ipv6Prefix.N, at most 10). */
  async unassignIpv6Prefixes(eniId: string, prefixes: string[]): Promise<void> {
    await this.call('UnassignIpv6Addresses', { NetworkInterfaceId: eniId, Ipv6Prefix: prefixes });
  }

  /**
   * One page of ENIs (NextToken paging, up to 500 per page). Within a listing, `listing` holds the
   * tokens answered so far: a page answering one of them again is a bad answer.
   */
  async describeNetworkInterfacesPage(
    f: EniFilter,
    page: { nextToken?: string; maxResults?: number } = {},
    listing?: TokenListing,
  ) {
    if (f.ids && f.ids.length > 100)
      throw new RangeError(`at most 100 ENI ids per DescribeNetworkInterfaces call, got ${f.ids.length}`);
    const res = await this.call(
      'DescribeNetworkInterfaces',
      {
        ...filterParams(f),
        NetworkInterfaceId: f.ids?.length ? f.ids : undefined,
        MaxResults: page.maxResults ?? 500,
        NextToken: page.nextToken || undefined,
      },
      { check: listing && ((a) => listing.problem(String(a.NextToken ?? ''))) },
    );
    return {
      items: list(res.NetworkInterfaceSets, 'NetworkInterfaceSet').map(toNetworkInterface),
      nextToken: String(res.NextToken ?? ''),
    };
  }

  /** Every ENI matching the filter, across pages; ids are asked for in batches of 100. */
  async describeNetworkInterfaces(f: EniFilter = {}): Promise<NetworkInterface[]> {
    if (f.ids && f.ids.length > 100) {
      const out: NetworkInterface[] = [];
      for (let i = 0; i < f.ids.length; i += 100)
        out.push(...(await this.describeNetworkInterfaces({ ...f, ids: f.ids.slice(i, i + 100) })));
      return out;
    }
    const out: NetworkInterface[] = [];
    for await (const page of this.networkInterfacePages(f)) out.push(...page);
    return out;
  }

  /**
   * The pages of ENIs matching the filter, one DescribeNetworkInterfaces call each. A page that
   * fails throws out of the loop: a consumer takes the pages as the whole only when it ends.
   */
  async *networkInterfacePages(f: EniFilter): AsyncGenerator<NetworkInterface[]> {
    const listing = new TokenListing();
    let nextToken: string | undefined;
    do {
      const page = await this.describeNetworkInterfacesPage(f, { nextToken }, listing);
      yield page.items;
      nextToken = listing.next(page.nextToken);
    } while (nextToken);
  }

  async describeNetworkInterfaceAttribute(eniId: string): Promise<NetworkInterface> {
    return toNetworkInterface(
      await this.call('DescribeNetworkInterfaceAttribute', { NetworkInterfaceId: eniId, Attribute: 'basic' }),
    );
  }

  async describeInstanceTypes(ids: string[] = []): Promise<InstanceTypeLimits[]> {
    const out: InstanceTypeLimits[] = [];
    const batches = ids.length
      ? Array.from({ length: Math.ceil(ids.length / 10) }, (_, i) => ids.slice(i * 10, i * 10 + 10))
      : [[]];
    for (const batch of batches) {
      const listing = new TokenListing();
      let nextToken: string | undefined;
      do {
        const res = await this.ecs.call<any>(
          'DescribeInstanceTypes',
          defined({ InstanceTypes: batch.length ? batch : undefined, MaxResults: 100, NextToken: nextToken }),
          { check: (a) => listing.problem(String(a.NextToken ?? '')) },
        );
        for (const t of list(res.InstanceTypes, 'InstanceType')) {
          out.push({
            id: t.InstanceTypeId,
            eniQuantity: num(t.EniQuantity),
            ipv4PerEni: num(t.EniPrivateIpAddressQuantity),
            ipv6PerEni: num(t.EniIpv6AddressQuantity),
          });
        }
        nextToken = listing.next(String(res.NextToken ?? ''));
      } while (nextToken);
    }
    return out;
  }

  async describeInstances(f: { ids?: string[]; privateIps?: string[]; vpcId?: string } = {}): Promise<Instance[]> {
    const out: Instance[] = [];
    const listing = new TokenListing();
    let nextToken: string | undefined;
    do {
      const res = await this.call(
        'DescribeInstances',
        {
          InstanceIds: f.ids ? JSON.stringify(f.ids) : undefined,
          PrivateIpAddresses: f.privateIps ? JSON.stringify(f.privateIps) : undefined,
          VpcId: f.vpcId,
          MaxResults: 100,
          NextToken: nextToken,
        },
        { check: (a) => listing.problem(String(a.NextToken ?? '')) },
      );
      for (const i of list(res.Instances, 'Instance')) {
        out.push({
          id: i.InstanceId,
          instanceType: i.InstanceType,
          zoneId: i.ZoneId,
          vpcId: i.VpcAttributes?.VpcId ?? '',
          vSwitchId: i.VpcAttributes?.VSwitchId ?? '',
          status: i.Status,
          primaryIp: list(i.VpcAttributes?.PrivateIpAddress, 'IpAddress')[0] ?? '',
          securityGroupIds: list(i.SecurityGroupIds, 'SecurityGroupId').map(String),
        });
      }
      nextToken = listing.next(String(res.NextToken ?? ''));
    } while (nextToken);
    return out;
  }

  async describeSecurityGroups(
    f: { vpcId?: string; ids?: string[]; tags?: Record<string, string> } = {},
  ): Promise<SecurityGroup[]> {
    const out: SecurityGroup[] = [];
    const listing = new TokenListing();
    let nextToken: string | undefined;
    do {
      const res = await this.call(
        'DescribeSecurityGroups',
        {
          VpcId: f.vpcId,
          SecurityGroupIds: f.ids ? JSON.stringify(f.ids) : undefined,
          Tag: f.tags && Object.keys(f.tags).length ? tagParams(f.tags) : undefined,
          MaxResults: 100,
          NextToken: nextToken,
        },
        { check: (a) => listing.problem(String(a.NextToken ?? '')) },
      );
      for (const g of list(res.SecurityGroups, 'SecurityGroup')) {
        out.push({
          id: g.SecurityGroupId,
          vpcId: g.VpcId,
          name: g.SecurityGroupName ?? '',
          tags: tagMap(g.Tags, 'TagKey', 'TagValue'),
        });
      }
      nextToken = listing.next(String(res.NextToken ?? ''));
    } while (nextToken);
    return out;
  }

  async describeVSwitches(
    f: { vpcId?: string; id?: string; zoneId?: string; tags?: Record<string, string> } = {},
  ): Promise<VSwitch[]> {
    const out: VSwitch[] = [];
    const listing = new NumberedListing(50);
    for (;;) {
      const res = await this.vpc.call<any>(
        'DescribeVSwitches',
        defined({
          RegionId: this.region,
          VpcId: f.vpcId,
          VSwitchId: f.id,
          ZoneId: f.zoneId,
          Tag: f.tags && Object.keys(f.tags).length ? tagParams(f.tags) : undefined,
          PageNumber: listing.page,
          PageSize: listing.pageSize,
        }),
        { check: (a) => listing.problem(a.VSwitches.VSwitch.length, a.TotalCount) },
      );
      const items = list(res.VSwitches, 'VSwitch');
      for (const v of items) {
        out.push({
          id: v.VSwitchId,
          vpcId: v.VpcId,
          zoneId: v.ZoneId,
          cidr: v.CidrBlock,
          ipv6Cidr: v.Ipv6CidrBlock || undefined,
          availableIpCount: num(v.AvailableIpAddressCount),
          name: v.VSwitchName ?? '',
          tags: tagMap(v.Tags, 'Key', 'Value'),
        });
      }
      if (listing.next(res.TotalCount)) return out;
    }
  }

  async describeVpcs(id?: string): Promise<Vpc[]> {
    const out: Vpc[] = [];
    const listing = new NumberedListing(50);
    for (;;) {
      const res = await this.vpc.call<any>(
        'DescribeVpcs',
        defined({ RegionId: this.region, VpcId: id, PageNumber: listing.page, PageSize: listing.pageSize }),
        { check: (a) => listing.problem(a.Vpcs.Vpc.length, a.TotalCount) },
      );
      const items = list(res.Vpcs, 'Vpc');
      for (const v of items)
        out.push({
          id: v.VpcId,
          cidr: v.CidrBlock,
          name: v.VpcName ?? '',
          vSwitchIds: list(v.VSwitchIds, 'VSwitchId'),
        });
      if (listing.next(res.TotalCount)) return out;
    }
  }
}
