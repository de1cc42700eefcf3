/** Plain data the cloud client returns: no wrapper lists, no XML heritage. */

export type EniStatus = 'Available' | 'Attaching' | 'InUse' | 'Detaching' | 'Deleting';

export interface NetworkInterface {
  id: string;
  mac: string;
  status: EniStatus;
  type: string;
  vpcId: string;
  vSwitchId: string;
  zoneId: string;
  instanceId?: string;
  deviceIndex?: number;
  primaryIp: string;
  /** Secondary private IPv4 addresses (the ENI's own primary excluded). */
  secondaryIps: string[];
  ipv4Prefixes: string[];
  ipv6: string[];
  /** IPv6 /80 prefixes (ipv6Mode Prefix): every address of each is the ENI's. */
  ipv6Prefixes: string[];
  securityGroupIds: string[];
  tags: Record<string, string>;
  creationTime: string;
}

export interface VSwitch {
  id: string;
  vpcId: string;
  zoneId: string;
  cidr: string;
  ipv6Cidr?: string;
  availableIpCount: number;
  name: string;
  tags: Record<string, string>;
}

export interface Vpc {
  id: string;
  cidr: string;
  name: string;
  vSwitchIds: string[];
}

export interface SecurityGroup {
  id: string;
  vpcId: string;
  name: string;
  tags: Record<string, string>;
}

export interface InstanceTypeLimits {
  id: string;
  /** ENIs per instance, the primary included. */
  eniQuantity: number;
  /** Private IPv4 addresses per ENI, the ENI's primary included. */
  ipv4PerEni: number;
  ipv6PerEni: number;
}

export interface Instance {
  id: string;
  instanceType: string;
  zoneId: string;
  vpcId: string;
  vSwitchId: string;
  status: string;
  primaryIp: string;
  securityGroupIds: string[];
}

export interface EniFilter {
  ids?: string[];
  instanceId?: string;
  vpcId?: string;
  vSwitchId?: string;
  status?: EniStatus;
  type?: 'Primary' | 'Secondary';
  tags?: Record<string, string>;
}

export interface CreateEniRequest {
  vSwitchId: string;
  securityGroupIds: string[];
  /** Secondary IPv4 addresses to create with the ENI (its own primary comes on top). */
  secondaryIpCount?: number;
  ipv6Count?: number;
  ipv4PrefixCount?: number;
  ipv6PrefixCount?: number;
  tags?: Record<string, string>;
  name?: string;
  description?: string;
  clientToken?: string;
}
