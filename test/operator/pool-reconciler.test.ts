/**
 * One reconcile of one pool over in-memory fakes: each case builds a fixture, calls
 * `reconcile(name)` once, and compares what was recorded (cloud calls, ENI work, Events, writes
 * to the API server, live reads, the requeue) with the expected lists exactly. No timers, no
 * servers: the clock is fixed and moves only when a case moves it.
 */
import { describe, expect, it } from '@jest/globals';
import type { ENIPoolStatus } from '../../src/api/types.js';
import { CloudError } from '../../src/cloud/index.js';
import { FINALIZER } from '../../src/operator/config.js';
import { recordFailure } from '../../src/operator/failures.js';
import type { ReconcileResult } from '../../src/operator/pool/reconciler.js';
import {
  INSTANCE,
  NODE,
  NOW,
  TYPE,
  VPC,
  apiError,
  conditionIn,
  conditionsOf,
  eni,
  fixture,
  instance,
  ipsOf,
  pod,
  pool,
  vSwitch,
  type Call,
  type Fixture,
  type FixtureOptions,
  type StoreWrite,
} from './fakes.js';

/** The name (requested-at time) of a request the pool already carries, and of an older one. */
const S = '2026-03-01T11:50:00.000Z';
const S_OLD = '2026-03-01T11:40:00.000Z';
/** A request made by the reconcile under test: stamped now (to the millisecond, never twice the same). */
const NEW_STAMP = expect.stringMatching(/^2026-03-01T12:00:00\.\d{3}Z$/);
const DELETING = { deletionTimestamp: '2026-03-01T11:59:00Z' };

const used = (...ips: string[]): NonNullable<ENIPoolStatus['used']> =>
  Object.fromEntries(ips.map((ip, i) => [ip, { pod: `default/p${i}`, containerID: `c${i}` }]));
const requests = (stamp: string, ...ips: string[]): Record<string, string> =>
  Object.fromEntries(ips.map((ip) => [ip, stamp]));
const acks = (stamp: string, ...ips: string[]): NonNullable<ENIPoolStatus['releaseAcks']> =>
  Object.fromEntries(ips.map((ip) => [ip, { answer: 'ready' as const, requestedAt: stamp }]));
const removed = (...ips: string[]): Record<string, null> => Object.fromEntries(ips.map((ip) => [ip, null]));
const iso = (ms: number) => new Date(ms).toISOString();
/** The three conditions, as `Status/Reason`. */
const conds = (ready: string, exhausted = 'False/CapacityLeft', degraded = 'False/Healthy') => ({
  Degraded: degraded,
  Exhausted: exhausted,
  Ready: ready,
});
const summary = (enis: number, available: number, used: number, needed: number, releasing: number, batch = 0) => ({
  enis,
  available,
  used,
  needed,
  releasing,
  batch,
});
const forbidden = (action: string) => new CloudError(action, 'Forbidden.RAM', 'you are not authorized', 'req-0');
const ramHint = (action: string) =>
  `${action}: Forbidden.RAM: you are not authorized; grant the RAM action ecs:${action} to the operator's identity (see the README's RAM policy)`;

interface Expected {
  /** requeueAfterMs of the result (undefined: none). */
  requeue?: number;
  /** The result asks for the key's back-off (a write refused as stale). */
  backoff?: boolean;
  /** The reconcile throws an error whose message contains this. */
  throws?: string;
  /** The reconciler's own cloud calls (AssignPrivateIpAddresses, UnassignPrivateIpAddresses, DescribeInstances). */
  calls?: Array<[string, ...unknown[]]>;
  /** Background ENI work: create, attach, remove, deleteEni. */
  eniWork?: Array<[string, ...unknown[]]>;
  /** Events as `Type Reason`. */
  events?: string[];
  /** Writes to the API server: `setFinalizers [...]`, `patchStatus rv=<sent>`, `deletePool <name>`. */
  writes?: string[];
  /** Live reads of the API server: `readPool <name>`, `nodeExists <name>`. */
  reads?: string[];
  /** Key fields of the (last) status patch. */
  status?: {
    summary?: ReturnType<typeof summary>;
    /** The patch's releaseRequests (a merge patch: null takes a request back); undefined: not in the patch. */
    releaseRequests?: Record<string, unknown>;
    conditions?: ReturnType<typeof conds>;
    /** The published ENIs' ids. */
    enis?: string[];
  };
}

interface Case extends Expected {
  name: string;
  given?: FixtureOptions;
  before?: (f: Fixture) => void;
  check?: (f: Fixture, r: ReconcileResult | undefined) => void | Promise<void>;
}

const asTuple = (c: Call): [string, ...unknown[]] => [c.action, ...c.args];
const describeWrite = (w: StoreWrite): string =>
  w.action === 'setFinalizers'
    ? `setFinalizers ${JSON.stringify(w.finalizers)}`
    : w.action === 'patchStatus'
      ? `patchStatus rv=${w.resourceVersion}`
      : `deletePool ${w.name}`;
const lastPatch = (f: Fixture) => f.statusWrites().at(-1)?.patch;

/** Everything one reconcile did, as the expectations state it. */
function observed(f: Fixture) {
  return {
    calls: f.ecs.calls.map(asTuple),
    eniWork: f.enis.calls.map(asTuple),
    events: f.events.events.map((e) => `${e.type} ${e.reason}`),
    writes: f.store.writes.map(describeWrite),
    reads: f.store.reads,
  };
}

function expectStatus(f: Fixture, s: NonNullable<Expected['status']>): void {
  const patch = lastPatch(f);
  expect(patch).toBeDefined();
  if (s.summary) expect(patch!.summary).toEqual(s.summary);
  if ('releaseRequests' in s) expect(patch!.releaseRequests).toEqual(s.releaseRequests);
  if (s.conditions) {
    const got = Object.fromEntries(conditionsOf(patch).map((c) => c.split('=') as [string, string]));
    expect(got).toEqual(s.conditions);
  }
  if (s.enis) expect((patch!.enis as Array<{ id: string }>).map((e) => e.id)).toEqual(s.enis);
}

/** One reconcile, then every recorded list compared exactly (what a case does not name must not happen). */
async function runCase(c: Case): Promise<void> {
  const f = fixture(c.given);
  c.before?.(f);
  let result: ReconcileResult | undefined;
  if (c.throws) await expect(f.reconcile()).rejects.toThrow(c.throws);
  else result = await f.reconcile();
  expect(observed(f)).toEqual({
    calls: c.calls ?? [],
    eniWork: c.eniWork ?? [],
    events: c.events ?? [],
    writes: c.writes ?? [],
    reads: c.reads ?? [],
  });
  if (!c.throws) expect(result?.requeueAfterMs).toBe(c.requeue);
  if (!c.throws) expect(result?.backoff).toBe(c.backoff);
  if (c.status) expectStatus(f, c.status);
  await c.check?.(f, result);
}

const e1 = (ips: number, o?: Parameters<typeof eni>[2]) => eni(1, ips, o);
/** An ENI as the pool's status publishes it (what the agent sees). */
const publishedAs = (e: ReturnType<typeof eni>) => ({ id: e.id, state: 'InUse' as const, ips: ipsOf(e) });
const ip1 = (k: number) => `10.0.1.${k}`;

