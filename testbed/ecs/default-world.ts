import type { Fixture } from './fixture.js';

const zones = ['cn-hangzhou-h', 'cn-hangzhou-i', 'cn-hangzhou-j'] as const;
const nodeTypes = ['ecs.g7.large', 'ecs.g7.xlarge', 'ecs.c7.2xlarge', 'ecs.g7.xlarge'];

/**
 * The emulated account's per-action API quotas, calls per minute. Alibaba publishes no ENI
 * figures (reference/ecs-openapi.md, B2); Terway's defaults are the best public proxy, so the
 * account is given those. They are the world's own, not read from the client under test: a
 * client default above them shows as throttling.
 */
export const ACCOUNT_API_QUOTAS: Readonly<Record<string, number>> = {
  CreateNetworkInterface: 500,
  AttachNetworkInterface: 500,
  DeleteNetworkInterface: 500,
  DetachNetworkInterface: 400,
  AssignPrivateIpAddresses: 400,
  UnassignPrivateIpAddresses: 400,
  AssignIpv6Addresses: 400,
  UnassignIpv6Addresses: 400,
  DescribeNetworkInterfaces: 800,
  DescribeNetworkInterfaceAttribute: 2000,
  DescribeVSwitches: 300,
  DescribeInstanceTypes: 400,
  DescribeInstances: 500,
  DescribeSecurityGroups: 500,
  DescribeVpcs: 500,
};

/**
 * The world `emulate ecs` serves without --fixture: region cn-hangzhou, one VPC over three
 * zones, vSwitches of different sizes (vsw-i-small is nearly full), four instance shapes
 * and 24 running instances, AccessKey `demo` / `demo-secret`.
 */
export function defaultWorld(): Fixture {
  return {
    region: 'cn-hangzhou',
    credentials: [{ accessKeyId: 'demo', accessKeySecret: 'demo-secret' }],
    ramRoles: [{ name: 'eni-ipam-demo-role' }],
    oidcRoles: [
      {
        roleArn: 'acs:ram::1234567890123456:role/eni-ipam-demo-rrsa',
        oidcProviderArn: 'acs:ram::1234567890123456:oidc-provider/ack-rrsa-demo',
        token: 'demo-service-account-token',
      },
    ],
    vpcs: [{ id: 'vpc-demo', cidr: '192.168.0.0/16', name: 'demo' }],
    vSwitches: [
      {
        id: 'vsw-h-nodes',
        vpcId: 'vpc-demo',
        zoneId: zones[0],
        cidr: '192.168.0.0/24',
        name: 'nodes-h',
        tags: { role: 'nodes' },
      },
      {
        id: 'vsw-h-pods',
        vpcId: 'vpc-demo',
        zoneId: zones[0],
        cidr: '192.168.16.0/20',
        name: 'pods-h',
        tags: { role: 'pods' },
      },
      {
        id: 'vsw-h-pods-2',
        vpcId: 'vpc-demo',
        zoneId: zones[0],
        cidr: '192.168.32.0/24',
        name: 'pods-h-2',
        tags: { role: 'pods' },
      },
      {
        id: 'vsw-i-nodes',
        vpcId: 'vpc-demo',
        zoneId: zones[1],
        cidr: '192.168.1.0/24',
        name: 'nodes-i',
        tags: { role: 'nodes' },
      },
      {
        id: 'vsw-i-pods',
        vpcId: 'vpc-demo',
        zoneId: zones[1],
        cidr: '192.168.48.0/21',
        name: 'pods-i',
        tags: { role: 'pods' },
      },
      {
        id: 'vsw-i-small',
        vpcId: 'vpc-demo',
        zoneId: zones[1],
        cidr: '192.168.56.0/27',
        name: 'pods-i-small',
        tags: { role: 'pods' },
        foreignUsedIps: 22,
      },
      {
        id: 'vsw-j-nodes',
        vpcId: 'vpc-demo',
        zoneId: zones[2],
        cidr: '192.168.2.0/24',
        name: 'nodes-j',
        tags: { role: 'nodes' },
        // IPv6 on: the primary ENIs of zone j's nodes can give pods IPv6 (usePrimaryENI with IPv6).
        ipv6Cidr: '2408:4005:3c0:a000::/64',
      },
      {
        id: 'vsw-j-pods',
        vpcId: 'vpc-demo',
        zoneId: zones[2],
        cidr: '192.168.64.0/22',
        name: 'pods-j',
        tags: { role: 'pods' },
        ipv6Cidr: '2408:4005:3c0:a100::/64',
      },
    ],
    securityGroups: [
      { id: 'sg-demo-nodes', vpcId: 'vpc-demo', name: 'nodes', tags: { role: 'nodes' } },
      { id: 'sg-demo-pods', vpcId: 'vpc-demo', name: 'pods', tags: { role: 'pods' } },
    ],
    instanceTypes: [
      {
        id: 'ecs.g7.large',
        family: 'ecs.g7',
        cpuCores: 2,
        memoryGiB: 8,
        eniQuantity: 3,
        eniPrivateIpAddressQuantity: 6,
        eniIpv6AddressQuantity: 6,
      },
      {
        id: 'ecs.g7.xlarge',
        family: 'ecs.g7',
        cpuCores: 4,
        memoryGiB: 16,
        eniQuantity: 4,
        eniPrivateIpAddressQuantity: 15,
        eniIpv6AddressQuantity: 15,
      },
      {
        id: 'ecs.c7.2xlarge',
        family: 'ecs.c7',
        cpuCores: 8,
        memoryGiB: 16,
        eniQuantity: 6,
        eniPrivateIpAddressQuantity: 15,
        eniIpv6AddressQuantity: 15,
      },
      {
        id: 'ecs.g7.4xlarge',
        family: 'ecs.g7',
        cpuCores: 16,
        memoryGiB: 64,
        eniQuantity: 8,
        eniPrivateIpAddressQuantity: 30,
        eniIpv6AddressQuantity: 30,
      },
    ],
    instances: Array.from({ length: 24 }, (_, n) => {
      const zone = n % 3;
      return {
        id: `i-demo-${String(n + 1).padStart(2, '0')}`,
        instanceType: n === 23 ? 'ecs.g7.4xlarge' : nodeTypes[n % nodeTypes.length]!,
        vSwitchId: ['vsw-h-nodes', 'vsw-i-nodes', 'vsw-j-nodes'][zone]!,
        securityGroupIds: ['sg-demo-nodes'],
        hostName: `node-${String(n + 1).padStart(2, '0')}`,
      };
    }),
    quotas: {
      enisPerRegion: 1000,
      api: Object.fromEntries(Object.entries(ACCOUNT_API_QUOTAS).map(([a, perMinute]) => [a, { perMinute }])),
    },
    delays: { attachMs: 2000, detachMs: 2000, deleteMs: 500 },
  };
}
