import type { ENIPool } from '../../src/api/types.js';
import type { PoolObservation } from '../../src/ipam/pool-plan.js';

/**
 * One pool's observation for planner tests: node-a on i-node (ecs.test, zone-a, vpc-a), a
 * normal operator, nothing in flight; `spec` and `status` are the pool's, the rest as given.
 */
export function observation(
  o: Pick<PoolObservation, 'now' | 'limits' | 'vSwitches'> &
    Partial<Omit<PoolObservation, 'pool'>> & { spec?: Partial<ENIPool['spec']>; status?: ENIPool['status'] },
): PoolObservation {
  const { spec, status, ...rest } = o;
  return {
    mode: 'normal',
    vpcId: 'vpc-a',
    instanceEnis: [],
    ownedEnis: [],
    inFlight: { enis: 0, ips: 0 },
    pendingPods: 0,
    securityGroups: [],
    removedByUs: new Set(),
    requestStamp: new Date(o.now).toISOString(),
    ...rest,
    pool: {
      apiVersion: 'eniipam.io/v1alpha1',
      kind: 'ENIPool',
      metadata: { name: 'node-a', generation: 1 },
      spec: {
        nodeName: 'node-a',
        instanceID: 'i-node',
        instanceType: 'ecs.test',
        zoneID: 'zone-a',
        vSwitchIDs: o.vSwitches.map((v) => v.id),
        ...spec,
      },
      ...(status ? { status } : {}),
    },
  };
}

/** node-a's dual-stack vSwitch in zone-a (an IPv6 /64), and the addresses planner tests give ENIs. */
export const VSW6 = {
  id: 'vsw-6',
  zoneId: 'zone-a',
  vpcId: 'vpc-a',
  free: 100,
  tags: {},
  blocked: false,
  ipv6Cidr: '2408:4005:3c0:a100::/64',
};
export const v4 = (n: number) => `192.168.0.${10 + n}`;
export const v6 = (n: number) => `2408:4005:3c0:a100::${(0x100 + n).toString(16)}`;