const allocation: Case[] = [
  {
    name: 'a fresh node (no ENI): one ENI created with all the IPs it needs; Ready False Allocating',
    eniWork: [['create', 'vsw-a', 8, ['sg-1']]],
    writes: ['patchStatus rv=7'],
    status: {
      summary: summary(0, 0, 0, 8, 0),
      releaseRequests: undefined,
      conditions: conds('False/Allocating'),
      enis: [],
    },
    check: (f) => {
      expect(conditionIn(lastPatch(f), 'Ready')!.message).toBe('8 more IPs are being allocated');
      expect(lastPatch(f)!.observedGeneration).toBe(1);
      expect(f.memory.of(NODE).deficitSince).toBe(NOW);
    },
  },
  {
    name: 'a partial ENI: what is missing is assigned to the roomy ENI, one call',
    given: { enis: [e1(5)] },
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Normal AssignedIPs'],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 8, 0, 0, 0), conditions: conds('True/PoolFilled'), enis: ['eni-1'] },
    check: (f) => {
      const published = (lastPatch(f)!.enis as Array<{ ips: string[] }>)[0]!.ips;
      expect(published).toEqual([...ipsOf(e1(5)), '10.9.1.1', '10.9.1.2', '10.9.1.3']);
      expect(f.cloud.get('eni-1')!.secondaryIps).toHaveLength(8);
      // The addresses taken are counted off the vSwitch until its next refresh.
      expect(f.cloud.knownVSwitches.find((v) => v.id === 'vsw-a')!.availableIpCount).toBe(97);
      expect(f.memory.of(NODE).deficitSince).toBeUndefined();
    },
  },
  {
    name: 'enough IPs: no call; Ready True PoolFilled',
    given: { enis: [e1(8)] },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 8, 0, 0, 0), conditions: conds('True/PoolFilled') },
    check: (f) => expect(conditionIn(lastPatch(f), 'Ready')!.message).toBe('8 of 8 IPs free'),
  },
  {
    name: 'the instance’s primary ENI and a foreign ENI are never filled or published',
    given: { enis: [eni(2, 3, { ours: false }), e1(5)] },
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Normal AssignedIPs'],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 8, 0, 0, 0), enis: ['eni-1'] },
  },
  {
    name: 'vSwitch exhausted: no candidate has free addresses; Exhausted True VSwitchExhausted, no call',
    given: { vSwitches: [vSwitch('vsw-a', 0)] },
    writes: ['patchStatus rv=7'],
    status: {
      summary: summary(0, 0, 0, 8, 0),
      conditions: conds('False/VSwitchExhausted', 'True/VSwitchExhausted'),
    },
    check: (f) =>
      expect(conditionIn(lastPatch(f), 'Exhausted')!.message).toBe(
        'no vSwitch of the class in zone-a has free addresses (vsw-a: 0)',
      ),
  },
  {
    name: 'a vSwitch refusing with IpNotEnough during an assign: blocked, said in an Event, enqueued again soon, nothing published',
    given: { enis: [e1(5)] },
    before: (f) => f.ecs.fail('AssignPrivateIpAddresses', 'InvalidVSwitchId.IpNotEnough'),
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Warning VSwitchExhausted'],
    requeue: undefined, // the failure's handler enqueued the pool itself (below)
    check: (f) => {
      expect(f.cloud.blocked.has('vsw-a')).toBe(true);
      expect(f.enqueued).toEqual([[NODE, 100]]);
      // Not a failure of the node: nothing is held back.
      expect(f.memory.of(NODE).failures.size).toBe(0);
    },
  },
  {
    name: 'instance limit: every ENI slot taken (one by a foreign ENI); Exhausted True InstanceLimit, no call',
    given: {
      enis: [e1(10), eni(2, 10, { ours: false })],
      status: { used: used(ip1(1), ip1(2), ip1(3), ip1(4), ip1(5)) },
    },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 10, 5, 3, 0), conditions: conds('False/InstanceLimit', 'True/InstanceLimit') },
    check: (f) =>
      expect(conditionIn(lastPatch(f), 'Exhausted')!.message).toBe(
        `instance ${INSTANCE} (${TYPE}) holds no more ENIs or IPs (3 ENIs × 11 IPs)`,
      ),
  },
  {
    name: 'instance full (both secondary ENIs full): Ready True AtCapacity, Exhausted True InstanceLimit, no call',
    given: { enis: [e1(10), eni(2, 10)], status: { used: used(...ipsOf(e1(10)), ...ipsOf(eni(2, 5))) } },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(2, 20, 15, 0, 0), conditions: conds('True/AtCapacity', 'True/InstanceLimit') },
    check: (f) =>
      expect(conditionIn(lastPatch(f), 'Exhausted')!.message).toBe(
        `instance ${INSTANCE} (${TYPE}) holds at most 20 pod IPs (2 secondary ENIs × 10 secondary IPs); the pool wants more`,
      ),
  },
  {
    name: 'beyond maxAllocate: the pool stops at the ceiling its class set; no call',
    given: {
      spec: { maxAllocate: 10 },
      enis: [e1(10)],
      status: { used: used(ip1(1), ip1(2), ip1(3), ip1(4), ip1(5)) },
    },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 10, 5, 0, 0), conditions: conds('True/AtCapacity', 'True/InstanceLimit') },
    check: (f) =>
      expect(conditionIn(lastPatch(f), 'Exhausted')!.message).toBe('the pool is at its maxAllocate of 10 IPs'),
  },
  {
    name: 'cooling IPs count as used (an ended cool-down does not); the pool looks again when the last one ends',
    given: {
      enis: [e1(5)],
      status: { cooling: { [ip1(3)]: iso(NOW - 1000), [ip1(4)]: iso(NOW + 30_000), [ip1(5)]: iso(NOW + 20_000) } },
    },
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 5 }]],
    events: ['Normal AssignedIPs'],
    writes: ['patchStatus rv=7'],
    requeue: 30_050,
    status: { summary: summary(1, 10, 0, 0, 0), conditions: conds('True/PoolFilled') },
    check: (f) => expect(conditionIn(lastPatch(f), 'Ready')!.message).toBe('8 of 10 IPs free'),
  },
  {
    name: 'pods waiting for an IP on the node raise the need',
    given: { enis: [e1(5)], pods: [pod('web-1'), pod('web-2')] },
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 5 }]],
    events: ['Normal AssignedIPs'],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 10, 0, 0, 0), conditions: conds('True/PoolFilled') },
  },
  {
    name: 'host-network pods, pods with an IP and pods of other nodes are not waiting for one',
    given: {
      enis: [e1(5)],
      pods: [
        pod('host', { hostNetwork: true }),
        pod('has-ip', { podIP: '10.0.1.3' }),
        pod('other', { node: 'node-b' }),
      ],
    },
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Normal AssignedIPs'],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 8, 0, 0, 0) },
  },
  {
    name: 'a user-overridden pool: its own preAllocate and vSwitchIDs are honoured over the roomier vSwitch',
    given: {
      spec: { preAllocate: 12, vSwitchIDs: ['vsw-b'] },
      vSwitches: [vSwitch('vsw-a', 200), vSwitch('vsw-b', 40)],
    },
    eniWork: [
      ['create', 'vsw-b', 10, ['sg-1']],
      ['create', 'vsw-b', 2, ['sg-1']],
    ],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(0, 0, 0, 12, 0), conditions: conds('False/Allocating') },
  },
  {
    name: 'security groups by tag: a created ENI joins every group tagged in the VPC',
    given: {
      spec: { securityGroupIDs: undefined, securityGroupTags: { tier: 'pods' } },
      securityGroups: [
        { id: 'sg-t1', vpcId: VPC, name: 't1', tags: { tier: 'pods' } },
        { id: 'sg-t2', vpcId: VPC, name: 't2', tags: { tier: 'pods' } },
        { id: 'sg-other', vpcId: VPC, name: 'o', tags: { tier: 'web' } },
      ],
    },
    eniWork: [['create', 'vsw-a', 8, ['sg-t1', 'sg-t2']]],
    writes: ['patchStatus rv=7'],
    status: { conditions: conds('False/Allocating') },
  },
  {
    name: 'TooManySecurityGroups: six groups match the tags; nothing created, Ready False, an Event',
    given: {
      spec: { securityGroupIDs: undefined, securityGroupTags: { tier: 'many' } },
      securityGroups: [
        ...Array.from({ length: 6 }, (_, i) => ({ id: `sg-m${i}`, vpcId: VPC, name: `m${i}`, tags: { tier: 'many' } })),
        { id: 'sg-elsewhere', vpcId: 'vpc-2', name: 'x', tags: { tier: 'many' } },
      ],
    },
    events: ['Warning TooManySecurityGroups'],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(0, 0, 0, 8, 0), conditions: conds('False/TooManySecurityGroups') },
    check: (f) =>
      expect(f.events.events[0]!.message).toBe(
        '6 security groups match the pool (sg-m0, sg-m1, sg-m2, sg-m3, sg-m4, sg-m5); an ENI joins at most 5',
      ),
  },
  {
    name: 'an unknown instance type: Ready False UnknownInstanceType, an Event, looked at again in a minute',
    given: { spec: { instanceType: 'ecs.unheard-of' } },
    events: ['Warning UnknownInstanceType'],
    writes: ['patchStatus rv=7'],
    requeue: 60_000,
    status: { summary: summary(0, 0, 0, 0, 0), conditions: conds('False/UnknownInstanceType') },
    check: (f) =>
      expect(f.describe.calls.filter((c) => c.action === 'DescribeInstanceTypes')).toEqual([
        { action: 'DescribeInstanceTypes', args: [['ecs.unheard-of']] },
      ]),
  },
  {
    name: 'a pool naming no instance: Ready False NoInstance, nothing else',
    given: { spec: { instanceID: undefined }, enis: [e1(5)] },
    writes: ['patchStatus rv=7'],
    // The need is the class's (the type is known); nothing can be done about it without an instance.
    status: { summary: summary(0, 0, 0, 8, 0), conditions: conds('False/NoInstance'), enis: [] },
  },
  {
    name: 'a pool without the finalizer gets it first; the status is planned on the pool as written (no 409)',
    given: { metadata: { finalizers: ['someone/else'] }, enis: [e1(8)] },
    writes: [`setFinalizers ${JSON.stringify(['someone/else', FINALIZER])}`, 'patchStatus rv=8'],
    requeue: undefined,
  },
];

