import { sameJson } from '../../kube/same-json.js';
import { API_VERSION, type ENIPoolClass, type ENIPoolClassStatus } from '../../api/types.js';
import { CloudError, type VSwitch } from '../../cloud/index.js';
import { conditionTime, setCondition, type PlannedCondition } from '../../ipam/conditions.js';
import { familyProblem, needsIpv6 } from '../../ipam/families.js';
import { MAX_SECURITY_GROUPS_PER_ENI, securityGroupsFor } from '../../ipam/placement.js';
import { CILIUM_CLASS_FIX, ciliumCannotUse } from '../cilium/publication.js';
import { TAGS } from '../eni/cloud-state.js';
import type { OperatorConfig } from '../config.js';
import { nodeInfo, winningClass, type NodeInfo } from './node-info.js';
import type { ClassCloudView, ClassHealthView, PlacementSide } from './ports.js';

/** ECS: at most 20 tags on a resource. */
const MAX_TAGS_PER_ENI = 20;
const OWNERSHIP_TAG_KEYS = Object.fromEntries(Object.values(TAGS).map((k) => [k, '']));

/** Why a class cannot work in this VPC, or undefined; and the zones its vSwitches cover. */
export async function validateClass(
  c: ENIPoolClass,
  cloud: ClassCloudView,
  vpcId: string,
  poolApi: OperatorConfig['poolApi'] = 'enipool',
): Promise<{ reason?: string; message: string; zones: string[]; vSwitches?: VSwitch[] }> {
  const spec = c.spec;
  // Its ENIs would be made for nothing: no cilium-agent would hand their addresses out.
  const forCilium = poolApi === 'ciliumnode' ? ciliumCannotUse(spec) : undefined;
  if (forCilium)
    return {
      reason: 'UnservableByCilium',
      message: `${forCilium} cannot be served to cilium-agents (the operator runs with --pool-api ciliumnode); ${CILIUM_CLASS_FIX}`,
      zones: [],
    };
  const vSwitches = await cloud.vSwitches();
  const sgs = await cloud.securityGroups();
  const inVpc = vSwitches.filter((v) => v.vpcId === vpcId);
  const missing = (spec.vSwitchIDs ?? []).filter((id) => !inVpc.some((v) => v.id === id));
  if (missing.length) {
    const elsewhere = missing.filter((id) => vSwitches.some((v) => v.id === id));
    return {
      reason: 'VSwitchNotFound',
      message: `vSwitch ${missing.join(', ')} ${elsewhere.length ? 'is not in' : 'does not exist in'} VPC ${vpcId}`,
      zones: [],
    };
  }
  const tags = spec.vSwitchTags ?? {};
  const tagged = Object.keys(tags).length
    ? inVpc.filter((v) => Object.entries(tags).every(([k, val]) => v.tags[k] === val))
    : [];
  let chosen = [...inVpc.filter((v) => spec.vSwitchIDs?.includes(v.id)), ...tagged];
  if (!chosen.length) {
    return {
      reason: 'NoVSwitch',
      message: Object.keys(tags).length
        ? `no vSwitch of VPC ${vpcId} has the tags ${JSON.stringify(tags)}`
        : 'set vSwitchIDs or vSwitchTags',
      zones: [],
    };
  }
  const missingSg = (spec.securityGroupIDs ?? []).filter((id) => !sgs.some((g) => g.id === id && g.vpcId === vpcId));
  if (missingSg.length)
    return {
      reason: 'SecurityGroupNotFound',
      message: `security group ${missingSg.join(', ')} does not exist in VPC ${vpcId}`,
      zones: [],
    };
  const sgTags = spec.securityGroupTags ?? {};
  if (
    Object.keys(sgTags).length &&
    !sgs.some((g) => g.vpcId === vpcId && Object.entries(sgTags).every(([k, v]) => g.tags[k] === v))
  ) {
    return {
      reason: 'SecurityGroupNotFound',
      message: `no security group of VPC ${vpcId} has the tags ${JSON.stringify(sgTags)}`,
      zones: [],
    };
  }
  if (!(spec.securityGroupIDs ?? []).length && !Object.keys(sgTags).length)
    return { reason: 'NoSecurityGroup', message: 'set securityGroupIDs or securityGroupTags', zones: [] };
  const groups = securityGroupsFor(spec, sgs, vpcId);
  if (groups.length > MAX_SECURITY_GROUPS_PER_ENI) {
    return {
      reason: 'TooManySecurityGroups',
      message:
        `${groups.length} security groups match (${groups.join(', ')}); an ENI joins at most ${MAX_SECURITY_GROUPS_PER_ENI}: ` +
        'narrow securityGroupTags or list fewer securityGroupIDs',
      zones: [],
    };
  }
  const tagCount = Object.keys({ ...spec.eniTags, ...OWNERSHIP_TAG_KEYS }).length;
  if (tagCount > MAX_TAGS_PER_ENI) {
    return {
      reason: 'TooManyTags',
      message:
        `eniTags has ${Object.keys(spec.eniTags ?? {}).length} tags; ` +
        `with the ${Object.keys(OWNERSHIP_TAG_KEYS).length} ownership tags an ENI would carry ${tagCount}, ` +
        `more than the ${MAX_TAGS_PER_ENI} ECS allows`,
      zones: [],
    };
  }
  const reserved = Object.keys(spec.eniTags ?? {}).filter(
    (k) => k.startsWith('eni-ipam.io/') || /^(aliyun|acs:)/i.test(k),
  );
  if (reserved.length)
    return {
      reason: 'ReservedTag',
      message:
        `eniTags may not use the reserved keys ${reserved.join(', ')} ` +
        "(eni-ipam.io/ is the operator's; aliyun and acs: are the cloud's)",
      zones: [],
    };
  if ((spec.maxAllocate ?? 0) > 0 && (spec.minAllocate ?? 0) > spec.maxAllocate!) {
    return {
      reason: 'InvalidSizing',
      message: `minAllocate ${spec.minAllocate} exceeds maxAllocate ${spec.maxAllocate}`,
      zones: [],
    };
  }
  if (needsIpv6(spec)) {
    const problem = familyProblem(spec, chosen);
    if (problem) return { reason: 'InvalidIPFamilies', message: problem, zones: [] };
    chosen = chosen.filter((v) => v.ipv6Cidr);
  }
  const zones = [...new Set(chosen.map((v) => v.zoneId))].sort();
  const unique = [...new Map(chosen.map((v) => [v.id, v])).values()];
  return {
    message: `vSwitches ${unique.map((v) => v.id).join(', ')} cover zones ${zones.join(', ')}`,
    zones,
    vSwitches: unique,
  };
}

