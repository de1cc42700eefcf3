/** A vSwitch as the cloud describes it (what placement needs of it). */
export interface VSwitchInfo {
  id: string;
  zoneId: string;
  vpcId: string;
  free: number;
  tags: Record<string, string>;
}

export interface Placement {
  vSwitchIDs?: string[];
  vSwitchTags?: Record<string, string>;
}

const hasTags = (have: Record<string, string>, want: Record<string, string>): boolean =>
  Object.entries(want).every(([k, v]) => have[k] === v);

/**
 * The vSwitches a pool may use in its zone: those named (in their order), then those whose
 * tags match (by id). Neither given: none, which the class validation reports.
 */
export function candidateVSwitches<V extends VSwitchInfo>(p: Placement, all: V[], vpcId: string, zoneId: string): V[] {
  const inZone = all.filter((v) => v.vpcId === vpcId && v.zoneId === zoneId);
  const named = (p.vSwitchIDs ?? []).map((id) => inZone.find((v) => v.id === id)).filter((v): v is V => Boolean(v));
  const tagged =
    p.vSwitchTags && Object.keys(p.vSwitchTags).length
      ? inZone.filter((v) => hasTags(v.tags, p.vSwitchTags!)).sort((a, b) => (a.id < b.id ? -1 : 1))
      : [];
  const seen = new Set<string>();
  return [...named, ...tagged].filter((v) => (seen.has(v.id) ? false : (seen.add(v.id), true)));
}

/** The zones of every vSwitch the placement selects in the VPC, sorted. */
export function placementZones(p: Placement, all: VSwitchInfo[], vpcId: string): string[] {
  const zones = new Set(all.filter((v) => v.vpcId === vpcId).map((v) => v.zoneId));
  return [...zones].filter((z) => candidateVSwitches(p, all, vpcId, z).length > 0).sort();
}

export interface SecurityGroupInfo {
  id: string;
  vpcId: string;
  tags: Record<string, string>;
}

/** ECS: an ENI joins at most five security groups. */
export const MAX_SECURITY_GROUPS_PER_ENI = 5;

/**
 * The security groups of created ENIs: all those named and all those tagged (not one per VPC);
 * more than five is the caller's error to report.
 */
export function securityGroupsFor(
  p: { securityGroupIDs?: string[]; securityGroupTags?: Record<string, string> },
  all: SecurityGroupInfo[],
  vpcId: string,
): string[] {
  const ids = new Set(p.securityGroupIDs ?? []);
  if (p.securityGroupTags && Object.keys(p.securityGroupTags).length) {
    for (const g of all) if (g.vpcId === vpcId && hasTags(g.tags, p.securityGroupTags)) ids.add(g.id);
  }
  return [...ids];
}
