/**
 * One reconcile of a class (ClassReconciler) or a node (NodePlacement) over in-memory fakes of
 * their ports: every write, Event, cloud read and enqueue is recorded and compared exactly.
 */
import { describe, expect, it } from '@jest/globals';
import type { V1Node } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import type { ENIPool, ENIPoolClass, ENIPoolClassStatus } from '../../src/api/types.js';
import { CloudError, type SecurityGroup, type VSwitch } from '../../src/cloud/index.js';
import { silentLogger } from '../../src/observability/logger.js';
import { ClassReconciler, type ClassVerdict } from '../../src/operator/class/reconciler.js';
import { cloudFailureCause } from '../../src/operator/failures.js';
import { MISMATCH_ANNOTATION, NodePlacement, OVERRIDE_ANNOTATION } from '../../src/operator/class/node-placement.js';
import type { PlacementCache, PlacementStore, PoolPatch } from '../../src/operator/class/ports.js';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const VPC = 'vpc-1';

const vsw = (id: string, zoneId: string, tags: Record<string, string> = { role: 'pods' }): VSwitch => ({
  id,
  vpcId: VPC,
  zoneId,
  cidr: '10.0.0.0/24',
  availableIpCount: 200,
  name: id,
  tags,
});
const SG: SecurityGroup = { id: 'sg-1', vpcId: VPC, name: 'pods', tags: { role: 'pods' } };

function cls(name: string, spec: Partial<ENIPoolClass['spec']> = {}, status?: ENIPoolClassStatus): ENIPoolClass {
  return {
    apiVersion: 'eniipam.io/v1alpha1',
    kind: 'ENIPoolClass',
    metadata: { name, uid: `uid-${name}`, generation: 1 },
    spec: { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-1'], ...spec },
    status,
  };
}

function node(
  name: string,
  o: { zone?: string; labels?: Record<string, string>; instance?: string; ip?: string } = {},
): V1Node {
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      labels: {
        'topology.kubernetes.io/zone': o.zone ?? 'zone-a',
        'node.kubernetes.io/instance-type': 'ecs.g7.large',
        ...o.labels,
      },
    },
    spec: { providerID: o.instance === undefined ? `cn-hangzhou.i-${name}` : o.instance },
    status: { addresses: o.ip ? [{ type: 'InternalIP', address: o.ip }] : [] },
  };
}

function pool(name: string, spec: Partial<ENIPool['spec']> = {}, metadata: Partial<ENIPool['metadata']> = {}): ENIPool {
  return {
    apiVersion: 'eniipam.io/v1alpha1',
    kind: 'ENIPool',
    metadata: { name, labels: { 'eniipam.io/class': 'default' }, ...metadata },
    spec: {
      nodeName: name,
      instanceID: `i-${name}`,
      instanceType: 'ecs.g7.large',
      zoneID: 'zone-a',
      vpcID: VPC,
      className: 'default',
      vSwitchTags: { role: 'pods' },
      securityGroupIDs: ['sg-1'],
      ...spec,
    },
  };
}

