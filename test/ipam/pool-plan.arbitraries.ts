import fc from 'fast-check';
import { API_VERSION, type ENIPool, type ENIPoolStatus, type PoolENI } from '../../src/api/types.js';
import type { InstanceLimits } from '../../src/ipam/capacity.js';
import type { FailureRecord } from '../../src/ipam/failure-record.js';
import type { EniFact, PoolMemory, PoolObservation, PoolPlan } from '../../src/ipam/pool-plan.js';
import { PREFIX_SIZE, prefixAddresses } from '../../src/ipam/prefix.js';

/** Fixed names and times: every observation is of node-a on i-node, in zone-a of vpc-a, at NOW. */
export const NOW = Date.parse('2026-01-01T01:00:00.000Z');
export const iso = (ms: number) => new Date(ms).toISOString();
/** The names of earlier requests, and the name of requests made now (later than both). */
export const OLD_STAMP = iso(NOW - 90_000);
export const CUR_STAMP = iso(NOW - 30_000);
export const NEW_STAMP = iso(NOW);
export const NODE = 'node-a';
export const INSTANCE = 'i-node';
export const TYPE = 'ecs.test';
export const ZONE = 'zone-a';
export const VPC = 'vpc-a';
export const ACTIONS = [
  'AssignPrivateIpAddresses',
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'UnassignPrivateIpAddresses',
] as const;

export interface Case {
  o: PoolObservation;
  m: PoolMemory;
}

/** An ENI's pod addresses: its secondaries and its prefixes' addresses (its own primary is the node's). */
export const ipsOf = (e: { primaryIp: string; secondaryIps: string[]; ipv4Prefixes?: string[] }) => [
  ...e.secondaryIps,
  ...(e.ipv4Prefixes ?? []).flatMap(prefixAddresses),
];
/** What a release request of the ENI names: each secondary address, and each prefix whole. */
export const unitsOf = (e: { secondaryIps: string[]; ipv4Prefixes?: string[] }) => [
  ...e.secondaryIps,
  ...(e.ipv4Prefixes ?? []),
];
/** The ENI's IPv4 slots in use (an address or a prefix each). */
export const slotsOf = (e: { secondaryIps: string[]; ipv4Prefixes?: string[] }) => unitsOf(e).length;
export const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
export const podIps = (l: InstanceLimits) => (l.eniQuantity - 1) * (l.ipv4PerEni - 1);
export const owner = { pod: 'default/p', containerID: 'c' };

/** True with the given probability (in percent). */
const chance = (pct: number) => fc.integer({ min: 1, max: 100 }).map((n) => n <= pct);
const maybe = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });
/** A random map over a random subset of `keys`. */
const mapOf = <T>(keys: string[], value: fc.Arbitrary<T>): fc.Arbitrary<Record<string, T>> =>
  fc
    .subarray(keys)
    .chain((ks) =>
      fc
        .array(value, { minLength: ks.length, maxLength: ks.length })
        .map((vs) => Object.fromEntries(ks.map((k, i) => [k, vs[i]!]))),
    );

const eniShape = (perEni: number) =>
  fc.record({
    ours: chance(80),
    attachingInCloud: chance(12),
    secondaries: fc.nat(perEni - 1),
    // Its slots hold /28 prefixes instead (then it has no single secondary).
    prefixes: chance(25),
    vsw: fc.nat(4),
    attaching: chance(10),
    removing: chance(8),
  });
const parkedShape = (perEni: number) =>
  fc.record({ secondaries: fc.nat(perEni - 1), vsw: fc.nat(4), attaching: chance(30), removing: chance(10) });
const vSwitchShape = fc.record({
  zoneOk: chance(85),
  vpcOk: chance(90),
  free: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 4, arbitrary: fc.integer({ min: 1, max: 60 }) }),
  blocked: chance(10),
  tagged: chance(60),
  fragmented: chance(12),
});
const failuresArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant([] as FailureRecord[]) },
  {
    weight: 1,
    arbitrary: fc
      .uniqueArray(
        fc.record({
          action: fc.constantFrom(...ACTIONS),
          held: chance(70),
          permanent: fc.boolean(),
          count: fc.integer({ min: 1, max: 4 }),
          backoff: fc.integer({ min: 1000, max: 120_000 }),
        }),
        { selector: (r) => r.action, minLength: 1, maxLength: 4 },
      )
      .map((rs) =>
        rs.map((r): FailureRecord => ({
          action: r.action,
          code: 'Throttling',
          message: `${r.action} refused`,
          permanent: r.permanent,
          count: r.count,
          until: r.held ? NOW + r.backoff : NOW - r.backoff,
        })),
      ),
  },
);