const halfDone: Case[] = [
  {
    name: 'half-done ENIs adopted: an Available unattached one is attached, one Attaching on this instance waited for; none created',
    given: {
      enis: [
        eni(8, 5, { status: 'Available', instanceId: undefined }),
        eni(9, 5, { status: 'Attaching' }),
        eni(7, 5, { status: 'Attaching', instanceId: 'i-other' }),
      ],
    },
    eniWork: [
      ['attach', 'eni-8', { alreadyAttaching: false }],
      ['attach', 'eni-9', { alreadyAttaching: true }],
    ],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(2, 0, 0, 8, 0), conditions: conds('False/Allocating'), enis: ['eni-8', 'eni-9'] },
  },
  {
    name: 'an ENI the lifecycle is attaching already is not adopted again, and its IPs count as coming',
    given: {
      enis: [eni(8, 8, { status: 'Available', instanceId: undefined })],
      inFlight: (l) => void l.beginAttach(NODE, 'eni-8', 8),
    },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 0, 0, 8, 0), conditions: conds('False/Allocating') },
  },
  {
    name: 'attaches held back (a failed AttachNetworkInterface): no adoption, no new ENI to pile up unattached',
    given: {
      enis: [eni(8, 5, { status: 'Available', instanceId: undefined })],
      memory: (m) => void recordFailure(m, forbidden('AttachNetworkInterface'), NOW),
    },
    writes: ['patchStatus rv=7'],
    requeue: 5050,
    status: { conditions: conds('False/Allocating', 'False/CapacityLeft', 'True/CloudCallRefused') },
  },
];

const release: Case[] = [
  {
    name: 'excess before the delay: nothing requested; looked at again when the delay ends',
    given: { spec: { preAllocate: 4 }, enis: [e1(10)] },
    writes: ['patchStatus rv=7'],
    requeue: 180_050,
    status: { summary: summary(1, 10, 0, 0, 0), releaseRequests: undefined },
    check: (f) => expect(f.memory.of(NODE).excessSince).toBe(NOW),
  },
  {
    name: 'excess after the delay: the excess requested under one stamp, never an IP in use',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { used: used(ip1(2)) },
      memory: (m) => (m.excessSince = NOW - 180_000),
    },
    writes: ['patchStatus rv=7'],
    status: {
      summary: summary(1, 10, 1, 0, 5),
      releaseRequests: Object.fromEntries([3, 4, 5, 6, 7].map((k) => [ip1(k), NEW_STAMP])),
    },
    check: (f) => expect(new Set(Object.values(lastPatch(f)!.releaseRequests as object)).size).toBe(1),
  },
  {
    name: 'a cooling IP is never requested',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { cooling: { [ip1(2)]: iso(NOW + 60_000) } },
      memory: (m) => (m.excessSince = NOW - 180_000),
    },
    writes: ['patchStatus rv=7'],
    requeue: 60_050,
    status: { releaseRequests: Object.fromEntries([3, 4, 5, 6, 7].map((k) => [ip1(k), NEW_STAMP])) },
  },
  {
    name: 'an acked release: the pool read afresh, exactly the IPs confirmed there unassigned, their requests removed',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { releaseRequests: requests(S, ip1(2), ip1(3), ip1(4)), releaseAcks: acks(S, ip1(2), ip1(3)) },
      // The API server knows more than the cache: the agent handed 10.0.1.3 to a pod since.
      live: (p) => ({
        ...p,
        metadata: { ...p.metadata, resourceVersion: '9' },
        status: { ...p.status, used: used(ip1(3)) },
      }),
    },
    reads: [`readPool ${NODE}`],
    calls: [['UnassignPrivateIpAddresses', 'eni-1', [ip1(2)]]],
    events: ['Normal ReleasedIPs'],
    writes: ['patchStatus rv=9'],
    requeue: 180_050,
    status: { summary: summary(1, 9, 1, 0, 1), releaseRequests: removed(ip1(2), ip1(3)) },
    check: (f) => {
      expect(f.events.events[0]!.message).toBe(`unassigned 1 excess IPs from eni-1 (${ip1(2)})`);
      expect(f.cloud.get('eni-1')!.secondaryIps).not.toContain(ip1(2));
    },
  },
  {
    name: 'an acked release the cloud already carried out (InvalidIp.IpUnassigned) counts as done',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { releaseRequests: requests(S, ip1(2)), releaseAcks: acks(S, ip1(2)) },
    },
    before: (f) => f.ecs.fail('UnassignPrivateIpAddresses', 'InvalidIp.IpUnassigned'),
    reads: [`readPool ${NODE}`],
    calls: [['UnassignPrivateIpAddresses', 'eni-1', [ip1(2)]]],
    events: ['Normal ReleasedIPs'],
    writes: ['patchStatus rv=7'],
    requeue: 180_050,
    status: { summary: summary(1, 9, 0, 0, 0), releaseRequests: removed(ip1(2)) },
  },
  {
    name: 'confirmed IPs are unassigned 50 per call',
    given: {
      instanceTypes: [{ id: TYPE, eniQuantity: 3, ipv4PerEni: 60, ipv6PerEni: 0 }],
      spec: { preAllocate: 0 },
      enis: [e1(60)],
      status: {
        releaseRequests: requests(S, ...ipsOf(e1(56)).slice(1)),
        releaseAcks: acks(S, ...ipsOf(e1(56)).slice(1)),
      },
    },
    reads: [`readPool ${NODE}`],
    calls: [
      ['UnassignPrivateIpAddresses', 'eni-1', ipsOf(e1(51)).slice(1)],
      ['UnassignPrivateIpAddresses', 'eni-1', ipsOf(e1(56)).slice(51)],
    ],
    events: ['Normal ReleasedIPs', 'Normal ReleasedIPs'],
    writes: ['patchStatus rv=7'],
    requeue: 180_050,
    status: { summary: summary(1, 5, 0, 0, 0) },
  },
  {
    name: 'a stale ack (it answers an older request for the IP): nothing read, nothing released',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { releaseRequests: requests(S, ip1(2)), releaseAcks: acks(S_OLD, ip1(2)) },
    },
    writes: ['patchStatus rv=7'],
    requeue: 180_050,
    status: { summary: summary(1, 10, 0, 0, 1), releaseRequests: undefined },
  },
  {
    name: 'an ack for an IP in use: the request withdrawn, the IP never unassigned',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { used: used(ip1(2)), releaseRequests: requests(S, ip1(2)), releaseAcks: acks(S, ip1(2)) },
    },
    writes: ['patchStatus rv=7'],
    requeue: 180_050,
    status: { summary: summary(1, 10, 1, 0, 0), releaseRequests: removed(ip1(2)) },
  },
  {
    name: 'deleteEmptyENIs: an ENI whose every address was confirmed is removed whole, none of its IPs unassigned',
    given: {
      spec: { preAllocate: 4, deleteEmptyENIs: true },
      enis: [e1(10), eni(2, 3)],
      status: {
        used: used(ip1(2)),
        releaseRequests: requests(S, ...ipsOf(eni(2, 3))),
        releaseAcks: acks(S, ...ipsOf(eni(2, 3))),
      },
    },
    reads: [`readPool ${NODE}`],
    eniWork: [['remove', 'eni-2']],
    writes: ['patchStatus rv=7'],
    requeue: 180_050,
    status: {
      summary: summary(1, 10, 1, 0, 0),
      releaseRequests: removed(...ipsOf(eni(2, 3))),
      enis: ['eni-1'],
    },
  },
  {
    name: 'releaseExcessIPs false: outstanding requests cleared, nothing requested',
    given: {
      spec: { preAllocate: 4, releaseExcessIPs: false },
      enis: [e1(10)],
      status: { releaseRequests: requests(S, ip1(2)) },
      memory: (m) => (m.excessSince = NOW - 180_000),
    },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 10, 0, 0, 0), releaseRequests: removed(ip1(2)) },
  },
];