/** The fakes, and everything they record. */
function world(o: { classes?: ENIPoolClass[]; nodes?: V1Node[]; pools?: ENIPool[]; vSwitches?: VSwitch[] } = {}) {
  const classes = new Map((o.classes ?? []).map((c) => [c.metadata.name, c]));
  const nodes = new Map((o.nodes ?? []).map((n) => [n.metadata!.name!, n]));
  const pools = new Map((o.pools ?? []).map((p) => [p.metadata.name, p]));
  const writes: string[] = [];
  const patches: Array<{ name: string; patch: PoolPatch }> = [];
  const created: ENIPool[] = [];
  const statuses: Array<{ name: string; status: ENIPoolClassStatus }> = [];
  const events: string[] = [];
  const enqueued: string[] = [];
  const reads: string[] = [];
  const cloud = {
    fail: undefined as CloudError | undefined,
    vSwitches: async () => {
      reads.push('DescribeVSwitches');
      if (cloud.fail) throw cloud.fail;
      return o.vSwitches ?? [vsw('vsw-a', 'zone-a')];
    },
    securityGroups: async () => {
      reads.push('DescribeSecurityGroups');
      if (cloud.fail) throw cloud.fail;
      return [SG];
    },
    instanceType: async (id: string) => ({ id, eniQuantity: 3, ipv4PerEni: 10, ipv6PerEni: 10 }),
  };
  const cache: PlacementCache = {
    classes: () => [...classes.values()],
    class: (name) => classes.get(name),
    nodes: () => [...nodes.values()],
    node: (name) => nodes.get(name),
    pool: (name) => pools.get(name),
  };
  const store: PlacementStore = {
    createPool: async (p) => {
      writes.push(`createPool ${p.metadata.name}`);
      created.push(p);
      return true;
    },
    patchPool: async (name, patch) => {
      writes.push(`patchPool ${name}`);
      patches.push({ name, patch });
    },
    patchClassStatus: async (name, status) => {
      writes.push(`patchClassStatus ${name}`);
      statuses.push({ name, status });
    },
  };
  const lease = { fresh: true };
  const health = {
    outage: undefined as { reason: string; message: string } | undefined,
  };
  const side = {
    cache,
    store,
    events: {
      record: (t: { kind: string; name: string }, type: string, reason: string) =>
        events.push(`${type} ${reason} ${t.kind}/${t.name}`),
    },
    logger: silentLogger(),
    now: () => NOW,
    mayWrite: () => lease.fresh,
  };
  const classReconciler = new ClassReconciler({
    ...side,
    cloud,
    health: { outage: () => health.outage, causeOf: (e) => cloudFailureCause(e, 'files in /creds') },
    config: { vpcId: VPC, poolApi: 'enipool' },
    enqueueNodes: () => enqueued.push('nodes'),
  });
  const verdicts = new Map<string, ClassVerdict>();
  const registry = new Registry();
  const instances = {
    calls: [] as string[],
    describeInstances: async (f: { privateIps?: string[] }) => {
      instances.calls.push(`DescribeInstances ${f.privateIps?.join(',')}`);
      return [{ id: 'i-found' } as never];
    },
  };
  const placement = new NodePlacement({
    ...side,
    instances,
    verdict: (name) => verdicts.get(name),
    config: { vpcId: VPC },
    enqueueClass: (name) => enqueued.push(`class/${name}`),
    registry,
  });
  const unserved = async (reason: string) => {
    const line = (await registry.metrics())
      .split('\n')
      .find((l) => l.startsWith(`eni_ipam_nodes_unserved{reason="${reason}"}`));
    return Number(line?.split(' ').at(-1));
  };
  return {
    classes,
    nodes,
    pools,
    writes,
    patches,
    created,
    statuses,
    events,
    enqueued,
    reads,
    cloud,
    lease,
    health,
    classReconciler,
    placement,
    verdicts,
    instances,
    unserved,
  };
}

/** A JSON value with its keys sorted at every level, as Go writes unstructured objects. */
function sortedKeys<T>(v: T): T {
  if (Array.isArray(v)) return v.map(sortedKeys) as T;
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.keys(v)
      .sort()
      .map((k) => [k, sortedKeys((v as Record<string, unknown>)[k])]),
  ) as T;
}

const condition = (s: ENIPoolClassStatus | undefined, type: string) => s?.conditions?.find((c) => c.type === type);
const valid = (zones = ['zone-a']): ClassVerdict => ({ generation: 1, state: 'valid', message: '', zones });

