import {
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Node,
} from '@kubernetes/client-node';
import { API_VERSION, GROUP, VERSION, type ENIPool, type ENIPoolClass, type ENIPoolSpec } from '../api/types.js';
import type { EcsApi } from '../cloud/index.js';
import { isConflict } from '../kube/errors.js';
import type { Informer } from '../kube/informer.js';
import type { Logger } from '../observability/logger.js';
import type { CloudState } from './cloud-state.js';
import type { OperatorConfig } from './config.js';
import type { EventRecorder } from '../kube/events.js';
import { nodeInfo, winningClass, type NodeInfo } from './node-info.js';
import { conditionTime, setCondition } from '../ipam/conditions.js';
import { MAX_SECURITY_GROUPS_PER_ENI, securityGroupsFor } from '../ipam/placement.js';
import { TAGS } from './cloud-state.js';

const INSTANCE_BY_IP_TTL_MS = 10 * 60_000;
/** ECS: at most 20 tags on a resource. */
const MAX_TAGS_PER_ENI = 20;
const OWNERSHIP_TAG_KEYS = Object.fromEntries(Object.values(TAGS).map((k) => [k, '']));

export interface ClassDeps {
  kc: KubeConfig;
  classes: Informer<ENIPoolClass>;
  pools: Informer<ENIPool>;
  nodes: Informer<V1Node>;
  api: EcsApi;
  cloud: CloudState;
  events: EventRecorder;
  config: OperatorConfig;
  logger: Logger;
  now: () => number;
}

/** A pool with this annotation set to "true" is the user's: the operator never rewrites its spec. */
export const OVERRIDE_ANNOTATION = 'eniipam.io/override';
export const MISMATCH_ANNOTATION = 'eniipam.io/class-mismatch';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const POLICY_FIELDS = [
  'vSwitchIDs',
  'vSwitchTags',
  'vSwitchSelection',
  'securityGroupIDs',
  'securityGroupTags',
  'eniTags',
  'minAllocate',
  'preAllocate',
  'maxAboveWatermark',
  'maxAllocate',
  'releaseExcessIPs',
  'releaseDelaySeconds',
  'deleteEmptyENIs',
] as const;

/** Why a class cannot work in this VPC, or undefined; and the zones its vSwitches cover. */
export async function validateClass(
  c: ENIPoolClass,
  cloud: CloudState,
  vpcId: string,
): Promise<{ reason?: string; message: string; zones: string[] }> {
  const spec = c.spec;
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
  const chosen = [...inVpc.filter((v) => spec.vSwitchIDs?.includes(v.id)), ...tagged];
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
  const zones = [...new Set(chosen.map((v) => v.zoneId))].sort();
  return {
    message: `vSwitches ${[...new Set(chosen.map((v) => v.id))].join(', ')} cover zones ${zones.join(', ')}`,
    zones,
  };
}

/**
 * Validates a class against the cloud and keeps one ENIPool per node it governs (the highest
 * priority class that selects the node), with the node's instance and the class's policy.
 */
export class ClassReconciler {
  private readonly custom: CustomObjectsApi;
  private readonly instanceByIp = new Map<string, { id: string; at: number }>();

  constructor(private readonly d: ClassDeps) {
    this.custom = d.kc.makeApiClient(CustomObjectsApi);
  }