/** Everything drawn before the IPs are known: the instance, its ENIs, the policy and the memory. */
const shapeArb = fc
  .record({ eniQuantity: fc.integer({ min: 2, max: 8 }), ipv4PerEni: fc.integer({ min: 2, max: 20 }) })
  .chain((limits) =>
    fc.record({
      limits: fc.constant(limits),
      vSwitches: fc.array(vSwitchShape, { minLength: 1, maxLength: 4 }),
      enis: fc.array(eniShape(limits.ipv4PerEni), { maxLength: limits.eniQuantity - 1 }),
      parked: fc.oneof(fc.constant([]), fc.array(parkedShape(limits.ipv4PerEni), { maxLength: 2 })),
      creating: fc.oneof(
        { weight: 3, arbitrary: fc.constant([]) },
        {
          weight: 1,
          arbitrary: fc.array(fc.integer({ min: 1, max: Math.min(limits.ipv4PerEni, 50) }), { maxLength: 2 }),
        },
      ),
      sizing: fc.record({
        minAllocate: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat(40) }),
        preAllocate: maybe(fc.nat(20)),
        maxAboveWatermark: maybe(fc.nat(10)),
        maxBatch: maybe(fc.nat(24)),
        maxAllocate: maybe(fc.nat(120)),
      }),
      policy: fc.record({
        vSwitchSelection: maybe(fc.constantFrom('MostFreeIPs' as const, 'Ordered' as const)),
        byTags: chance(40),
        sgByTags: chance(25),
        sgCount: fc.nat(6),
        releaseExcessIPs: fc.oneof(
          { weight: 4, arbitrary: fc.constant(undefined) },
          { weight: 2, arbitrary: fc.boolean() },
        ),
        releaseDelaySeconds: maybe(fc.constantFrom(0, 30, 180)),
        deleteEmptyENIs: maybe(fc.boolean()),
        prefixMode: chance(30),
        prefixFallback: maybe(fc.boolean()),
      }),
      mode: fc.constantFrom('normal', 'normal', 'normal', 'normal', 'no-release', 'read-only') as fc.Arbitrary<
        PoolObservation['mode']
      >,
      branch: fc.constantFrom(...Array<'plain'>(30).fill('plain'), 'noInstance', 'unknownType', 'unservable'),
      pendingPods: fc.oneof(fc.constant(0), fc.nat(12)),
      // Now and then another pool names the same instance (a duplicated providerID).
      sharingInstance: fc.oneof(
        { weight: 9, arbitrary: fc.constant([]) },
        { weight: 1, arbitrary: fc.constant(['node-dup']) },
      ),
      failures: failuresArb,
      // The instance's primary ENI, in the node's vSwitch (vsw-node unless drawn among the class's).
      primary: fc.record({
        present: chance(40),
        use: chance(60),
        secondaries: fc.nat(limits.ipv4PerEni - 1),
        vsw: fc.oneof(fc.constant(-1), fc.nat(4)),
      }),
      memory: fc.record({
        deficitSince: maybe(fc.nat(600_000).map((d) => NOW - d)),
        excessSince: maybe(fc.nat(400_000).map((d) => NOW - d)),
        shortfall: fc.oneof(
          { weight: 4, arbitrary: fc.constant(undefined) },
          { weight: 1, arbitrary: fc.constant({ reason: 'VSwitchExhausted' as const, message: 'earlier' }) },
        ),
        // The node’s growth lately (the growth batch), and a batch carried.
        demand: maybe(
          fc.record({
            samples: fc
              .array(fc.record({ at: fc.nat(400_000).map((d) => NOW - d), inUse: fc.nat(40) }), { maxLength: 12 })
              .map((xs) => xs.sort((a, b) => a.at - b.at)),
            inUse: fc.nat(40),
            carried: maybe(
              fc.record({ ips: fc.nat(24), until: fc.integer({ min: -60_000, max: 300_000 }).map((d) => NOW + d) }),
            ),
          }),
        ),
      }),
    }),
  );

/**
 * A valid observation of one pool (with the memory planned with it), kept as observe() builds
 * them: IPs unique across ENIs; the instance's secondary ENIs, our parked ones and those being
 * created within its ENI slots; our ENIs on the instance are also among the owned ones; the ENIs
 * we attach (flagged attaching) are counted in flight with their IPs; IPs in use or cooling are
 * on our attached ENIs; ENIs being removed are among those removed by us. Requests name earlier
 * stamps, acks match them or not; the stamp of new requests is later than both.
 */
