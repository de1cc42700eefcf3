import type { Eni, Instance, InstanceType, Tag, VSwitch, World } from './world.js';

/** The API's timestamps: UTC to the second, `2019-12-25T12:31:31Z`. */
export const apiTime = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

// Lists are wrapped in an object named after the XML element, as the real API does.
export const tagsShape = (tags: Tag[]) => ({ Tag: tags.map((t) => ({ TagKey: t.key, TagValue: t.value })) });
const vpcTagsShape = (tags: Tag[]) => ({ Tag: tags.map((t) => ({ Key: t.key, Value: t.value })) });

export function eniShape(e: Eni, ownerId: string) {
  return {
    NetworkInterfaceId: e.id,
    NetworkInterfaceName: e.name ?? '',
    Description: e.description ?? '',
    Status: e.status,
    Type: e.type,
    VpcId: e.vpcId,
    VSwitchId: e.vSwitchId,
    ZoneId: e.zoneId,
    InstanceId: e.instanceId ?? '',
    MacAddress: e.mac,
    PrivateIpAddress: e.primaryIp,
    CreationTime: apiTime(e.creationTime),
    OwnerId: ownerId,
    ResourceGroupId: '',
    ServiceID: 0,
    ServiceManaged: false,
    DeleteOnRelease: e.type === 'Primary',
    SourceDestCheck: false,
    NetworkInterfaceTrafficMode: 'Standard',
    QueueNumber: 0,
    QueuePairNumber: 0,
    SecurityGroupIds: { SecurityGroupId: [...e.securityGroupIds] },
    AssociatedPublicIp: {},
    Attachment: e.instanceId
      ? {
          InstanceId: e.instanceId,
          DeviceIndex: e.deviceIndex ?? 0,
          NetworkCardIndex: 0,
          TrunkNetworkInterfaceId: '',
          AttachedTime: e.attachedTime ? apiTime(e.attachedTime) : '',
          MemberNetworkInterfaceIds: { MemberNetworkInterfaceId: [] },
        }
      : {},
    PrivateIpSets: {
      PrivateIpSet: [
        { PrivateIpAddress: e.primaryIp, Primary: true, PrivateDnsName: '', AssociatedPublicIp: {} },
        ...e.secondaryIps.map((ip) => ({
          PrivateIpAddress: ip,
          Primary: false,
          PrivateDnsName: '',
          AssociatedPublicIp: {},
        })),
      ],
    },
    Ipv6Sets: { Ipv6Set: e.ipv6.map((Ipv6Address) => ({ Ipv6Address })) },
    Ipv4PrefixSets: { Ipv4PrefixSet: e.ipv4Prefixes.map((Ipv4Prefix) => ({ Ipv4Prefix })) },
    Ipv6PrefixSets: { Ipv6PrefixSet: e.ipv6Prefixes.map((Ipv6Prefix) => ({ Ipv6Prefix })) },
    Tags: tagsShape(e.tags),
  };
}

export function vSwitchShape(v: VSwitch, ownerId: string) {
  return {
    VSwitchId: v.id,
    VpcId: v.vpcId,
    Status: 'Available',
    CidrBlock: v.cidr,
    Ipv6CidrBlock: v.ipv6Cidr ?? '',
    EnabledIpv6: Boolean(v.ipv6Cidr),
    ZoneId: v.zoneId,
    AvailableIpAddressCount: v.pool.free,
    Description: '',
    VSwitchName: v.name ?? '',
    CreationTime: apiTime(v.creationTime),
    IsDefault: false,
    ResourceGroupId: '',
    NetworkAclId: '',
    OwnerId: Number(ownerId),
    ShareType: '',
    RouteTable: { RouteTableId: '', RouteTableType: 'System' },
    Tags: vpcTagsShape(v.tags),
  };
}

export function instanceTypeShape(t: InstanceType) {
  return {
    InstanceTypeId: t.id,
    InstanceTypeFamily: t.family ?? t.id.split('.').slice(0, 2).join('.'),
    CpuCoreCount: t.cpuCores,
    MemorySize: t.memoryGiB,
    EniQuantity: t.eniQuantity,
    EniTotalQuantity: t.eniQuantity,
    EniTrunkSupported: false,
    EniPrivateIpAddressQuantity: t.eniPrivateIpAddressQuantity,
    EniIpv6AddressQuantity: t.eniIpv6AddressQuantity,
    EriQuantity: 0,
    NetworkCardQuantity: 1,
    NetworkCards: { NetworkCardInfo: [{ NetworkCardIndex: 0 }] },
  };
}

export function instanceShape(i: Instance, w: World) {
  const enis = w.enisOf(i.id).sort((a, b) => (a.deviceIndex ?? 0) - (b.deviceIndex ?? 0));
  const primary = w.enis.get(i.primaryEniId)!;
  return {
    InstanceId: i.id,
    InstanceName: i.hostName,
    HostName: i.hostName,
    InstanceType: i.instanceType,
    Status: i.status,
    RegionId: w.region,
    ZoneId: i.zoneId,
    CreationTime: apiTime(i.creationTime).replace(/:\d\dZ$/, 'Z'),
    InstanceNetworkType: 'vpc',
    SecurityGroupIds: { SecurityGroupId: [...i.securityGroupIds] },
    Tags: { Tag: [] },
    VpcAttributes: {
      VpcId: i.vpcId,
      VSwitchId: i.vSwitchId,
      NatIpAddress: '',
      PrivateIpAddress: { IpAddress: [primary.primaryIp] },
    },
    NetworkInterfaces: {
      NetworkInterface: enis.map((e) => ({
        NetworkInterfaceId: e.id,
        MacAddress: e.mac,
        PrimaryIpAddress: e.primaryIp,
        Type: e.type,
        PrivateIpSets: {
          PrivateIpSet: [e.primaryIp, ...e.secondaryIps].map((ip, n) => ({ PrivateIpAddress: ip, Primary: n === 0 })),
        },
        Ipv6Sets: { Ipv6Set: e.ipv6.map((Ipv6Address) => ({ Ipv6Address })) },
        Ipv4PrefixSets: { Ipv4PrefixSet: e.ipv4Prefixes.map((Ipv4Prefix) => ({ Ipv4Prefix })) },
        Ipv6PrefixSets: { Ipv6PrefixSet: e.ipv6Prefixes.map((Ipv6Prefix) => ({ Ipv6Prefix })) },
      })),
    },
  };
}