describe('one reconcile of a class', () => {
  it('a valid class: Valid, not Degraded, its zones covered, its nodes counted; every node placed (a first verdict)', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1'), node('n2')] });
    expect(await w.classReconciler.reconcile('default')).toEqual({});
    expect(w.writes).toEqual(['patchClassStatus default']);
    const status = w.statuses[0]!.status;
    expect(status.matchedNodes).toBe(2);
    expect(condition(status, 'Valid')).toMatchObject({ status: 'True', reason: 'Valid' });
    expect(condition(status, 'Degraded')).toMatchObject({ status: 'False', reason: 'CloudReadable' });
    expect(condition(status, 'ZonesCovered')).toMatchObject({ status: 'True' });
    expect(w.events).toEqual([]);
    expect(w.enqueued).toEqual(['nodes']);
    expect(w.classReconciler.verdict('default')).toMatchObject({ state: 'valid', zones: ['zone-a'] });
    // What `kubectl eni-ipam status` and `plan` read: the class's vSwitches with their room, its nodes' types and limits.
    expect(status.vSwitches).toEqual([{ id: 'vsw-a', zoneID: 'zone-a', cidr: '10.0.0.0/24', freeIPs: 200 }]);
    expect(status.instanceTypes).toEqual([{ name: 'ecs.g7.large', nodes: 2, enis: 3, ipv4PerENI: 10, ipv6PerENI: 10 }]);
  });

  it('a vSwitch’s room changes: the status says so; the cloud unreadable: the room last published stays', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1')] });
    await w.classReconciler.reconcile('default');
    w.classes.set('default', { ...cls('default'), status: w.statuses[0]!.status });
    const fewer = vsw('vsw-a', 'zone-a');
    fewer.availableIpCount = 150;
    w.cloud.vSwitches = async () => [fewer];
    await w.classReconciler.reconcile('default');
    expect(w.statuses.at(-1)!.status.vSwitches).toEqual([expect.objectContaining({ id: 'vsw-a', freeIPs: 150 })]);
    w.classes.set('default', { ...cls('default'), status: w.statuses.at(-1)!.status });
    w.cloud.vSwitches = async () => {
      throw new CloudError('DescribeVSwitches', 'ServiceUnavailable', 'down', 'r-2');
    };
    w.cloud.instanceType = async () => {
      throw new CloudError('DescribeInstanceTypes', 'ServiceUnavailable', 'down', 'r-3');
    };
    await w.classReconciler.reconcile('default');
    const kept = w.statuses.at(-1)!.status;
    expect(kept.vSwitches).toEqual([expect.objectContaining({ id: 'vsw-a', freeIPs: 150 })]);
    expect(kept.instanceTypes).toEqual([expect.objectContaining({ name: 'ecs.g7.large', enis: 3 })]);
  });

  it('judged again with nothing new: no write, no Event, no node placed again (the status read back with its keys sorted, as the API server answers a custom resource)', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1')] });
    await w.classReconciler.reconcile('default');
    w.classes.set('default', { ...cls('default'), status: sortedKeys(w.statuses[0]!.status) });
    w.writes.length = 0;
    w.enqueued.length = 0;
    expect(await w.classReconciler.reconcile('default')).toEqual({});
    expect(w.writes).toEqual([]);
    expect(w.enqueued).toEqual([]);
  });

  it('a vSwitch that is not in the VPC: Valid False with the reason, a Warning Event', async () => {
    const w = world({ classes: [cls('broken', { vSwitchIDs: ['vsw-nope'], vSwitchTags: undefined })] });
    await w.classReconciler.reconcile('broken');
    expect(condition(w.statuses[0]!.status, 'Valid')).toMatchObject({
      status: 'False',
      reason: 'VSwitchNotFound',
      message: 'vSwitch vsw-nope does not exist in VPC vpc-1',
    });
    expect(w.events).toEqual(['Warning VSwitchNotFound ENIPoolClass/broken']);
  });

  it('the cloud cannot be read before the class was judged: Degraded with the cause, Valid Unknown, nodes get pools, back off', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1')] });
    w.cloud.fail = new CloudError('DescribeVSwitches', 'InvalidAccessKeyId.NotFound', 'no such key', 'r-1');
    expect(await w.classReconciler.reconcile('default')).toEqual({ backoff: true });
    const status = w.statuses[0]!.status;
    expect(condition(status, 'Degraded')).toMatchObject({ status: 'True', reason: 'CloudAuthFailed' });
    expect(condition(status, 'Degraded')!.message).toContain(
      "the cloud refuses the operator's credentials (files in /creds)",
    );
    expect(condition(status, 'Valid')).toMatchObject({ status: 'Unknown', reason: 'NotJudged' });
    expect(w.events).toEqual(['Warning CloudAuthFailed ENIPoolClass/default']);
    expect(w.classReconciler.verdict('default')!.state).toBe('unread');
    expect(w.enqueued).toEqual(['nodes']);
  });

  it('the cloud cannot be read after the class was judged valid: the verdict stands, Degraded says why, nodes are left alone', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1')] });
    await w.classReconciler.reconcile('default');
    w.classes.set('default', { ...cls('default'), status: w.statuses[0]!.status });
    w.enqueued.length = 0;
    w.cloud.fail = new CloudError(
      'DescribeVSwitches',
      'Transport.Connection',
      'connection failed: ECONNREFUSED',
      undefined,
    );
    expect(await w.classReconciler.reconcile('default')).toEqual({ backoff: true });
    expect(w.classReconciler.verdict('default')!.state).toBe('valid');
    expect(condition(w.statuses.at(-1)!.status, 'Valid')).toMatchObject({ status: 'True' });
    expect(condition(w.statuses.at(-1)!.status, 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'CloudUnreachable',
    });
    expect(w.enqueued).toEqual([]);
  });

  it('a fleet-wide outage shows on a class whose own reads come from the cache', async () => {
    const w = world({ classes: [cls('default')] });
    w.health.outage = { reason: 'CloudPermissionDenied', message: 'DescribeNetworkInterfaces: Forbidden.RAM: ...' };
    await w.classReconciler.reconcile('default');
    expect(condition(w.statuses[0]!.status, 'Degraded')).toMatchObject({ status: 'True', ...w.health.outage });
  });

  it('nodes the class governs in a zone none of its vSwitches is in: ZonesCovered False naming zone and nodes', async () => {
    const w = world({
      classes: [cls('default')],
      nodes: [node('n1', { zone: 'zone-a' }), node('n2', { zone: 'zone-b' }), node('n3', { zone: 'zone-b' })],
    });
    await w.classReconciler.reconcile('default');
    expect(condition(w.statuses[0]!.status, 'ZonesCovered')).toEqual({
      type: 'ZonesCovered',
      status: 'False',
      reason: 'NoVSwitchInZone',
      message:
        'nodes in zone zone-b (n2, n3) have no vSwitch of this class (its vSwitches cover zone-a): ' +
        'add a vSwitch of each of these zones to vSwitchIDs or vSwitchTags',
      lastTransitionTime: '2026-03-01T12:00:00Z',
    });
    expect(w.events).toEqual(['Warning NoVSwitchInZone ENIPoolClass/default']);
  });

  it('a deleted class: its verdict goes and every node is placed again; an unknown name does nothing', async () => {
    const w = world({ classes: [cls('default')] });
    await w.classReconciler.reconcile('default');
    w.classes.delete('default');
    w.enqueued.length = 0;
    expect(await w.classReconciler.reconcile('default')).toEqual({});
    expect(w.enqueued).toEqual(['nodes']);
    expect(w.classReconciler.verdict('default')).toBeUndefined();
    w.enqueued.length = 0;
    await w.classReconciler.reconcile('default');
    expect(w.enqueued).toEqual([]);
  });

  it('a deposed leader writes no status and says nothing', async () => {
    const w = world({ classes: [cls('broken', { vSwitchIDs: ['vsw-nope'], vSwitchTags: undefined })] });
    w.lease.fresh = false;
    await w.classReconciler.reconcile('broken');
    expect(w.writes).toEqual([]);
    expect(w.events).toEqual([]);
  });
});