/**
 * A class as last judged: whether it can serve its nodes (`unread`: not known, as the cloud could
 * not be read; its nodes get pools, which wait for the cloud), and the zones its vSwitches cover.
 */
export interface ClassVerdict {
  generation?: number;
  state: 'valid' | 'invalid' | 'unread';
  reason?: string;
  message: string;
  zones: string[];
}

export interface ClassReconcilerDeps extends PlacementSide {
  cloud: ClassCloudView;
  health: ClassHealthView;
  config: Pick<OperatorConfig, 'vpcId' | 'poolApi'>;
  /** Every node is placed again (a class came, went or changed what it says). */
  enqueueNodes: () => void;
}

export type ClassResult = { requeueAfterMs?: number; backoff?: boolean };

const CLASS_API = { apiVersion: API_VERSION, kind: 'ENIPoolClass' } as const;
const NODES_NAMED = 5;

/**
 * Judges a class against the cloud and says so in its status: `Valid` (the spec can work in
 * this VPC), `Degraded` (the cloud cannot be read), `ZonesCovered` (every node it governs has a
 * vSwitch of the class in its zone), and how many nodes it governs. The pools follow from the
 * verdicts: when one changes, every node is placed again (see NodePlacement).
 */
export class ClassReconciler {
  private readonly verdicts = new Map<string, ClassVerdict>();

