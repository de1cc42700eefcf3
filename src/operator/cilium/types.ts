/**
 * The parts of Cilium's CiliumNode (cilium.io/v2) that its alibabacloud IPAM reads and writes
 * (reference/cilium-node.md §1). The agent owns the object's metadata, `spec.alibaba-cloud`,
 * `spec.instance-id`, the sizing in `spec.ipam` and `status.ipam.used`; the IPAM operator owns
 * `spec.ipam.pool`, `status.alibaba-cloud` and `status.ipam.release-ips`. Fields neither reads
 * are carried over as they are.
 */

export const CILIUM_GROUP = 'cilium.io';
export const CILIUM_VERSION = 'v2';
export const CILIUM_API_VERSION = `${CILIUM_GROUP}/${CILIUM_VERSION}`;
export const CILIUM_NODES = { group: CILIUM_GROUP, version: CILIUM_VERSION, plural: 'ciliumnodes' } as const;

/** The tag whose value is an ENI's route-table index on the node (10 + index); 0 is eth0's. */
export const ENI_INDEX_TAG = 'cilium-eni-index';

/** `{resource: <eni-id>}` in this mode; an owner, where set, keeps the agent from handing the address out. */
export interface AllocationIP {
  owner?: string;
  resource?: string;
}
export type AllocationMap = Record<string, AllocationIP>;

export type ReleaseState = 'marked-for-release' | 'ready-for-release' | 'do-not-release' | 'released';

export interface CiliumEni {
  'network-interface-id': string;
  'mac-address': string;
  type: 'Primary' | 'Secondary' | string;
  'instance-id'?: string;
  'security-groupids'?: string[];
  vpc?: { 'vpc-id'?: string; cidr?: string; 'ipv6-cidr'?: string; 'secondary-cidrs'?: string[] };
  'zone-id'?: string;
  vswitch: { 'vswitch-id': string; cidr: string; 'ipv6-cidr'?: string };
  'primary-ip-address': string;
  'private-ipsets': Array<{ 'private-ip-address': string; primary?: boolean }>;
  tags: Record<string, string>;
}

export interface CiliumNodeSpec {
  'instance-id'?: string;
  'alibaba-cloud'?: {
    'instance-type'?: string;
    'availability-zone'?: string;
    'vpc-id'?: string;
    'cidr-block'?: string;
    vswitches?: string[];
    'vswitch-tags'?: Record<string, string>;
    'security-groups'?: string[];
    'security-group-tags'?: Record<string, string>;
  };
  ipam?: {
    pool?: AllocationMap;
    'pre-allocate'?: number;
    'min-allocate'?: number;
    'max-allocate'?: number;
    'max-above-watermark'?: number;
    [other: string]: unknown;
  };
  [other: string]: unknown;
}

export interface CiliumNodeStatus {
  'alibaba-cloud'?: { enis?: Record<string, CiliumEni> };
  ipam?: {
    used?: AllocationMap;
    'release-ips'?: Record<string, ReleaseState>;
    [other: string]: unknown;
  };
  [other: string]: unknown;
}

export interface CiliumNode {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string }>;
    [other: string]: unknown;
  };
  spec: CiliumNodeSpec;
  status?: CiliumNodeStatus;
}