const modes: Case[] = [
  {
    name: 'read-only: no cloud call, no create, no adoption; the status is still published',
    given: { mode: 'read-only', enis: [eni(9, 5, { status: 'Available', instanceId: undefined })] },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 0, 0, 8, 0), conditions: conds('False/Allocating') },
  },
  {
    name: 'read-only: a confirmed release is neither read afresh nor carried out (its request is taken back)',
    given: {
      mode: 'read-only',
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { releaseRequests: requests(S, ip1(2)), releaseAcks: acks(S, ip1(2)) },
    },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 10, 0, 0, 0), releaseRequests: removed(ip1(2)) },
  },
  {
    name: 'no-release: allocates',
    given: { mode: 'no-release' },
    eniWork: [['create', 'vsw-a', 8, ['sg-1']]],
    writes: ['patchStatus rv=7'],
    status: { summary: summary(0, 0, 0, 8, 0) },
  },
  {
    // From e2e/operator-cases, which lowered preAllocate to 0 in no-release mode and slept to see nothing requested.
    name: 'no-release: never requests a release, however long the excess lasted',
    given: {
      mode: 'no-release',
      spec: { preAllocate: 0, releaseDelaySeconds: 0 },
      enis: [e1(6)],
      memory: (m) => (m.excessSince = NOW - 3_600_000),
    },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 6, 0, 0, 0), releaseRequests: undefined, conditions: conds('True/PoolFilled') },
  },
];

const failures: Case[] = [
  {
    name: 'a permanent cloud failure (Forbidden.RAM on assign): CloudCallFailed with the RAM hint, no status write, planned again soon',
    given: { enis: [e1(5)] },
    before: (f) => f.ecs.fail('AssignPrivateIpAddresses', 'Forbidden.RAM', { message: 'you are not authorized' }),
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Warning CloudCallFailed'],
    requeue: 100,
    check: (f) => {
      expect(f.events.events[0]!.message).toBe(ramHint('AssignPrivateIpAddresses'));
      expect(f.memory.of(NODE).failures.get('AssignPrivateIpAddresses')).toMatchObject({
        permanent: true,
        count: 1,
        until: NOW + 5000,
      });
    },
  },
  {
    name: 'assigns held back: the plan takes the other road (a new ENI), Degraded True',
    given: { enis: [e1(5)], memory: (m) => void recordFailure(m, forbidden('AssignPrivateIpAddresses'), NOW) },
    eniWork: [['create', 'vsw-a', 3, ['sg-1']]],
    writes: ['patchStatus rv=7'],
    requeue: 5050,
    status: { conditions: conds('False/Allocating', 'False/CapacityLeft', 'True/CloudCallRefused') },
  },
  {
    name: 'creates held back (CreateNetworkInterface refused by RAM): none planned, Degraded True with the hint, looked at again when the back-off ends',
    given: { memory: (m) => void recordFailure(m, forbidden('CreateNetworkInterface'), NOW - 2000) },
    writes: ['patchStatus rv=7'],
    requeue: 3050,
    status: {
      summary: summary(0, 0, 0, 8, 0),
      conditions: conds('False/Allocating', 'False/CapacityLeft', 'True/CloudCallRefused'),
    },
    check: (f) => {
      const degraded = conditionIn(lastPatch(f), 'Degraded')!.message!;
      expect(degraded).toBe(ramHint('CreateNetworkInterface'));
      expect(degraded).not.toMatch(/RequestId/);
    },
  },
  {
    name: 'a quota spent (found by the lifecycle): Exhausted True QuotaExceeded while creates are held back',
    before: (f) =>
      void f.failures.respond(
        pool(),
        new CloudError('CreateNetworkInterface', 'QuotaExceeded.Eni', 'ENI quota exceeded', 'req-1'),
      ),
    events: ['Warning QuotaExceeded'],
    writes: ['patchStatus rv=7'],
    requeue: 5050,
    status: { conditions: conds('False/QuotaExceeded', 'True/QuotaExceeded', 'True/CloudCallRefused') },
  },
  {
    name: 'a throttled assign: CloudCallFailed, held back for a second, not Degraded',
    given: { enis: [e1(5)] },
    before: (f) => f.ecs.fail('AssignPrivateIpAddresses', 'Throttling.User'),
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Warning CloudCallFailed'],
    requeue: 100,
    check: (f) =>
      expect(f.memory.of(NODE).failures.get('AssignPrivateIpAddresses')).toMatchObject({
        permanent: false,
        until: NOW + 1000,
      }),
  },
  {
    name: 'an assign whose answer was lost: the instance resynced from the cloud before the next plan',
    given: { enis: [e1(5)] },
    before: (f) => f.ecs.fail('AssignPrivateIpAddresses', 'Transport.Timeout', { outcomeUnknown: true }),
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Warning CloudCallFailed'],
    requeue: 100,
    check: (f) =>
      expect(f.describe.calls.filter((c) => c.action === 'DescribeNetworkInterfaces').map((c) => c.args)).toEqual([
        [{ instanceId: INSTANCE }],
        [{ vpcId: VPC, tags: { 'eni-ipam.io/cluster': 'c-test', 'eni-ipam.io/node': NODE } }],
      ]),
  },
  {
    name: 'an instance limit answered by the cloud: resynced, the type read again, the action held back',
    given: { enis: [e1(5)] },
    before: (f) => f.ecs.fail('AssignPrivateIpAddresses', 'MaxEniPrivateIpsCountExceeded'),
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    events: ['Warning InstanceLimit'],
    requeue: 100, // held back now: planned again soon to say so
    check: (f) => {
      expect(f.enqueued).toEqual([]);
      expect(f.describe.calls.map((c) => c.action)).toEqual([
        'DescribeVSwitches',
        'DescribeInstanceTypes',
        'DescribeNetworkInterfaces',
        'DescribeNetworkInterfaces',
        'DescribeInstanceTypes',
      ]);
      expect([...f.memory.of(NODE).failures.keys()]).toEqual(['AssignPrivateIpAddresses']);
    },
  },
  {
    // The client refuses every call once it is closed (a drain that timed out): as for a deposed
    // leader, nothing is the cloud's fault, so nothing is held back and no Warning is written.
    name: 'a call refused because the cloud client is closing (Transport.Closed): thrown, nothing held back, nothing said',
    given: { enis: [e1(5)] },
    before: (f) => f.ecs.fail('AssignPrivateIpAddresses', 'Transport.Closed'),
    throws: 'Transport.Closed',
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    check: (f) => expect(f.memory.of(NODE).failures.size).toBe(0),
  },
  {
    name: 'a call refused as not leading: thrown as it is, nothing held back, nothing said',
    given: { enis: [e1(5)] },
    before: (f) => f.ecs.fail('AssignPrivateIpAddresses', 'Client.NotLeading'),
    throws: 'Client.NotLeading',
    calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
    check: (f) => expect(f.memory.of(NODE).failures.size).toBe(0),
  },
];