  constructor(private readonly deps: ClassReconcilerDeps) {}

  /** The class's verdict as last judged, or undefined before it has been. */
  verdict(name: string): ClassVerdict | undefined {
    return this.verdicts.get(name);
  }

  async reconcile(name: string): Promise<ClassResult> {
    const { cache, cloud, config, health } = this.deps;
    const cls = cache.class(name);
    if (!cls) {
      // Deleted: its nodes go to the next class that selects them, or say that none does.
      if (this.verdicts.delete(name)) this.deps.enqueueNodes();
      return {};
    }
    const generation = cls.metadata.generation;
    const before = this.verdicts.get(name);
    let verdict: ClassVerdict;
    let readFailed: { reason: string; message: string } | undefined;
    // What the class can use, for the status: undefined when the cloud could not be read (kept as published).
    let headroom: VSwitch[] | undefined;
    try {
      const v = await validateClass(cls, cloud, config.vpcId, config.poolApi);
      verdict = {
        generation,
        state: v.reason ? 'invalid' : 'valid',
        reason: v.reason,
        message: v.message,
        zones: v.zones,
      };
      headroom = v.vSwitches ?? [];
    } catch (e) {
      if (!(e instanceof CloudError)) throw e;
      readFailed = health.causeOf(e);
      // A cloud that cannot be read changes nothing of what was judged of this very spec.
      verdict =
        before && before.generation === generation
          ? before
          : { generation, state: 'unread', message: 'not judged yet: the cloud cannot be read', zones: [] };
    }
    const classes = cache.classes();
    const governed = cache
      .nodes()
      .map(nodeInfo)
      .filter((n) => winningClass(classes, n.labels)?.metadata.name === name);
    const outage = readFailed ?? health.outage();
    const planned: PlannedCondition[] = [
      outage
        ? { type: 'Degraded', status: 'True', ...outage }
        : { type: 'Degraded', status: 'False', reason: 'CloudReadable', message: '' },
    ];
    planned.push(
      verdict.state === 'unread'
        ? { type: 'Valid', status: 'Unknown', reason: 'NotJudged', message: verdict.message }
        : {
            type: 'Valid',
            status: verdict.state === 'valid' ? 'True' : 'False',
            reason: verdict.reason ?? 'Valid',
            message: verdict.message,
          },
      zoneCoverage(verdict, governed),
    );
    // A deposed leader writes nothing, so it reads no instance type for a status it will not write.
    const capacity = this.deps.mayWrite()
      ? {
          ...(headroom ? { vSwitches: headroom.map(vSwitchStatus) } : pick(cls.status, 'vSwitches')),
          ...(await this.instanceTypes(governed, cls)),
        }
      : {};
    await this.publish(cls, governed.length, planned, capacity);
    this.verdicts.set(name, verdict);
    if (JSON.stringify(before) !== JSON.stringify(verdict)) this.deps.enqueueNodes();
    return readFailed ? { backoff: true } : {};
  }

  /**
   * The instance types of the nodes the class governs, with their limits (cached by the cloud
   * state; a type that cannot be read now keeps what was published of it).
   */
  private async instanceTypes(
    governed: NodeInfo[],
    cls: ENIPoolClass,
  ): Promise<Pick<ENIPoolClassStatus, 'instanceTypes'>> {
    const counts = new Map<string, number>();
    for (const n of governed) if (n.instanceType) counts.set(n.instanceType, (counts.get(n.instanceType) ?? 0) + 1);
    if (!counts.size) return {};
    const out: NonNullable<ENIPoolClassStatus['instanceTypes']> = [];
    for (const [name, nodes] of [...counts].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const limits = await this.deps.cloud.instanceType(name).catch(() => undefined);
      const known = cls.status?.instanceTypes?.find((t) => t.name === name);
      if (limits)
        out.push({
          name,
          nodes,
          enis: limits.eniQuantity,
          ipv4PerENI: limits.ipv4PerEni,
          ipv6PerENI: limits.ipv6PerEni,
        });
      else if (known) out.push({ ...known, nodes });
    }
    return out.length ? { instanceTypes: out } : {};
  }