  async reconcile(name: string): Promise<void> {
    const cls = this.d.classes.get(name);
    if (!cls) return;
    const verdict = await validateClass(cls, this.d.cloud, this.d.config.vpcId);
    const classes = this.d.classes.list();
    const nodes = this.d.nodes.list().map(nodeInfo);
    const governed = nodes.filter((n) => winningClass(classes, n.labels)?.metadata.name === name);
    const now = conditionTime(this.d.now());
    const conditions = setCondition(
      cls.status?.conditions ?? [],
      {
        type: 'Valid',
        status: verdict.reason ? 'False' : 'True',
        reason: verdict.reason ?? 'Valid',
        message: verdict.message,
      },
      now,
    );
    const status = { matchedNodes: governed.length, conditions, observedGeneration: cls.metadata.generation };
    if (
      JSON.stringify(status) !==
      JSON.stringify({
        matchedNodes: cls.status?.matchedNodes,
        conditions: cls.status?.conditions,
        observedGeneration: cls.status?.observedGeneration,
      })
    ) {
      if (verdict.reason && cls.status?.conditions?.find((c) => c.type === 'Valid')?.reason !== verdict.reason) {
        void this.d.events.record(
          { apiVersion: API_VERSION, kind: 'ENIPoolClass', name, uid: cls.metadata.uid },
          'Warning',
          verdict.reason,
          verdict.message,
        );
      }
      await this.custom.patchClusterCustomObjectStatus(
        { group: GROUP, version: VERSION, plural: 'enipoolclasses', name, body: { status } },
        merge,
      );
    }
    if (verdict.reason) return;
    for (const node of governed) await this.ensurePool(cls, node);
    // Pools this class made whose node it no longer governs are left alone, and flagged.
    for (const pool of this.d.pools.list()) {
      if (pool.spec.className !== name || governed.some((n) => n.name === pool.spec.nodeName)) continue;
      const winner = nodes.find((n) => n.name === pool.spec.nodeName);
      const why = winner
        ? `class ${name} no longer selects node ${pool.spec.nodeName} ` +
          `(${winningClass(classes, winner.labels)?.metadata.name ?? 'no class'} does)`
        : '';
      if (why && pool.metadata.annotations?.[MISMATCH_ANNOTATION] !== why) {
        await this.custom.patchClusterCustomObject(
          {
            group: GROUP,
            version: VERSION,
            plural: 'enipools',
            name: pool.metadata.name,
            body: { metadata: { annotations: { [MISMATCH_ANNOTATION]: why } } },
          },
          merge,
        );
      }
    }
  }

  private async instanceOf(node: NodeInfo): Promise<string | undefined> {
    if (node.instanceId) return node.instanceId;
    if (!node.internalIp) return undefined;
    // An address moves to another instance when its instance is released: the answer expires.
    const known = this.instanceByIp.get(node.internalIp);
    if (known && this.d.now() - known.at < INSTANCE_BY_IP_TTL_MS) return known.id;
    const [found] = await this.d.api.describeInstances({ privateIps: [node.internalIp], vpcId: this.d.config.vpcId });
    if (found) this.instanceByIp.set(node.internalIp, { id: found.id, at: this.d.now() });
    else this.instanceByIp.delete(node.internalIp);
    return found?.id;
  }

  private async ensurePool(cls: ENIPoolClass, node: NodeInfo): Promise<void> {
    const existing = this.d.pools.get(node.name);
    if (existing?.metadata.annotations?.[OVERRIDE_ANNOTATION] === 'true') return;
    const spec: ENIPoolSpec = {
      nodeName: node.name,
      instanceID: await this.instanceOf(node),
      instanceType: node.instanceType,
      zoneID: node.zoneId,
      vpcID: this.d.config.vpcId,
      className: cls.metadata.name,
    };
    // A field the class drops is dropped from the pool too (null in the merge patch).
    for (const f of POLICY_FIELDS) (spec as Record<string, unknown>)[f] = cls.spec[f] ?? null;
    if (!existing) {
      const clean = Object.fromEntries(
        Object.entries(spec).filter(([, v]) => v !== null && v !== undefined),
      ) as ENIPoolSpec;
      const body: ENIPool = {
        apiVersion: API_VERSION,
        kind: 'ENIPool',
        metadata: { name: node.name, labels: { 'eniipam.io/class': cls.metadata.name } },
        spec: clean,
      };
      await this.custom
        .createClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools', body })
        .catch((e) => {
          if (!isConflict(e)) throw e;
        });
      this.d.logger.info({ node: node.name, class: cls.metadata.name }, 'created ENIPool');
      return;
    }
    const differs = Object.entries(spec).some(
      ([k, v]) => v !== null && JSON.stringify(v) !== JSON.stringify((existing.spec as Record<string, unknown>)[k]),
    );
    if (differs || existing.metadata.annotations?.[MISMATCH_ANNOTATION]) {
      await this.custom.patchClusterCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: 'enipools',
          name: node.name,
          body: {
            metadata: {
              labels: { 'eniipam.io/class': cls.metadata.name },
              annotations: { [MISMATCH_ANNOTATION]: null },
            },
            spec,
          },
        },
        merge,
      );
    }
  }
}