const publishing: Case[] = [
  {
    name: 'a 409 on the status write (the pool changed since it was read): planned again after the key’s back-off',
    given: { enis: [e1(8)], live: (p) => ({ ...p, metadata: { ...p.metadata, resourceVersion: '8' } }) },
    writes: ['patchStatus rv=7'],
    backoff: true,
  },
  {
    name: 'any other failure of the status write is thrown (the queue backs off)',
    given: { enis: [e1(8)] },
    before: (f) => f.store.failNext('patchStatus', 500),
    writes: ['patchStatus rv=7'],
    throws: 'HTTP-Code: 500',
  },
  {
    name: 'the fresh read finds the pool gone (deleted since the cache saw it): nothing done',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { releaseRequests: requests(S, ip1(2)), releaseAcks: acks(S, ip1(2)) },
      live: () => undefined,
    },
    reads: [`readPool ${NODE}`],
  },
  {
    name: 'a stale lease (mayWrite false): nothing published',
    given: { enis: [e1(8)], mayWrite: false },
  },
  {
    name: 'an ENI the pool lists is gone from the cloud: ENIGone, and its IPs leave the pool',
    given: {
      enis: [e1(8)],
      status: { enis: [{ id: 'eni-7', state: 'InUse', ips: ['10.0.7.1', '10.0.7.2'] }] },
    },
    events: ['Warning ENIGone'],
    writes: ['patchStatus rv=7'],
    status: { enis: ['eni-1'] },
    check: (f) =>
      expect(f.events.events[0]!.message).toBe(
        `ENI eni-7 is no longer on ${INSTANCE} (found by a resync); its 2 IPs are withdrawn from the pool`,
      ),
  },
  {
    name: 'an ENI the operator removed itself leaves the pool without an Event, and is forgotten once the pool no longer lists it',
    given: {
      enis: [e1(8)],
      status: { enis: [{ id: 'eni-7', state: 'InUse', ips: ['10.0.7.1'] }] },
      inFlight: (l) => l.removed(l.beginRemove(NODE, 'eni-7')),
    },
    writes: ['patchStatus rv=7'],
    status: { enis: ['eni-1'] },
    check: async (f) => {
      // Forgotten once the pool as read no longer lists it (the next plan, on the written pool).
      expect(f.enis.ledger.records()).toHaveLength(1);
      f.sync();
      await f.reconcile();
      expect(f.enis.ledger.records()).toEqual([]);
      expect(f.events.events.filter((e) => e.reason === 'ENIGone')).toEqual([]);
    },
  },
];

const AUTH = {
  reason: 'CloudAuthFailed',
  message: 'DescribeNetworkInterfaces: SignatureDoesNotMatch: the signature does not match; check the AccessKey',
};
const unread = (outage?: typeof AUTH) => (f: Fixture) => {
  f.health.resynced = false;
  f.health.outage = outage;
};

const outage: Case[] = [
  {
    name: 'the cloud was never read (the first resync fails): Degraded says why, an Event once; nothing planned or called',
    given: { enis: [e1(2)] },
    before: unread(AUTH),
    events: ['Warning CloudAuthFailed'],
    writes: ['patchStatus rv=7'],
    check: (f) => {
      expect(lastPatch(f)).toEqual({
        conditions: [expect.objectContaining({ type: 'Degraded', status: 'True', ...AUTH })],
      });
      expect(f.describe.calls).toEqual([]);
    },
  },
  {
    name: 'the cloud was never read and no read has failed yet (the first resync is on its way): nothing at all',
    given: { enis: [e1(2)] },
    before: unread(),
  },
  {
    name: 'the same outage again: the pool says it already; no write, no Event',
    given: {
      enis: [e1(2)],
      status: {
        conditions: [{ type: 'Degraded', status: 'True', ...AUTH, lastTransitionTime: '2026-03-01T11:00:00Z' }],
      },
    },
    before: unread(AUTH),
  },
  {
    name: 'a pool being deleted while the cloud was never read: no teardown on an unread cloud (its ENIs are not known)',
    given: { enis: [e1(2)], metadata: { ...DELETING, finalizers: [FINALIZER] } },
    before: unread(AUTH),
    events: ['Warning CloudAuthFailed'],
    writes: ['patchStatus rv=7'],
  },
  {
    name: 'an outage after the cloud was read: the pool is planned on what it knows, and Degraded names the outage',
    given: { enis: [e1(8)] },
    before: (f) => (f.health.outage = AUTH),
    writes: ['patchStatus rv=7'],
    status: { conditions: conds('True/PoolFilled', 'False/CapacityLeft', 'True/CloudAuthFailed') },
  },
];

const ownership: Case[] = [
  {
    name: 'another pool names the same instance: Degraded DuplicateInstance and an Event; nothing released, even what the agent confirmed',
    given: {
      spec: { preAllocate: 4 },
      enis: [e1(10)],
      status: { releaseRequests: requests(S, ip1(2), ip1(3)), releaseAcks: acks(S, ip1(2), ip1(3)) },
      otherPools: [pool('node-b', { spec: { instanceID: INSTANCE } })],
      memory: (m) => (m.excessSince = NOW - 180_000),
    },
    reads: [`readPool ${NODE}`],
    events: ['Warning DuplicateInstance'],
    writes: ['patchStatus rv=7'],
    status: {
      conditions: conds('True/PoolFilled', 'False/CapacityLeft', 'True/DuplicateInstance'),
      // The outstanding requests are withdrawn, as in no-release mode.
      releaseRequests: removed(ip1(2), ip1(3)),
    },
    check: (f) =>
      expect(conditionIn(lastPatch(f), 'Degraded')!.message).toBe(
        `pools ${NODE} and node-b name the same instance ${INSTANCE} (a duplicated providerID, or a renamed node ` +
          'whose old Node stays): nothing is released from either until one is fixed or deleted; ' +
          'each counts only the ENIs made for it',
      ),
  },
  {
    name: 'the duplicate already said: no second Event',
    given: {
      enis: [e1(8)],
      status: {
        conditions: [
          { type: 'Degraded', status: 'True', reason: 'DuplicateInstance', message: 'x', lastTransitionTime: iso(NOW) },
        ],
      },
      otherPools: [pool('node-b', { spec: { instanceID: INSTANCE } })],
    },
    writes: ['patchStatus rv=7'],
  },
  {
    name: 'a pool being deleted that named the instance is no duplicate (it is the resolution)',
    given: {
      enis: [e1(8)],
      otherPools: [pool('node-b', { spec: { instanceID: INSTANCE }, metadata: DELETING })],
    },
    writes: ['patchStatus rv=7'],
    status: { conditions: conds('True/PoolFilled') },
  },
  {
    name: 'an ENI of this cluster on the instance made for another pool is neither counted, published nor released',
    given: {
      spec: { preAllocate: 4 },
      enis: [eni(2, 10, { node: 'node-b' }), e1(5)],
      memory: (m) => (m.excessSince = NOW - 180_000),
    },
    writes: ['patchStatus rv=7'],
    status: { summary: summary(1, 5, 0, 0, 1), enis: ['eni-1'] },
    check: (f) =>
      expect(Object.keys(lastPatch(f)!.releaseRequests as object).every((ip) => ip.startsWith('10.0.1.'))).toBe(true),
  },
];

