import type { ENIPoolSpec } from '../../api/types.js';
import type { CiliumNode } from './types.js';

/**
 * What a CiliumNode says of its node's pool, as ENIPool spec fields: the instance (where the Node
 * does not say it) and, where the agent set them, sizing and placement. These win over the
 * node's ENIPoolClass: they are per node, and they are where a Cilium user already configures
 * them (the agent's flags or custom CNI configuration, rewritten on every agent update). Zero
 * and empty mean unset (what a 1.19 agent writes when its flags are left at their defaults), so
 * the class decides those; the class alone decides what a CiliumNode has no field for (release,
 * ENI tags, vSwitch selection).
 */
export function ciliumSpecFields(node: CiliumNode | undefined): Partial<ENIPoolSpec> {
  if (!node) return {};
  const cloud = node.spec['alibaba-cloud'] ?? {};
  const ipam = node.spec.ipam ?? {};
  const out: Partial<ENIPoolSpec> = {};
  const text = (v: string | undefined) => (v ? v : undefined);
  const count = (v: number | undefined) => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined);
  const list = (v: string[] | undefined) => (v?.length ? [...v] : undefined);
  const tags = (v: Record<string, string> | undefined) => (v && Object.keys(v).length ? { ...v } : undefined);
  const fields: Partial<ENIPoolSpec> = {
    instanceID: text(node.spec['instance-id']),
    instanceType: text(cloud['instance-type']),
    zoneID: text(cloud['availability-zone']),
    preAllocate: count(ipam['pre-allocate']),
    minAllocate: count(ipam['min-allocate']),
    maxAllocate: count(ipam['max-allocate']),
    maxAboveWatermark: count(ipam['max-above-watermark']),
    vSwitchIDs: list(cloud.vswitches),
    vSwitchTags: tags(cloud['vswitch-tags']),
    securityGroupIDs: list(cloud['security-groups']),
    securityGroupTags: tags(cloud['security-group-tags']),
  };
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
