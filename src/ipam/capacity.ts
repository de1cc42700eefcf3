/** ENI limits of an instance type, as DescribeInstanceTypes gives them. */
export interface InstanceLimits {
  /** ENIs per instance, the primary included. */
  eniQuantity: number;
  /** Private IPv4 addresses per ENI, the ENI's own primary included. */
  ipv4PerEni: number;
}

/**
 * Pod IPs an instance can hold: every address of every secondary ENI (their own primary
 * addresses included); the instance's primary ENI is the node's and is never used.
 */
export function podIpCapacity(l: InstanceLimits): number {
  return Math.max(0, l.eniQuantity - 1) * l.ipv4PerEni;
}

/** What one CreateNetworkInterface call may carry: its primary plus at most 49 secondaries (ECS limit). */
export const CREATE_MAX_IPS = 50;