const departure: Case[] = [
  {
    name: 'node gone from the cache but there on a live read: looked at again in a second, nothing deleted',
    given: { enis: [e1(8)], nodes: [], liveNodes: [NODE] },
    reads: [`nodeExists ${NODE}`],
    requeue: 1000,
  },
  {
    // An operator that may not read Nodes (an RBAC change) deletes nothing (from e2e/no-node-list).
    name: 'node gone from the cache and its live read refused (403): thrown, the pool kept',
    given: { enis: [e1(8)], nodes: [] },
    before: (f) =>
      f.store.failNext(
        'nodeExists',
        apiError(
          403,
          'Forbidden',
          `nodes "${NODE}" is forbidden: User "system:serviceaccount:default:operator" cannot get resource "nodes"`,
        ),
      ),
    reads: [`nodeExists ${NODE}`],
    // The API server's words, as apiErrorMessage renders them (not client-node's message with the body as escaped JSON).
    throws: `node ${NODE} is not in the cache and cannot be read (403 Forbidden: nodes "${NODE}" is forbidden: User "system:serviceaccount:default:operator" cannot get resource "nodes"); keeping its pool`,
  },
  {
    name: 'node gone and its instance gone: the pool deleted',
    given: { enis: [e1(8)], nodes: [], instances: [] },
    reads: [`nodeExists ${NODE}`],
    calls: [['DescribeInstances', { ids: [INSTANCE] }]],
    writes: [`deletePool ${NODE}`],
  },
  {
    name: 'node gone and its instance gone, but the lease is stale: nothing deleted',
    given: { enis: [e1(8)], nodes: [], instances: [], mayWrite: false },
    reads: [`nodeExists ${NODE}`],
    calls: [['DescribeInstances', { ids: [INSTANCE] }]],
  },
  {
    name: 'a pool without the finalizer on a stale lease: no write at all',
    given: { metadata: { finalizers: [] }, enis: [e1(8)], mayWrite: false },
  },
  {
    name: 'node gone while its instance runs: kept, Ready False NodeGone, an Event',
    given: { enis: [e1(8)], nodes: [] },
    reads: [`nodeExists ${NODE}`],
    calls: [['DescribeInstances', { ids: [INSTANCE] }]],
    events: ['Warning NodeGone'],
    writes: ['patchStatus rv=7'],
    requeue: 60_000,
    status: { summary: summary(1, 8, 0, 0, 0), conditions: conds('False/NodeGone'), enis: ['eni-1'] },
    check: (f) => {
      expect(f.events.events[0]!.message).toBe(
        `node ${NODE} is gone but instance ${INSTANCE} is Running; its ENIs are kept until the instance is released or 600 s have passed`,
      );
      expect(f.memory.of(NODE).goneSince).toBe(NOW);
    },
  },
  {
    name: 'node gone, still within the grace period: no second Event; looked at again when the grace ends',
    given: { enis: [e1(8)], nodes: [], nodeGoneGraceMs: 3000, memory: (m) => (m.goneSince = NOW - 1000) },
    reads: [`nodeExists ${NODE}`],
    calls: [['DescribeInstances', { ids: [INSTANCE] }]],
    writes: ['patchStatus rv=7'],
    requeue: 2050,
    status: { conditions: conds('False/NodeGone') },
  },
  {
    name: 'node gone while its instance runs, a 409 on the NotReady write: planned again after the key’s back-off',
    given: { enis: [e1(8)], nodes: [], live: (p) => ({ ...p, metadata: { ...p.metadata, resourceVersion: '8' } }) },
    reads: [`nodeExists ${NODE}`],
    calls: [['DescribeInstances', { ids: [INSTANCE] }]],
    events: ['Warning NodeGone'],
    writes: ['patchStatus rv=7'],
    backoff: true,
  },
  {
    name: 'node gone for the grace period while its instance runs: the pool deleted',
    given: { enis: [e1(8)], nodes: [], memory: (m) => (m.goneSince = NOW - 600_000) },
    reads: [`nodeExists ${NODE}`],
    calls: [['DescribeInstances', { ids: [INSTANCE] }]],
    writes: [`deletePool ${NODE}`],
  },
  {
    name: 'many nodes vanishing at once: held as suspect, nothing deleted, no grace period started',
    given: {
      enis: [e1(8)],
      otherPools: [pool('node-b'), pool('node-c'), pool('node-d')],
      nodes: ['node-d'],
      memory: (m) => (m.goneSince = NOW - 600_000),
    },
    reads: [`nodeExists ${NODE}`],
    calls: [['DescribeInstances', { ids: [INSTANCE] }]],
    writes: ['patchStatus rv=7'],
    requeue: 60_000,
    status: { conditions: conds('False/NodeGone') },
    check: (f) => {
      expect(conditionIn(lastPatch(f), 'Ready')!.message).toBe(
        '3 of 4 nodes vanished at once while their instances still exist; treating it as suspect and keeping every pool',
      );
      expect(f.memory.of(NODE).goneSince).toBeUndefined();
    },
  },
  {
    name: 'a node that is back ends its grace period',
    given: { enis: [e1(8)], memory: (m) => (m.goneSince = NOW - 1000) },
    writes: ['patchStatus rv=7'],
    check: (f) => expect(f.memory.of(NODE).goneSince).toBeUndefined(),
  },
  {
    name: 'pool being deleted while ENI creations are in flight: waits for them to land',
    given: { metadata: DELETING, enis: [e1(8)], inFlight: (l) => void l.beginCreate(NODE, 'token-1', 8) },
    requeue: 1000,
  },
  {
    name: 'pool being deleted without our finalizer: nothing to do',
    given: { metadata: { ...DELETING, finalizers: ['someone/else'] }, enis: [e1(8)] },
  },
  {
    name: 'pool being deleted in read-only mode: its ENIs kept and said so, the finalizer removed',
    given: { mode: 'read-only', metadata: { ...DELETING, finalizers: ['someone/else', FINALIZER] }, enis: [e1(8)] },
    events: ['Warning ENIsKept'],
    writes: [`setFinalizers ${JSON.stringify(['someone/else'])}`],
    check: (f) => expect(f.events.events[0]!.message).toBe(`pool ${NODE} is deleted; mode read-only keeps its 1 ENIs`),
  },
  {
    name: 'pool being deleted on a live node: release requested for every address first, nothing deleted',
    given: { metadata: DELETING, enis: [e1(3)], status: { enis: [publishedAs(e1(3))] } },
    reads: [`nodeExists ${NODE}`, `readPool ${NODE}`],
    events: ['Warning ENIsInUse'],
    writes: ['patchStatus rv=7'],
    requeue: 5000,
    check: (f) => {
      expect(lastPatch(f)).toEqual({ releaseRequests: Object.fromEntries(ipsOf(e1(3)).map((ip) => [ip, NEW_STAMP])) });
      expect(new Set(Object.values(lastPatch(f)!.releaseRequests as object)).size).toBe(1);
      // What the cloud holds for the node was read afresh, once.
      expect(f.describe.calls.filter((c) => c.action === 'DescribeNetworkInterfaces')).toHaveLength(2);
      expect(f.memory.of(NODE).resyncedForTeardown).toBe(true);
    },
  },
  {
    name: 'pool being deleted: what the cloud holds is read afresh, so an ENI the cache had not seen goes too',
    given: { metadata: DELETING, nodes: [], liveNodes: [], enis: [e1(3)], unseenEnis: [eni(5, 2)] },
    reads: [`nodeExists ${NODE}`],
    eniWork: [
      ['deleteEni', 'eni-1'],
      ['deleteEni', 'eni-5'],
    ],
    events: ['Normal ReleasedENIs'],
    writes: ['setFinalizers []'],
    check: (f) => {
      // Read afresh before, and read live again before the finalizer goes.
      expect(f.describe.calls.filter((c) => c.action === 'DescribeNetworkInterfaces')).toHaveLength(4);
      // Released, the finalizer gone: a later teardown of a pool of the same name reads afresh again.
      expect(f.memory.of(NODE).resyncedForTeardown).toBe(false);
    },
  },
  {
    name: 'pool being deleted, its ENIs deleted, a live read shows one more (the cache missed it): the finalizer stays; it goes next',
    given: {
      metadata: DELETING,
      nodes: [],
      liveNodes: [],
      enis: [e1(3)],
      unseenEnis: [eni(5, 2)],
      memory: (m) => (m.resyncedForTeardown = true),
    },
    reads: [`nodeExists ${NODE}`],
    eniWork: [['deleteEni', 'eni-1']],
    events: ['Normal ReleasedENIs'],
    requeue: 1000,
    check: (f) => expect(f.cloud.ownedBy(NODE).map((e) => e.id)).toEqual(['eni-5']),
  },
  {
    name: 'pool being deleted, the live read before the finalizer fails: the finalizer stays (the queue backs off)',
    given: {
      metadata: DELETING,
      nodes: [],
      liveNodes: [],
      enis: [e1(3)],
      memory: (m) => (m.resyncedForTeardown = true),
    },
    before: (f) => (f.describe.failAfterDeletes = new Error('DescribeNetworkInterfaces: Cloud.BadAnswer: no list')),
    reads: [`nodeExists ${NODE}`],
    eniWork: [['deleteEni', 'eni-1']],
    events: ['Normal ReleasedENIs'],
    throws: 'Cloud.BadAnswer',
  },
  {
    name: 'pool being deleted, its ENIs already read afresh for the teardown: not read again',
    given: {
      metadata: DELETING,
      enis: [e1(3)],
      unseenEnis: [eni(5, 2)],
      status: { enis: [publishedAs(e1(3))] },
      memory: (m) => (m.resyncedForTeardown = true),
    },
    reads: [`nodeExists ${NODE}`, `readPool ${NODE}`],
    events: ['Warning ENIsInUse'],
    writes: ['patchStatus rv=7'],
    requeue: 5000,
    check: (f) => {
      expect(f.describe.calls.filter((c) => c.action === 'DescribeNetworkInterfaces')).toEqual([]);
      expect(Object.keys(lastPatch(f)!.releaseRequests as object)).toEqual(ipsOf(e1(3)));
    },
  },
  {
    name: 'pool being deleted on a live node, an ENI the pool never published (it landed after the last status): deleted without asking the agent, who never saw it',
    given: { metadata: DELETING, enis: [e1(3), eni(2, 2)], status: { enis: [publishedAs(e1(3))] } },
    reads: [`nodeExists ${NODE}`, `readPool ${NODE}`],
    eniWork: [['deleteEni', 'eni-2']],
    events: ['Normal ReleasedENIs', 'Warning ENIsInUse'],
    writes: ['patchStatus rv=7'],
    requeue: 5000,
    // Only the published ENI's addresses are asked for.
    check: (f) => expect(Object.keys(lastPatch(f)!.releaseRequests as object)).toEqual(ipsOf(e1(3))),
  },
  {
    name: 'pool being deleted on a live node, an unpublished ENI whose address a pod holds all the same (a stray allocation): kept until the agent answers',
    given: {
      metadata: DELETING,
      enis: [e1(3), eni(2, 2)],
      status: { enis: [publishedAs(e1(3))], used: used('10.0.2.2') },
    },
    reads: [`nodeExists ${NODE}`, `readPool ${NODE}`],
    events: ['Warning ENIsInUse'],
    writes: ['patchStatus rv=7'],
    requeue: 5000,
  },
  {
    name: 'pool being deleted on a live node, every address of an ENI confirmed: that ENI deleted, the busy one kept',
    given: {
      metadata: DELETING,
      enis: [e1(3), eni(2, 2)],
      status: {
        enis: [publishedAs(e1(3)), publishedAs(eni(2, 2))],
        used: used('10.0.2.2'),
        releaseRequests: requests(S, ...ipsOf(e1(3)), ...ipsOf(eni(2, 2))),
        releaseAcks: acks(S, ...ipsOf(e1(3))),
      },
    },
    reads: [`nodeExists ${NODE}`, `readPool ${NODE}`],
    eniWork: [['deleteEni', 'eni-1']],
    events: ['Normal ReleasedENIs', 'Warning ENIsInUse'],
    requeue: 5000,
  },
  {
    name: 'pool being deleted on a live node, every address confirmed: its ENIs deleted, the finalizer removed',
    given: {
      metadata: DELETING,
      enis: [e1(3)],
      status: {
        enis: [publishedAs(e1(3))],
        releaseRequests: requests(S, ...ipsOf(e1(3))),
        releaseAcks: acks(S, ...ipsOf(e1(3))),
      },
    },
    reads: [`nodeExists ${NODE}`, `readPool ${NODE}`],
    eniWork: [['deleteEni', 'eni-1']],
    events: ['Normal ReleasedENIs'],
    writes: ['setFinalizers []'],
  },
  {
    name: 'pool being deleted, its node gone: every ENI deleted at once (attached or not), the finalizer removed',
    given: {
      metadata: DELETING,
      nodes: [],
      enis: [e1(3), eni(2, 4, { status: 'Available', instanceId: undefined })],
    },
    reads: [`nodeExists ${NODE}`],
    eniWork: [
      ['deleteEni', 'eni-1'],
      ['deleteEni', 'eni-2'],
    ],
    events: ['Normal ReleasedENIs'],
    writes: ['setFinalizers []'],
  },
  {
    name: 'pool missing from the cache: its node’s memory forgotten, nothing else',
    given: {
      cached: false,
      memory: (m) => {
        m.goneSince = NOW - 1000;
        recordFailure(m, forbidden('AssignPrivateIpAddresses'), NOW);
      },
    },
    check: (f) =>
      expect(f.memory.forPlanning(NODE)).toEqual({
        deficitSince: undefined,
        excessSince: undefined,
        shortfall: undefined,
        failures: [],
      }),
  },
];

