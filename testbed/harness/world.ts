import { DEFAULT_API_LIMITS } from '../../src/cloud/limits.js';
import { defaultWorld, type Fixture } from '../ecs/index.js';

export const ZONES = ['cn-hangzhou-h', 'cn-hangzhou-i', 'cn-hangzhou-j'];

/** Instance types by share of the fleet: the default world's shapes. */
export const DEFAULT_MIX = ['ecs.g7.large', 'ecs.g7.xlarge', 'ecs.c7.2xlarge', 'ecs.g7.xlarge'];

export interface BenchWorldOptions {
  nodes: number;
  timeScale: number;
  /** Instance type of node n (default: the mix above, round robin). */
  typeOf?: (n: number) => string;
  /** Per-action quotas in calls per minute (default: Terway's figures). */
  quotas?: Record<string, number>;
}

/**
 * A world with room for thousands of nodes: one VPC (10.0.0.0/8), per zone a /16 vSwitch for
 * nodes and one for pods, the default world's instance types and security groups, and the
 * regional ENI quota out of the way. Quotas and delays are the default world's.
 */
export function benchWorld(o: BenchWorldOptions): Fixture {
  const base = defaultWorld();
  const typeOf = o.typeOf ?? ((n: number) => DEFAULT_MIX[n % DEFAULT_MIX.length]!);
  return {
    ...base,
    vpcs: [{ id: 'vpc-bench', cidr: '10.0.0.0/8', name: 'bench' }],
    vSwitches: ZONES.flatMap((zoneId, z) => [
      { id: `vsw-${z}-nodes`, vpcId: 'vpc-bench', zoneId, cidr: `10.${z}.0.0/16`, tags: { role: 'nodes' } },
      { id: `vsw-${z}-pods`, vpcId: 'vpc-bench', zoneId, cidr: `10.${16 + z}.0.0/16`, tags: { role: 'pods' } },
    ]),
    securityGroups: [
      { id: 'sg-bench-nodes', vpcId: 'vpc-bench', tags: { role: 'nodes' } },
      { id: 'sg-bench-pods', vpcId: 'vpc-bench', tags: { role: 'pods' } },
    ],
    instances: Array.from({ length: o.nodes }, (_, n) => ({
      id: `i-bench-${String(n + 1).padStart(5, '0')}`,
      instanceType: typeOf(n),
      vSwitchId: `vsw-${n % ZONES.length}-nodes`,
      securityGroupIds: ['sg-bench-nodes'],
      hostName: `node-${String(n + 1).padStart(5, '0')}`,
    })),
    quotas: {
      enisPerRegion: 1_000_000,
      api: Object.fromEntries(
        Object.entries(o.quotas ?? DEFAULT_API_LIMITS).map(([a, perMinute]) => [a, { perMinute }]),
      ),
    },
    timeScale: o.timeScale,
  };
}
