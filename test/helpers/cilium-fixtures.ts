import type { NetworkInterface, VSwitch } from '../../src/cloud/index.js';

/** The pods' vSwitch of the Cilium-mode unit tests (vsw-1, 10.1.2.0/24). */
export const VSW: VSwitch = {
  id: 'vsw-1',
  vpcId: 'vpc-1',
  zoneId: 'z',
  cidr: '10.1.2.0/24',
  availableIpCount: 100,
  name: '',
  tags: {},
};

/**
 * An ENI of instance i-1 on vsw-1 as the cloud cache has it: attached (InUse) at its device
 * index, or still attaching without one unless `status` says otherwise.
 */
export const eniFixture = (
  id: string,
  deviceIndex: number | undefined,
  ips: string[],
  o: { type?: string; status?: NetworkInterface['status'] } = {},
): NetworkInterface => ({
  id,
  mac: `00:16:3e:00:00:0${deviceIndex ?? 9}`,
  status: o.status ?? (deviceIndex === undefined ? 'Attaching' : 'InUse'),
  type: o.type ?? (deviceIndex === 0 ? 'Primary' : 'Secondary'),
  vpcId: 'vpc-1',
  vSwitchId: 'vsw-1',
  zoneId: 'z',
  instanceId: 'i-1',
  deviceIndex,
  primaryIp: `10.1.2.${100 + (deviceIndex ?? 9)}`,
  secondaryIps: ips,
  ipv4Prefixes: [],
  ipv6: [],
  ipv6Prefixes: [],
  securityGroupIds: ['sg-1'],
  tags: {},
  creationTime: '',
});