describe('one reconcile of a pool', () => {
  describe.each([
    ['allocation', allocation],
    ['half-done ENIs', halfDone],
    ['release', release],
    ['modes', modes],
    ['cloud failures', failures],
    ['publishing', publishing],
    ['node departure', departure],
    ['cloud outage', outage],
    ['ownership', ownership],
  ] as const)('%s', (_, cases) => {
    it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => runCase(c));
  });
});

describe('a pool over a few reconciles (the clock moved by hand)', () => {
  it('writes no status when the status already says so', async () => {
    const f = fixture({ enis: [e1(8)] });
    await f.reconcile();
    expect(f.statusWrites()).toHaveLength(1);
    f.sync();
    f.clearRecords();
    expect(await f.reconcile()).toEqual({ requeueAfterMs: undefined });
    expect(observed(f)).toEqual({ calls: [], eniWork: [], events: [], writes: [], reads: [] });
  });

  // From e2e/operator-cases ("stops at the instance limit ... wastes no calls"), which re-enqueued
  // the full pool and slept to see that nothing happened.
  it('at the instance limit, wants more than the instance holds and makes no call, now or on the next reconcile', async () => {
    const f = fixture({ spec: { preAllocate: 30 }, enis: [e1(10), eni(2, 10)] });
    expect(await f.reconcile()).toEqual({ requeueAfterMs: undefined });
    expect(observed(f)).toEqual({ calls: [], eniWork: [], events: [], writes: ['patchStatus rv=7'], reads: [] });
    expect(conditionsOf(lastPatch(f))).toEqual([
      'Degraded=False/Healthy',
      'Exhausted=True/InstanceLimit',
      'Ready=True/AtCapacity',
    ]);
    expect(lastPatch(f)!.summary).toEqual(summary(2, 20, 0, 0, 0));
    f.sync();
    f.clearRecords();
    expect(await f.reconcile()).toEqual({ requeueAfterMs: undefined });
    expect(observed(f)).toEqual({ calls: [], eniWork: [], events: [], writes: [], reads: [] });
  });

  it('skips a vSwitch that refused with IpNotEnough on the next plan', async () => {
    const f = fixture({ enis: [e1(5)] });
    f.ecs.fail('AssignPrivateIpAddresses', 'InvalidVSwitchId.IpNotEnough');
    expect(await f.reconcile()).toEqual({ requeueAfterMs: undefined });
    expect(f.enqueued).toEqual([[NODE, 100]]);
    f.clearRecords();
    expect(await f.reconcile()).toEqual({ requeueAfterMs: undefined });
    expect(observed(f)).toEqual({ calls: [], eniWork: [], events: [], writes: ['patchStatus rv=7'], reads: [] });
    expect(conditionsOf(lastPatch(f))).toEqual([
      'Degraded=False/Healthy',
      'Exhausted=True/VSwitchExhausted',
      'Ready=False/VSwitchExhausted',
    ]);
    expect(conditionIn(lastPatch(f), 'Exhausted')!.message).toBe(
      'no vSwitch of the class in zone-a has free addresses (vsw-a: blocked)',
    );
  });

  it('backs a permanent failure off: no call during the back-off, Degraded with the hint, the back-off doubling', async () => {
    // Both slots taken (one by a foreign ENI): assigning is the only road.
    const f = fixture({ enis: [e1(5), eni(2, 10, { ours: false })] });
    f.ecs.fail('AssignPrivateIpAddresses', 'Forbidden.RAM', { times: 2, message: 'you are not authorized' });
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 100 });
    expect(observed(f)).toEqual({
      calls: [['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]],
      eniWork: [],
      events: ['Warning CloudCallFailed'],
      writes: [],
      reads: [],
    });

    // Planned again soon: no call, the pool Degraded; looked at again when the 5 s back-off ends.
    f.clearRecords();
    f.clock.now = NOW + 1000;
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 4050 });
    expect(observed(f)).toEqual({ calls: [], eniWork: [], events: [], writes: ['patchStatus rv=7'], reads: [] });
    expect(conditionIn(lastPatch(f), 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'CloudCallRefused',
      message: ramHint('AssignPrivateIpAddresses'),
    });

    // After the back-off one more attempt; refused again, it is held back twice as long.
    f.sync();
    f.clearRecords();
    f.clock.now = NOW + 5050;
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 100 });
    expect(observed(f).calls).toEqual([['AssignPrivateIpAddresses', 'eni-1', { count: 3 }]]);
    f.clearRecords();
    f.clock.now = NOW + 6050;
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 9050 });
    expect(observed(f).calls).toEqual([]);
  });

  /** Pods take both addresses of eni-1 and the agent reports them, 5 s on. */
  const agentReportsBothInUse = (f: ReturnType<typeof fixture>) => {
    f.sync();
    const live = f.store.live.get(NODE)!;
    live.status = { ...live.status, used: used(ip1(2), ip1(3)) };
    live.metadata.resourceVersion = '42';
    f.sync();
    f.clock.now = NOW + 5_000;
  };

  it('learns the node’s demand from the agent’s reports: the next assign carries a batch beyond the need, shown in the summary', async () => {
    const f = fixture({ spec: { preAllocate: 2, releaseDelaySeconds: 60 }, enis: [e1(2)] });
    // The first look counts nothing as taken (what is in use says nothing of the rate).
    await f.reconcile();
    expect(f.ecs.calls).toEqual([]);
    expect(lastPatch(f)!.summary).toEqual(summary(1, 2, 0, 0, 0, 0));
    agentReportsBothInUse(f);
    f.clearRecords();
    await f.reconcile();
    // Two taken in the last minute, for a minute's horizon: 2 needed and a batch of 2, in one call.
    expect(observed(f).calls).toEqual([['AssignPrivateIpAddresses', 'eni-1', { count: 4 }]]);
    expect(lastPatch(f)!.summary).toEqual(summary(1, 6, 2, 0, 0, 2));
    // The batch is not excess: nothing is asked back while the node grows into it.
    expect(lastPatch(f)!.releaseRequests).toBeUndefined();
  });

  it('keeps no batch a failed call was to carry: the release level is what was taken', async () => {
    const f = fixture({ spec: { preAllocate: 2, releaseDelaySeconds: 60 }, enis: [e1(2)] });
    await f.reconcile();
    agentReportsBothInUse(f);
    f.ecs.fail('AssignPrivateIpAddresses', 'InternalError');
    await f.reconcile();
    expect(f.ecs.calls.map((c) => c.action)).toEqual(['AssignPrivateIpAddresses']);
    expect(f.memory.of(NODE).demand?.carried).toBeUndefined();
  });

  it('runs the release handshake: requested when the delay ends, unassigned on the agent’s ready', async () => {
    const f = fixture({ spec: { preAllocate: 4, releaseDelaySeconds: 10 }, enis: [e1(6)] });
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 10_050 });
    f.sync();
    f.clock.now = NOW + 10_050;
    f.clearRecords();
    expect(await f.reconcile()).toEqual({ requeueAfterMs: undefined });
    const asked = lastPatch(f)!.releaseRequests as Record<string, string>;
    expect(Object.keys(asked)).toEqual([ip1(2), ip1(3)]);
    // The agent acks both, for the request it saw.
    f.sync();
    const live = f.store.live.get(NODE)!;
    live.status = { ...live.status, releaseAcks: acks(asked[ip1(2)]!, ip1(2), ip1(3)) };
    live.metadata.resourceVersion = '42';
    f.sync();
    f.clearRecords();
    expect(await f.reconcile()).toEqual({ requeueAfterMs: undefined });
    expect(observed(f)).toEqual({
      calls: [['UnassignPrivateIpAddresses', 'eni-1', [ip1(2), ip1(3)]]],
      eniWork: [],
      events: ['Normal ReleasedIPs'],
      writes: ['patchStatus rv=42'],
      reads: [`readPool ${NODE}`],
    });
    expect(lastPatch(f)!.releaseRequests).toEqual(removed(ip1(2), ip1(3)));
    expect((lastPatch(f)!.summary as { available: number }).available).toBe(4);
  });

  it('says NodeGone once, however often the pool is looked at during the grace period', async () => {
    const f = fixture({ enis: [e1(8)], nodes: [], instances: [instance()] });
    await f.reconcile();
    expect(observed(f).events).toEqual(['Warning NodeGone']);
    f.sync();
    f.clearRecords();
    f.clock.now = NOW + 60_000;
    expect(await f.reconcile()).toEqual({ requeueAfterMs: 60_000 });
    expect(observed(f)).toEqual({
      calls: [['DescribeInstances', { ids: [INSTANCE] }]],
      eniWork: [],
      events: [],
      writes: [],
      reads: [`nodeExists ${NODE}`],
    });
  });
});