describe('one reconcile of a node (its placement)', () => {
  it('no class selects the node: an Event on the Node once, a count, no pool', async () => {
    const w = world({ classes: [cls('gpu', { nodeSelector: { matchLabels: { gpu: 'true' } } })], nodes: [node('n1')] });
    await w.placement.reconcile('n1');
    await w.placement.reconcile('n1');
    expect(w.writes).toEqual([]);
    expect(w.events).toEqual(['Warning NoENIPoolClass Node/n1']);
    expect(await w.unserved('NoClass')).toBe(1);
  });

  it('its class is not judged yet: nothing (the class’s reconcile places every node once it has)', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1')] });
    await w.placement.reconcile('n1');
    expect(w.writes).toEqual([]);
    expect(w.events).toEqual([]);
    expect(w.enqueued).toEqual(['class/default']);
  });

  it('a valid class: the pool is created with the node’s instance and the class’s policy; once', async () => {
    const w = world({ classes: [cls('default', { preAllocate: 5 })], nodes: [node('n1')] });
    w.verdicts.set('default', valid());
    await w.placement.reconcile('n1');
    expect(w.writes).toEqual(['createPool n1']);
    expect(w.created[0]!.spec).toEqual({
      nodeName: 'n1',
      instanceID: 'i-n1',
      instanceType: 'ecs.g7.large',
      zoneID: 'zone-a',
      vpcID: VPC,
      className: 'default',
      vSwitchTags: { role: 'pods' },
      securityGroupIDs: ['sg-1'],
      preAllocate: 5,
    });
    expect(w.created[0]!.metadata.labels).toEqual({ 'eniipam.io/class': 'default' });
    w.pools.set('n1', w.created[0]!);
    w.writes.length = 0;
    await w.placement.reconcile('n1');
    expect(w.writes).toEqual([]);
  });

  it('the class dropped a field and changed another: the pool follows (a merge patch, null drops)', async () => {
    const w = world({
      classes: [cls('default', { preAllocate: 9 })],
      nodes: [node('n1')],
      pools: [pool('n1', { minAllocate: 12 })],
    });
    w.verdicts.set('default', valid());
    await w.placement.reconcile('n1');
    expect(w.writes).toEqual(['patchPool n1']);
    expect(w.patches[0]!.patch.spec).toMatchObject({ preAllocate: 9, minAllocate: null });
  });

  it('its class is invalid: an Event on the Node, its pool left as it is and flagged with why', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1')], pools: [pool('n1')] });
    w.verdicts.set('default', {
      generation: 1,
      state: 'invalid',
      reason: 'VSwitchNotFound',
      message: 'vSwitch vsw-x does not exist',
      zones: [],
    });
    await w.placement.reconcile('n1');
    expect(w.events).toEqual(['Warning ClassInvalid Node/n1']);
    expect(w.patches).toEqual([
      {
        name: 'n1',
        patch: { metadata: { annotations: { [MISMATCH_ANNOTATION]: 'class default is not valid (VSwitchNotFound)' } } },
      },
    ]);
    expect(await w.unserved('ClassInvalid')).toBe(1);
  });

  it('its class could not be judged (the cloud is unreadable): the pool is made all the same; it waits for the cloud', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1')] });
    w.verdicts.set('default', { generation: 1, state: 'unread', message: '', zones: [] });
    await w.placement.reconcile('n1');
    expect(w.writes).toEqual(['createPool n1']);
    expect(w.events).toEqual([]);
  });

  it('its class has no vSwitch in the node’s zone: the pool is made (it says why it gets nothing), the Node is told', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1', { zone: 'zone-b' })] });
    w.verdicts.set('default', valid(['zone-a']));
    await w.placement.reconcile('n1');
    expect(w.writes).toEqual(['createPool n1']);
    expect(w.events).toEqual(['Warning ZoneNotCovered Node/n1']);
    expect(await w.unserved('ZoneNotCovered')).toBe(1);
  });

  it('a pool the user overrides, or one being deleted, is never written', async () => {
    const w = world({
      classes: [cls('default', { preAllocate: 9 })],
      nodes: [node('n1'), node('n2')],
      pools: [
        pool('n1', {}, { annotations: { [OVERRIDE_ANNOTATION]: 'true' } }),
        pool('n2', {}, { deletionTimestamp: '2026-03-01T11:59:00Z' }),
      ],
    });
    w.verdicts.set('default', valid());
    await w.placement.reconcile('n1');
    await w.placement.reconcile('n2');
    expect(w.writes).toEqual([]);
  });

  it('a node without providerID: its instance is found by its address, once while the answer is fresh', async () => {
    const w = world({ classes: [cls('default')], nodes: [node('n1', { instance: '', ip: '192.168.0.7' })] });
    w.verdicts.set('default', valid());
    await w.placement.reconcile('n1');
    await w.placement.reconcile('n1');
    expect(w.instances.calls).toEqual(['DescribeInstances 192.168.0.7']);
    expect(w.created[0]!.spec.instanceID).toBe('i-found');
  });

  it('a node that moves to another class, or goes, has both classes counted again', async () => {
    const w = world({
      classes: [cls('base'), cls('big', { priority: 10, nodeSelector: { matchLabels: { tier: 'big' } } })],
      nodes: [node('n1')],
    });
    w.verdicts.set('base', valid());
    w.verdicts.set('big', valid());
    await w.placement.reconcile('n1');
    expect(w.enqueued).toEqual(['class/base']);
    w.nodes.set('n1', node('n1', { labels: { tier: 'big' } }));
    await w.placement.reconcile('n1');
    expect(w.enqueued).toEqual(['class/base', 'class/base', 'class/big']);
    w.nodes.delete('n1');
    await w.placement.reconcile('n1');
    expect(w.enqueued.at(-1)).toBe('class/big');
  });
});
