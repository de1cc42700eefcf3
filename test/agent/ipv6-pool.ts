import type { ENIPool } from '../../src/api/types.js';

/** An agent's pool in a vSwitch with an IPv6 /64: InUse ENIs eni-0, eni-1, ... with the addresses given. */
export function ipv6Pool(
  spec: Partial<ENIPool['spec']>,
  enis: Array<{ ips: string[]; ipv6s?: string[]; ipv6Prefixes?: string[] }>,
  status: Partial<NonNullable<ENIPool['status']>> = {},
): ENIPool {
  return {
    apiVersion: 'eniipam.io/v1alpha1',
    kind: 'ENIPool',
    metadata: { name: 'n1' },
    spec: { nodeName: 'n1', ...spec },
    status: {
      enis: enis.map((e, k) => ({
        id: `eni-${k}`,
        mac: `00:16:3e:00:00:0${k}`,
        state: 'InUse' as const,
        vSwitchCIDR: '30.0.16.0/20',
        gatewayIP: '30.0.31.253',
        vSwitchIPv6CIDR: '2408:4005:3c0:a100::/64',
        gatewayIPv6: 'fe80::ecff:ffff:feff:ffff',
        ipv6s: [],
        ...e,
      })),
      ...status,
    },
  };
}