export const caseArb: fc.Arbitrary<Case> = shapeArb.chain((s) => {
  const { limits } = s;
  const slots = limits.eniQuantity - 1;
  const vswIds = s.vSwitches.map((_, i) => `vsw-${i}`);
  const vsw = (n: number) => vswIds[n] ?? 'vsw-elsewhere';
  const instanceEnis = s.enis.map((e, i): EniFact => {
    const removing = e.ours && e.removing;
    return {
      id: `eni-${i}`,
      status: e.attachingInCloud ? 'Attaching' : 'InUse',
      instanceId: INSTANCE,
      vSwitchId: vsw(e.vsw),
      primaryIp: `10.1.${i}.1`,
      secondaryIps: e.prefixes ? [] : Array.from({ length: e.secondaries }, (_, k) => `10.1.${i}.${k + 2}`),
      ...(e.prefixes
        ? { ipv4Prefixes: Array.from({ length: e.secondaries }, (_, k) => `10.${100 + i}.${k}.${PREFIX_SIZE}/28`) }
        : {}),
      ours: e.ours,
      removing,
      attaching: e.ours && !removing && e.attaching,
    };
  });
  const parked = s.parked.slice(0, Math.max(0, slots - instanceEnis.length)).map((e, j): EniFact => ({
    id: `eni-p${j}`,
    status: 'Available',
    vSwitchId: vsw(e.vsw),
    primaryIp: `10.2.${j}.1`,
    secondaryIps: Array.from({ length: e.secondaries }, (_, k) => `10.2.${j}.${k + 2}`),
    ours: true,
    removing: e.removing,
    attaching: !e.removing && e.attaching,
  }));
  const creating = s.creating.slice(0, Math.max(0, slots - instanceEnis.length - parked.length));
  const ownedEnis = [...instanceEnis.filter((e) => e.ours), ...parked];
  const primaryEni: EniFact | undefined = s.primary.present
    ? {
        id: 'eni-primary',
        status: 'InUse',
        instanceId: INSTANCE,
        vSwitchId: s.primary.vsw < 0 ? 'vsw-node' : vsw(s.primary.vsw),
        primaryIp: '10.3.0.1',
        secondaryIps: Array.from({ length: s.primary.secondaries }, (_, k) => `10.3.0.${k + 2}`),
        ours: false,
        removing: false,
        attaching: false,
        primary: true,
      }
    : undefined;
  const flagged = ownedEnis.filter((e) => e.attaching);
  // IPs the agent may hold: those on our attached ENIs that are not being removed.
  const servable = [
    ...instanceEnis.filter((e) => e.ours && !e.removing && e.status === 'InUse'),
    ...(primaryEni ? [primaryEni] : []),
  ].flatMap(ipsOf);
  const oldIds = [...ownedEnis.map((e) => e.id), 'eni-gone', ...(primaryEni ? [primaryEni.id] : [])];
  const releasable = instanceEnis.filter((e) => e.ours && !e.removing && e.status === 'InUse');
  const ourUnits = [...ownedEnis, ...(primaryEni ? [primaryEni] : [])].flatMap(unitsOf);
  return fc
    .record({
      used: fc.subarray(servable),
      cooling: mapOf(
        servable,
        fc.integer({ min: -60_000, max: 120_000 }).map((d) => iso(NOW + d)),
      ),
      requests: mapOf([...ourUnits, '10.9.0.1', '10.9.0.16/28'], fc.constantFrom(OLD_STAMP, CUR_STAMP)),
      acks: mapOf(
        [...ourUnits, '10.9.0.2'],
        fc.record({ answer: fc.constantFrom('ready' as const, 'do-not-release' as const), matching: chance(75) }),
      ),
      published: fc.subarray(oldIds),
      removedByUs: fc.subarray(oldIds),
      vSwitchIDs: fc.shuffledSubarray([...vswIds, 'vsw-missing'], { minLength: 1 }),
      // ENIs whose every address was requested and confirmed (so that ENIs are deleted too).
      confirmedWhole: fc.subarray(releasable),
      withStatus: chance(92),
    })
    .map((r): Case => {
      const requestedAt = (ip: string, matching: boolean) => {
        const req = r.requests[ip];
        if (matching) return req ?? CUR_STAMP;
        return req === OLD_STAMP ? CUR_STAMP : OLD_STAMP;
      };
      const byId = new Map(ownedEnis.map((e) => [e.id, e]));
      const confirmed = r.confirmedWhole.flatMap(unitsOf);
      const requests = { ...r.requests, ...Object.fromEntries(confirmed.map((ip) => [ip, CUR_STAMP])) };
      const acks = {
        ...Object.fromEntries(
          Object.entries(r.acks).map(([ip, a]) => [ip, { answer: a.answer, requestedAt: requestedAt(ip, a.matching) }]),
        ),
        ...Object.fromEntries(confirmed.map((ip) => [ip, { answer: 'ready' as const, requestedAt: CUR_STAMP }])),
      };
      const status: ENIPoolStatus = {
        enis: r.published.map((id): PoolENI => {
          const e = byId.get(id);
          return {
            id,
            state: 'InUse',
            ips: e ? ipsOf(e) : ['10.9.1.1', '10.9.1.2'],
            ...(e?.ipv4Prefixes ? { prefixes: e.ipv4Prefixes } : {}),
          };
        }),
        used: Object.fromEntries(r.used.map((ip) => [ip, owner])),
        cooling: r.cooling,
        releaseRequests: requests,
        releaseAcks: acks,
        conditions: [],
      };
      const { minAllocate, maxAllocate } = s.sizing;
      const p = s.policy;
      const spec: ENIPool['spec'] = {
        nodeName: NODE,
        instanceID: s.branch === 'noInstance' ? undefined : INSTANCE,
        instanceType: TYPE,
        zoneID: ZONE,
        vpcID: VPC,
        ...s.sizing,
        minAllocate: maxAllocate ? Math.min(minAllocate, maxAllocate) : minAllocate,
        vSwitchIDs: r.vSwitchIDs,
        vSwitchTags: p.byTags ? { pods: 'yes' } : undefined,
        vSwitchSelection: p.vSwitchSelection,
        securityGroupIDs: ['sg-named'],
        securityGroupTags: p.sgByTags ? { pods: 'yes' } : undefined,
        releaseExcessIPs: p.releaseExcessIPs,
        releaseDelaySeconds: p.releaseDelaySeconds,
        deleteEmptyENIs: p.deleteEmptyENIs,
        ipv4Mode: p.prefixMode ? 'Prefix' : undefined,
        prefixFallback: p.prefixFallback,
        usePrimaryENI: (s.primary.present && s.primary.use) || undefined,
      };
      const o: PoolObservation = {
        now: NOW,
        mode: s.mode,
        vpcId: VPC,
        pool: {
          apiVersion: API_VERSION,
          kind: 'ENIPool',
          metadata: { name: NODE, generation: 2, resourceVersion: '10' },
          spec,
          status: r.withStatus ? status : undefined,
        },
        limits: s.branch === 'unknownType' ? undefined : limits,
        instanceEnis,
        ownedEnis,
        primaryEni,
        inFlight: {
          enis: flagged.length + creating.length,
          ips: sum(flagged.map((e) => ipsOf(e).length)) + sum(creating),
        },
        pendingPods: s.pendingPods,
        sharingInstance: [...s.sharingInstance],
        vSwitches: s.vSwitches
          .map((v, i) => ({
            id: vswIds[i]!,
            zoneId: v.zoneOk ? ZONE : 'zone-b',
            vpcId: v.vpcOk ? VPC : 'vpc-b',
            free: v.free,
            tags: v.tagged ? { pods: 'yes' } : ({} as Record<string, string>),
            blocked: v.blocked,
            fragmented: v.fragmented,
          }))
          .concat([
            { id: 'vsw-node', zoneId: ZONE, vpcId: VPC, free: 30, tags: {}, blocked: false, fragmented: false },
          ]),
        securityGroups: Array.from({ length: p.sgByTags ? p.sgCount : 0 }, (_, i) => ({
          id: `sg-${i}`,
          vpcId: VPC,
          tags: { pods: 'yes' },
        })),
        removedByUs: new Set([...r.removedByUs, ...ownedEnis.filter((e) => e.removing).map((e) => e.id)]),
        requestStamp: NEW_STAMP,
        unservable: s.branch === 'unservable' ? { reason: 'NodeGone', message: 'the node is gone' } : undefined,
      };
      return { o, m: { ...s.memory, failures: s.failures } };
    });
});

