import { PREFIX_SIZE } from './prefix.js';

/** ENI limits of an instance type, as DescribeInstanceTypes gives them. */
export interface InstanceLimits {
  /** ENIs per instance, the primary included. */
  eniQuantity: number;
  /** Private IPv4 addresses per ENI, the ENI's own primary included. */
  ipv4PerEni: number;
  /** IPv6 addresses per ENI (dual-stack); none when absent. */
  ipv6PerEni?: number;
}

/**
 * Pod addresses per ENI: its secondary addresses. An ENI's own primary address is the node's (an
 * image configures it on the hot-plugged device, by DHCP), as with AWS's VPC CNI; the instance's
 * primary ENI gives pods its secondaries only with usePrimaryENI.
 */
export const podIpsPerEni = (l: InstanceLimits): number => Math.max(0, l.ipv4PerEni - 1);

/**
 * Pod IPs an instance can hold: the secondary addresses of every secondary ENI, and of its
 * primary ENI when pods may use that too (`usePrimaryENI`).
 */
export function podIpCapacity(l: InstanceLimits, withPrimary = false, prefixes = false): number {
  // In prefix mode each secondary ENI's slot holds a /28; the primary ENI keeps single IPs.
  const perSecondary = podIpsPerEni(l) * (prefixes ? PREFIX_SIZE : 1);
  return Math.max(0, l.eniQuantity - 1) * perSecondary + (withPrimary ? podIpsPerEni(l) : 0);
}

/** Pod addresses one CreateNetworkInterface call may carry: at most 49 secondaries (ECS limit). */
export const CREATE_MAX_IPS = 49;
/** /28 prefixes one CreateNetworkInterface (Ipv4PrefixCount) or AssignPrivateIpAddresses call may carry (ECS limit). */
export const CREATE_MAX_PREFIXES = 10;
export const ASSIGN_MAX_PREFIXES = 10;