  /** Writes the status if it changed; an Event for each condition that turned bad or changed its reason. */
  private async publish(
    cls: ENIPoolClass,
    matchedNodes: number,
    planned: PlannedCondition[],
    capacity: Pick<ENIPoolClassStatus, 'vSwitches' | 'instanceTypes'>,
  ): Promise<void> {
    const name = cls.metadata.name;
    const old = cls.status?.conditions ?? [];
    const at = conditionTime(this.deps.now());
    const conditions = planned.reduce((list, c) => setCondition(list, c, at), old);
    const status: ENIPoolClassStatus = {
      matchedNodes,
      ...capacity,
      conditions,
      observedGeneration: cls.metadata.generation,
    };
    const same = sameJson(status, {
      matchedNodes: cls.status?.matchedNodes,
      vSwitches: cls.status?.vSwitches,
      instanceTypes: cls.status?.instanceTypes,
      conditions: cls.status?.conditions,
      observedGeneration: cls.status?.observedGeneration,
    });
    if (same || !this.deps.mayWrite()) return;
    for (const c of planned) {
      const bad = c.type === 'Degraded' ? c.status === 'True' : c.status === 'False';
      const was = old.find((x) => x.type === c.type);
      if (bad && (was?.reason !== c.reason || was?.message !== c.message))
        this.deps.events.record({ ...CLASS_API, name, uid: cls.metadata.uid }, 'Warning', c.reason!, c.message!);
    }
    await this.deps.store.patchClassStatus(name, status);
  }
}

/** A vSwitch as the class's status shows it. */
const vSwitchStatus = (v: VSwitch) => ({
  id: v.id,
  zoneID: v.zoneId,
  cidr: v.cidr,
  ...(v.ipv6Cidr ? { ipv6CIDR: v.ipv6Cidr } : {}),
  freeIPs: v.availableIpCount,
});

/** The field of a status when it has one (so that absent and missing compare the same). */
function pick<K extends keyof ENIPoolClassStatus>(
  status: ENIPoolClassStatus | undefined,
  key: K,
): Pick<ENIPoolClassStatus, K> {
  return (status?.[key] === undefined ? {} : { [key]: status[key] }) as Pick<ENIPoolClassStatus, K>;
}

/** Whether every node the class governs has one of its vSwitches in its zone. */
function zoneCoverage(verdict: ClassVerdict, governed: NodeInfo[]): PlannedCondition {
  if (verdict.state !== 'valid')
    return {
      type: 'ZonesCovered',
      status: 'Unknown',
      reason: verdict.state === 'unread' ? 'NotJudged' : 'ClassInvalid',
      message: '',
    };
  const uncovered = new Map<string, string[]>();
  for (const n of governed) {
    if (!n.zoneId || verdict.zones.includes(n.zoneId)) continue;
    uncovered.set(n.zoneId, [...(uncovered.get(n.zoneId) ?? []), n.name]);
  }
  if (!uncovered.size) return { type: 'ZonesCovered', status: 'True', reason: 'AllZonesCovered', message: '' };
  const parts = [...uncovered.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([zone, names]) => {
      const shown = names.sort().slice(0, NODES_NAMED).join(', ');
      const more = names.length > NODES_NAMED ? ` and ${names.length - NODES_NAMED} more` : '';
      return `zone ${zone} (${shown}${more})`;
    });
  return {
    type: 'ZonesCovered',
    status: 'False',
    reason: 'NoVSwitchInZone',
    message:
      `nodes in ${parts.join('; ')} have no vSwitch of this class (its vSwitches cover ${verdict.zones.join(', ')}): ` +
      'add a vSwitch of each of these zones to vSwitchIDs or vSwitchTags',
  };
}