/**
 * The world once the plan is carried out, with no time passing: adopted ENIs are being attached, assigns
 * add fresh IPs, creates are InUse ENIs, unassigned IPs and deleted ENIs are gone, the vSwitches
 * gave what was taken, and the pool's status and the node's memory are the plan's.
 */
export function applyPlan({ o, m }: Case, plan: PoolPlan): Case {
  let n = 0;
  const fresh = () => (n++, `10.200.${Math.floor(n / 250)}.${(n % 250) + 1}`);
  const deleted = new Set(plan.deleteEnis);
  const adopted = new Set(plan.adopt.map((a) => a.eniId));
  const unassigned = new Set(plan.unassign.flatMap((u) => [...u.ips, ...(u.prefixes ?? [])]));
  let m16 = 0;
  const freshPrefix = () => (m16++, `10.201.${Math.floor(m16 / 16)}.${(m16 % 16) * PREFIX_SIZE}/28`);
  const facts = new Map<string, EniFact>();
  for (const e of [...o.instanceEnis, ...o.ownedEnis, ...(o.primaryEni ? [o.primaryEni] : [])]) {
    if (facts.has(e.id) || deleted.has(e.id)) continue;
    const mine = plan.assign.filter((a) => a.eniId === e.id);
    const added = mine.filter((a) => !a.prefix).flatMap((a) => Array.from({ length: a.count }, fresh));
    const addedPrefixes = mine
      .filter((a) => a.prefix)
      .flatMap((a) => Array.from({ length: a.count / PREFIX_SIZE }, freshPrefix));
    const secondaryIps = [...e.secondaryIps.filter((ip) => !unassigned.has(ip)), ...added];
    const ipv4Prefixes = [...(e.ipv4Prefixes ?? []).filter((p) => !unassigned.has(p)), ...addedPrefixes];
    // An adopted ENI is attached in the background, as the shell does: attaching, its IPs in flight.
    if (adopted.has(e.id)) facts.set(e.id, { ...e, status: 'Attaching', instanceId: INSTANCE, attaching: true });
    else facts.set(e.id, { ...e, secondaryIps, ...(ipv4Prefixes.length || e.ipv4Prefixes ? { ipv4Prefixes } : {}) });
  }
  const adoptedIps = sum(plan.adopt.map((a) => ipsOf(facts.get(a.eniId)!).length));
  const created = plan.create.map((c, k): EniFact => ({
    id: `eni-new-${k}`,
    status: 'InUse',
    instanceId: INSTANCE,
    vSwitchId: c.vSwitchId,
    primaryIp: fresh(),
    secondaryIps: c.prefix ? [] : Array.from({ length: c.ips }, fresh),
    ...(c.prefix ? { ipv4Prefixes: Array.from({ length: c.ips / PREFIX_SIZE }, freshPrefix) } : {}),
    ours: true,
    removing: false,
    attaching: false,
  }));
  for (const e of created) facts.set(e.id, e);
  const all = [...facts.values()];
  const taken = (id: string) =>
    sum(plan.assign.filter((a) => a.vSwitchId === id).map((a) => a.count)) +
    // A created ENI took its own primary address too.
    sum(plan.create.filter((c) => c.vSwitchId === id).map((c) => c.ips + 1));
  const status: ENIPoolStatus = {
    ...o.pool.status,
    enis: plan.status.eniIds.map((id) => {
      const e = facts.get(id)!;
      return {
        id,
        state: e.status as PoolENI['state'],
        ips: ipsOf(e),
        ...(e.ipv4Prefixes ? { prefixes: e.ipv4Prefixes } : {}),
      };
    }),
    summary: plan.status.summary,
    releaseRequests: plan.status.releaseRequests,
    conditions: plan.status.conditions,
    observedGeneration: plan.status.observedGeneration,
  };
  const ownedIds = new Set([...o.ownedEnis.map((e) => e.id), ...created.map((e) => e.id)]);
  return {
    o: {
      ...o,
      pool: { ...o.pool, status },
      instanceEnis: all.filter((e) => e.instanceId === INSTANCE && !e.primary),
      ownedEnis: all.filter((e) => ownedIds.has(e.id)),
      primaryEni: o.primaryEni && facts.get(o.primaryEni.id),
      vSwitches: o.vSwitches.map((v) => ({ ...v, free: v.free - taken(v.id) })),
      removedByUs: new Set([...o.removedByUs, ...deleted]),
      inFlight: { enis: o.inFlight.enis + plan.adopt.length, ips: o.inFlight.ips + adoptedIps },
      requestStamp: iso(NOW + 1),
    },
    m: { ...plan.memory, failures: m.failures },
  };
}
