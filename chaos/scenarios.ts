import { statSync } from 'node:fs';
import { join } from 'node:path';
import { LOCK_FILE } from '../src/agent/state-lock.js';
import { StateFile } from '../src/agent/state-file.js';
import type { ENIPool } from '../src/api/types.js';
import type { FaultSpec } from '../testbed/ecs/index.js';
import type { KubeFaultRule } from '../testbed/kube/index.js';
import { exec } from '../testbed/vpc/exec.js';
import { ROOT, agentHolds, type AgentProcess, type ChaosCluster, type OperatorProcess } from './cluster.js';
import { agentKilledMidExclusive } from './exclusive-kill.js';
import { ProbePods, type Probe } from './probe-pods.js';
import { RETRY_PERIOD_MS, mutatingCallsOf, type Verdict } from './invariants.js';
import { sleep, type Scenario, type ScenarioContext } from './scenario.js';

const small = { nodes: 4, replicas: 1, heldBack: 2 };
/**
 * For the Node-list faults: emptied ENIs are kept, so that any ENI deleted during the fault is
 * one the blindness caused (an emptied ENI is deleted by the release handshake, each address
 * confirmed free by the agent, and under churn one may be at any time).
 */
const blind = { nodes: 4, replicas: 1, classSpec: { deleteEmptyENIs: false } };

/** ECS faults for the fault's length, with two nodes joining as it starts (so creates and attaches happen under it). */
function ecsFault(spec: FaultSpec) {
  return async (ctx: ScenarioContext) => {
    ctx.c.ecs.setFaults(spec);
    await ctx.addNodes(2);
    await sleep(ctx.faultMs);
    ctx.c.ecs.clearFaults();
  };
}

/** Kubernetes fault rules for the fault's length, with two nodes joining as it starts. */
function kubeFault(rules: KubeFaultRule[]) {
  return async (ctx: ScenarioContext) => {
    // The nodes join first: the suite's own requests are not under the fault.
    await ctx.addNodes(2);
    ctx.c.kube.setFaultRules(rules);
    await sleep(ctx.faultMs);
    ctx.c.kube.clearFaultRules();
  };
}

/** The leader SIGKILLed every 8 s or so (a new replica started each time), a node joining each round. */
async function leaderSigkill(ctx: ScenarioContext): Promise<void> {
  const { c } = ctx;
  const rounds = Math.max(1, Math.round(ctx.faultMs / 10_000));
  for (let i = 0; i < rounds; i++) {
    if (i < 3) void ctx.addNodes(1);
    await sleep(3000);
    const leader = c.leader();
    if (leader) {
      await c.killOperator(leader, 'SIGKILL');
      await c.startOperator();
    }
    await sleep(5000);
  }
}

/**
 * `--pool-api ciliumnode`: answers lost on the calls that grow and shrink pools, and half the
 * CiliumNode writes (the operator's and the agents') refused with a 409, while pods come and go:
 * releases go through the agents' handshake under both.
 */
async function ciliumReleaseFaults(ctx: ScenarioContext): Promise<Record<string, Verdict>> {
  const { c } = ctx;
  const t0 = Date.now();
  c.ecs.setFaults({
    rules: ['AssignPrivateIpAddresses', 'UnassignPrivateIpAddresses', 'CreateNetworkInterface'].map((action) => ({
      action,
      kind: 'drop-answer' as const,
      rate: 0.3,
    })),
  });
  c.kube.setFaultRules(
    ['ciliumnodes', 'ciliumnodes/status'].map((resource) => ({
      verbs: ['update'],
      resource,
      action: 'respond' as const,
      code: 409,
      rate: 0.5,
    })),
  );
  await ctx.addNodes(1);
  await sleep(ctx.faultMs);
  c.ecs.clearFaults();
  c.kube.clearFaultRules();
  const unassigns = c.ecs.calls({ since: t0 }).filter((r) => r.action === 'UnassignPrivateIpAddresses').length;
  return {
    'released-through-handshake': {
      ok: unassigns > 0,
      detail: `${unassigns} unassign calls during the fault, each after the agent's ready-for-release`,
    },
  };
}

/** Mutating cloud calls one operator made after `since`, per action. */
function mutatingAfter(c: ChaosCluster, op: OperatorProcess, since: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of mutatingCallsOf(c, op, since)) out[r.action] = (out[r.action] ?? 0) + 1;
  return out;
}

/**
 * Two replicas mid scale-up (slow creates and attaches, so the leader has work queued), for a
 * leader change: the old leader must drop that work rather than carry it out under the new one.
 */
const leaderChange = {
  nodes: 3,
  heldBack: 6,
  replicas: 2,
  limits: {
    CreateNetworkInterface: { perMinute: 10, burst: 1 },
    AttachNetworkInterface: { perMinute: 10, burst: 1 },
    AssignPrivateIpAddresses: { perMinute: 60, burst: 5 },
    UnassignPrivateIpAddresses: { perMinute: 60, burst: 5 },
  },
};

/** The moment an operator answers /readyz (its caches synced: a follower ready to take over), within `ms`. */
async function untilReady(c: ChaosCluster, op: OperatorProcess, ms: number): Promise<boolean> {
  return waitFor(() => c.operatorReady(op), ms);
}

/**
 * Mid scale-up, writes the follower's identity into the Lease with a fresh renewTime (what the
 * follower's acquisition after `kubectl delete lease`, or a forced upgrade of the chart-owned
 * Lease and a quick acquisition, look like). The old leader must stop at its next read of the
 * Lease (within one retry period), not at its renew deadline, and make no mutating call after
 * it. Starts a follower first if only one replica runs (a series of short phases).
 */
async function leaseRewritten(ctx: ScenarioContext): Promise<Record<string, Verdict>> {
  const { c } = ctx;
  const old = c.leader();
  if (!old) return { 'deposed-at-once': { ok: false, detail: 'no leader before the fault' } };
  let follower = c.operators.find((op) => op !== old && !op.exited);
  if (!follower) follower = await c.startOperator();
  await untilReady(c, follower, 30_000);
  await ctx.addNodes(6);
  await sleep(1000);
  const writtenAt = await c.rewriteLease(follower.identity);
  await waitFor(() => !!old.steppedDown || old.exited, 10_000);
  await sleep(Math.max(0, ctx.faultMs - (Date.now() - writtenAt)));
  const s = old.steppedDown;
  const learnedMs = s ? s.at - writtenAt : undefined;
  // It reads the Lease every retry period; the read and the log line take a moment more. A
  // renewal whose read came just before the write loses the conflict on it: as immediate.
  const learned =
    s?.reason === 'other-holder' && s.holder === follower.identity
      ? 'on reading it'
      : s?.reason === 'conflict'
        ? 'on losing its renewal to it'
        : undefined;
  const deposed: Verdict =
    learned && learnedMs! <= RETRY_PERIOD_MS + 1000
      ? { ok: true, detail: `stopped leading ${(learnedMs! / 1000).toFixed(1)} s after the write, ${learned}` }
      : {
          ok: false,
          detail: s
            ? `stopped leading ${(learnedMs! / 1000).toFixed(1)} s after the write (${s.reason})`
            : 'never said it stopped leading',
        };
  // When it learned of the other holder: its log line says so; without one (it stopped for
  // another reason, or not at all), the latest moment it can have: the write plus one retry period.
  const said = s && learned;
  const readBy = said ? s.at : writtenAt + RETRY_PERIOD_MS;
  const calls = mutatingCallsOf(c, old, writtenAt - 30_000);
  const late = calls.filter((r) => r.at > readBy + RETRY_PERIOD_MS);
  const last = calls.at(-1);
  const rel = (t: number) => `${t >= readBy ? '+' : ''}${((t - readBy) / 1000).toFixed(1)} s`;
  return {
    'deposed-at-once': deposed,
    'old-leader-silent': late.length
      ? {
          ok: false,
          detail: `${late.length} mutating calls more than one retry period after it read the other holder: ${late
            .slice(0, 5)
            .map((r) => `${r.action} ${rel(r.at)}`)
            .join(', ')}`,
        }
      : {
          ok: true,
          detail: `last mutating call ${last ? rel(last.at) : 'none'} from reading the other holder${said ? '' : ' (the write + 2 s)'}`,
        },
  };
}

/** No pool and no ENI deleted while the operator could not list Nodes. */
function nothingDeleted(c: ChaosCluster, pools: number, since: number): Verdict {
  const deletes = c.ecs.calls({ since, action: 'DeleteNetworkInterface' }).length;
  const left = c.pools().length;
  return deletes === 0 && left >= pools
    ? { ok: true, detail: `${left} pools kept, no ENI deleted` }
    : {
        ok: false,
        detail: `${pools - left} pools deleted, ${deletes} DeleteNetworkInterface calls while Nodes could not be listed`,
      };
}

/** The agent's status writes (merge patches of its pool's status) in [from, to). */
const statusPatches = (a: AgentProcess, from: number, to = Infinity) =>
  (a.requests?.requests ?? []).filter(
    (r) =>
      r.method === 'PATCH' &&
      r.path.startsWith(`/apis/eniipam.io/v1alpha1/enipools/${a.node}/status`) &&
      r.at >= from &&
      r.at < to,
  );

/** Whether a pool's status.used names exactly the addresses its agent holds. */
async function usedMatches(c: ChaosCluster, a: AgentProcess): Promise<boolean> {
  const held = await agentHolds(a);
  const pool = c.pools().find((p) => p.metadata.name === a.node) as ENIPool | undefined;
  if (!held || !pool) return false;
  const used = Object.keys(pool.status?.used ?? {}).sort();
  return JSON.stringify(used) === JSON.stringify([...new Set(held.values())].sort());
}

/** Events about a pool with this reason (the agents record them in `default`). */
function poolEvents(c: ChaosCluster, node: string, reason: string): Array<Record<string, unknown>> {
  const t = c.kube.store.types.get('events');
  if (!t) return [];
  return c.kube.store
    .list(t, 'default')
    .filter(
      (e) =>
        (e as unknown as { reason?: string }).reason === reason &&
        (e as unknown as { involvedObject?: { name?: string } }).involvedObject?.name === node,
    ) as unknown as Array<Record<string, unknown>>;
}

/** Agents' status writes refused: PATCHes per agent per minute at most this (one per --status-interval was 60). */
const AGENT_PATCHES_PER_MINUTE = 20;

async function waitFor(cond: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (await cond()) return true;
    await sleep(200);
  }
  return false;
}

/** The agent's route tables: base (its default) + the ENI's deviceIndex (docs/datapath.md: what the agent changes on a node). */
const TABLE_BASE = 3000;
const DEVICE_DELAY_MS = 4000;

/** What the agent owns in a node's namespace now: its rules (proto 236) and, per ENI MAC, the device and its table's default route. */
async function nodeDatapath(netns: string, pool: ENIPool | undefined) {
  const json = async (...args: string[]) => {
    const r = await exec('ip', ['-N', '-n', netns, '-j', ...args]);
    // A table nothing was ever put in does not exist: it holds no route.
    if (r.code !== 0 && r.stderr.includes('FIB table does not exist')) return [];
    if (r.code !== 0) throw new Error(`ip -n ${netns} ${args.join(' ')}: ${r.stderr.trim()}`);
    return JSON.parse(r.stdout || '[]') as Array<Record<string, unknown>>;
  };
  const rules = (await json('rule', 'show')).filter((r) => String(r.protocol) === '236');
  const links = await json('link', 'show');
  const enis = [];
  for (const eni of pool?.status?.enis ?? []) {
    if (eni.state !== 'InUse' || eni.deviceIndex === undefined) continue;
    const link = links.find((l) => l.address === eni.mac);
    const table = TABLE_BASE + eni.deviceIndex;
    const routes = await json('route', 'show', 'table', String(table));
    enis.push({
      id: eni.id,
      up: !!link && (link.flags as string[]).includes('UP'),
      routed: routes.some((r) => r.dst === 'default' && r.gateway === eni.gatewayIP && r.dev === link?.ifname),
    });
  }
  return {
    egress: rules
      .filter((r) => r.priority === 111)
      .map((r) => String(r.src))
      .sort(),
    ingress: rules
      .filter((r) => r.priority === 20)
      .map((r) => String(r.dst))
      .sort(),
    enis,
  };
}

/**
 * A scale-up on the strict VPC whose ENI devices appear late: two nodes join, the pods on the
 * others swing (their pools grow by ENIs too), and on every node probe pods start one after
 * another through the shipped conflist and ping the VPC host at once. Each ADD must answer only
 * once the pod's path works (its ENI's device up, its table and rules set), waiting for a late
 * device rather than failing for good; and once the pods settle, each node holds exactly the
 * rules of the addresses its pods hold, every InUse ENI's device up and its table routed.
 */
async function devicesLate(ctx: ScenarioContext): Promise<Record<string, Verdict>> {
  const { c } = ctx;
  if (!c.vpc?.vpcHost || !c.network)
    return { 'probes-reach-vpc': { ok: false, detail: 'the cluster runs without the VPC emulation' } };
  const probes = new ProbePods(c.vpc.vpcHost.ip, `ecp${c.network.id}-`, ROOT);
  const t0 = Date.now();
  const before = new Set(c.agents.map((a) => a.node));
  const probeLoop = async (a: AgentProcess) => {
    while (Date.now() - t0 < ctx.faultMs) {
      await probes.run(a);
      await sleep(300);
    }
  };
  const loops = c.agents.map(probeLoop);
  // A pod on each joining node is waiting before its Node exists, so its first ENI's late device
  // is in that pod's path however long the machine takes to start the agents.
  await ctx.addNodes(2, {
    whenAgentsServe: async (added) => {
      loops.push(...added.map(probeLoop));
      while (!added.every((a) => probes.probes.some((p) => p.node === a.node))) await sleep(20);
    },
  });
  await Promise.all(loops);
  await ctx.stopWorkload();
  const list: Probe[] = probes.probes;
  const failed = list.filter((p) => p.error || !p.reached);
  const slowest = list.reduce((m, p) => Math.max(m, p.addMs), 0);
  const joined = list.filter((p) => !before.has(p.node));
  const firstOnJoined = [...new Set(joined.map((p) => p.node))].map((n) => joined.find((p) => p.node === n)!);
  const enis = c.clusterEnis();
  const attached = enis.filter((e) => e.status === 'InUse' && e.creationTime >= t0 - 1000).length;
  const firstEniAt = (node: string) => Math.min(...enis.filter((e) => e.node === node).map((e) => e.creationTime));
  // Each waited from before its node's first ENI existed until that ENI's device appeared.
  const waitedForDevice = (p: Probe) => p.startedAt < firstEniAt(p.node) && p.addMs >= DEVICE_DELAY_MS;
  // Once the pods settle, and the agents' next pass (on the pool change) has run.
  const settled = await (async () => {
    let last = '';
    for (let i = 0; i < 20; i++) {
      const bad: string[] = [];
      for (const a of c.agents) {
        const held = [...new Set((await agentHolds(a))?.values() ?? [])].sort();
        const dp = await nodeDatapath(
          a.netns!,
          c.pools().find((p) => p.metadata.name === a.node),
        );
        if (JSON.stringify(dp.egress) !== JSON.stringify(held) || JSON.stringify(dp.ingress) !== JSON.stringify(held))
          bad.push(
            `${a.node}: pods hold ${held.length}, egress rules ${dp.egress.length}, ingress ${dp.ingress.length}`,
          );
        for (const e of dp.enis)
          if (!e.up || !e.routed) bad.push(`${a.node}: ENI ${e.id} up ${e.up}, routed ${e.routed}`);
      }
      if (!bad.length) return undefined;
      last = bad.slice(0, 4).join('; ');
      await sleep(500);
    }
    return last;
  })();
  const enisChecked = c
    .pools()
    .reduce((n, p) => n + (p.status?.enis ?? []).filter((e) => e.state === 'InUse').length, 0);
  return {
    'probes-reach-vpc':
      list.length && !failed.length
        ? {
            ok: true,
            detail: `${list.length} probe pods on ${c.agents.length} nodes: every ADD answered and the first ping reached the VPC host; longest ADD ${(slowest / 1000).toFixed(1)} s, ${list.filter((p) => p.retries).length} retried by the kubelet`,
          }
        : {
            ok: false,
            detail: `${failed.length} of ${list.length} probe pods failed, first: ${failed
              .slice(0, 3)
              .map((p) => `${p.node} ${p.ip ?? ''} ${p.error ?? 'no answer to its first ping'}`)
              .join('; ')}`,
          },
    'late-devices-waited':
      firstOnJoined.length === 2 && firstOnJoined.every(waitedForDevice) && attached > 0
        ? {
            ok: true,
            detail: `${attached} ENIs attached during the fault, each device ${DEVICE_DELAY_MS / 1000} s late; the first pod of each joining node waited ${firstOnJoined.map((p) => `${(p.addMs / 1000).toFixed(1)} s`).join(', ')} and worked`,
          }
        : {
            ok: false,
            detail: `${attached} ENIs attached; first pods of the joining nodes: ${
              firstOnJoined
                .map(
                  (p) =>
                    `${p.node} started ${((firstEniAt(p.node) - p.startedAt) / 1000).toFixed(1)} s before its first ENI, waited ${(p.addMs / 1000).toFixed(1)} s`,
                )
                .join(', ') || 'none'
            } (each starts before its node's first ENI exists, so it must wait at least until that ENI's device appears, ${DEVICE_DELAY_MS / 1000} s after the ENI is InUse)`,
          },
    'datapath-exact': settled
      ? { ok: false, detail: `10 s after the pods settled: ${settled}` }
      : {
          ok: true,
          detail: `each node's rules (proto 236) = the addresses its pods hold; ${enisChecked} InUse ENIs up and routed`,
        },
  };
}

export const SCENARIOS: Scenario[] = [
  // ECS
  {
    name: 'ecs-throttling-storm',
    group: 'ECS',
    summary: 'every AssignPrivateIpAddresses and CreateNetworkInterface answered Throttling.User',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: ecsFault({
      rules: [
        { action: 'AssignPrivateIpAddresses', kind: 'error', code: 'Throttling.User', rate: 1 },
        { action: 'CreateNetworkInterface', kind: 'error', code: 'Throttling.User', rate: 1 },
      ],
    }),
  },
  {
    name: 'ecs-internal-errors',
    group: 'ECS',
    summary: '30% of all calls answered InternalError or ServiceUnavailable',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: ecsFault({
      rules: [
        { kind: 'error', code: 'InternalError', rate: 0.15 },
        { kind: 'error', code: 'ServiceUnavailable', rate: 0.18 },
      ],
    }),
  },
  {
    name: 'ecs-latency-spikes',
    group: 'ECS',
    summary: '2 s added to every call, 5 s to creates',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: ecsFault({ latencyMs: 2000, actionLatencyMs: { CreateNetworkInterface: 3000 } }),
  },
  {
    name: 'ecs-never-answers',
    group: 'ECS',
    summary: '20% of calls never answered',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: ecsFault({ rules: [{ kind: 'timeout', rate: 0.2 }] }),
  },
  {
    name: 'ecs-drop-answer',
    group: 'ECS',
    summary: '30% of creates, attaches, assigns and unassigns carried out, their answer lost',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: ecsFault({
      rules: [
        'CreateNetworkInterface',
        'AttachNetworkInterface',
        'AssignPrivateIpAddresses',
        'UnassignPrivateIpAddresses',
      ].map((action) => ({ action, kind: 'drop-answer' as const, rate: 0.3 })),
    }),
  },
  {
    name: 'ecs-prefix-faults',
    group: 'ECS',
    summary:
      'a class of /28 prefixes under churn (each pool swings between one prefix and two): 30% of creates, assigns and unassigns carried out with their answer lost, 15% of all calls InternalError',
    cluster: { ...small, classSpec: { ipv4Mode: 'Prefix', preAllocate: 12, maxBatch: 0 } },
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: async (ctx) => {
      const t0 = Date.now();
      await ecsFault({
        rules: [
          ...['CreateNetworkInterface', 'AssignPrivateIpAddresses', 'UnassignPrivateIpAddresses'].map((action) => ({
            action,
            kind: 'drop-answer' as const,
            rate: 0.3,
          })),
          { kind: 'error', code: 'InternalError', rate: 0.15 },
        ],
      })(ctx);
      // The calls made under the fault were prefix calls: prefixes assigned, and given back whole.
      const prefixCalls = (action: string) =>
        ctx.c.ecs.calls().filter((r) => r.at >= t0 && r.action === action && (r.ips ?? []).some((x) => x.includes('/')))
          .length;
      const [assigned, released] = [prefixCalls('AssignPrivateIpAddresses'), prefixCalls('UnassignPrivateIpAddresses')];
      return {
        'prefixes-moved': {
          ok: assigned > 0 && released > 0,
          detail: `${assigned} assigns and ${released} unassigns of /28 prefixes under the fault`,
        },
      };
    },
  },
  {
    name: 'ecs-non-json-502',
    group: 'ECS',
    summary: '30% of calls answered by a proxy\u2019s 502 HTML page',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: ecsFault({ rules: [{ kind: 'non-json', rate: 0.3 }] }),
  },
  {
    name: 'ecs-bad-answers',
    group: 'ECS',
    summary:
      'the operator restarted while DescribeNetworkInterfaces answers a 503 without a Code, then 200s without ' +
      'their list; creates answered {} during a scale-up',
    // Emptied ENIs kept (see `blind`): an ENI the pools lose is one the bad answers took.
    cluster: { ...small, classSpec: { deleteEmptyENIs: false } },
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: async (ctx) => {
      const { c } = ctx;
      const published = () => new Map(c.pools().map((p) => [p.metadata.name, p.status?.enis?.length ?? 0]));
      const before = published();
      const fewest = new Map(before);
      const sampler = setInterval(() => {
        for (const [name, n] of published()) if (before.has(name)) fewest.set(name, Math.min(fewest.get(name)!, n));
      }, 200);
      const third = ctx.faultMs / 3;
      try {
        c.ecs.setFaults({ rules: [{ action: 'DescribeNetworkInterfaces', kind: 'http-no-code', rate: 1 }] });
        const leader = c.leader();
        if (leader) {
          await c.killOperator(leader, 'SIGKILL');
          await c.startOperator();
        }
        await sleep(third);
        c.ecs.setFaults({ rules: [{ action: 'DescribeNetworkInterfaces', kind: 'missing-field', rate: 1 }] });
        await sleep(third);
        c.ecs.setFaults({
          rules: [
            { action: 'CreateNetworkInterface', kind: 'empty-answer', rate: 0.5 },
            { action: 'DescribeNetworkInterfaces', kind: 'http-no-code', rate: 0.2 },
          ],
        });
        await ctx.addNodes(2);
        await sleep(third);
      } finally {
        clearInterval(sampler);
        c.ecs.clearFaults();
      }
      const dropped = [...before].filter(([name, n]) => fewest.get(name)! < n);
      return {
        'pools-kept': dropped.length
          ? { ok: false, detail: dropped.map(([name, n]) => `${name}: ${n} -> ${fewest.get(name)} ENIs`).join(', ') }
          : { ok: true, detail: `${before.size} pools kept their ENIs through the bad answers` },
      };
    },
  },
  {
    name: 'ecs-bad-answers-mid-run',
    group: 'ECS',
    summary:
      'mid-run, with pods coming and going and full resyncs every 5 s: describes answered 503 without a Code, ' +
      '200 without their list, or a NextToken that keeps coming back; a node leaves meanwhile',
    // Emptied ENIs kept (see `blind`): an ENI the staying pools lose is one the bad answers took.
    cluster: { ...small, operatorArgs: ['--resync-interval=5'], classSpec: { deleteEmptyENIs: false } },
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: async (ctx) => {
      const { c } = ctx;
      const since = Date.now();
      const stay = c.nodes.slice(1);
      const leaving = c.nodes[0]!;
      const enisOf = (node: string) => c.clusterEnis().filter((e) => e.node === node).length;
      const published = () => new Map(c.pools().map((p) => [p.metadata.name, p.status?.enis?.length ?? 0]));
      const before = published();
      const fewest = new Map(before);
      const sampler = setInterval(() => {
        for (const [name, n] of published()) if (before.has(name)) fewest.set(name, Math.min(fewest.get(name)!, n));
      }, 200);
      try {
        c.ecs.setFaults({
          rules: [
            { action: 'DescribeNetworkInterfaces', kind: 'http-no-code', rate: 0.3 },
            { action: 'DescribeNetworkInterfaces', kind: 'missing-field', rate: 0.3 },
            { action: 'DescribeNetworkInterfaces', kind: 'repeat-next-token', rate: 0.5 },
          ],
        });
        await sleep(ctx.faultMs / 3);
        ctx.workload.retire(leaving);
        await c.removeNode(leaving);
        await sleep((ctx.faultMs * 2) / 3);
      } finally {
        clearInterval(sampler);
        c.ecs.clearFaults();
      }
      // The leaving node's pool goes, and its ENIs with it, once reads can be trusted again.
      const gone = await waitFor(
        () => !c.pools().some((p) => p.metadata.name === leaving) && enisOf(leaving) === 0,
        60_000,
      );
      const dropped = stay.filter((n) => before.has(n) && fewest.get(n)! < before.get(n)!);
      const creates = c.ecs.calls({ since, action: 'CreateNetworkInterface' }).filter((r) => r.code === 'OK');
      return {
        'pools-kept': dropped.length
          ? { ok: false, detail: dropped.map((n) => `${n}: ${before.get(n)} -> ${fewest.get(n)} ENIs`).join(', ') }
          : { ok: true, detail: `${stay.length} pools kept their ENIs through the bad answers` },
        'no-create-from-a-bad-read': creates.length
          ? { ok: false, detail: `${creates.length} ENIs created during the fault (no node needed one)` }
          : { ok: true, detail: 'no ENI created while reads were bad' },
        'node-left-cleanly': gone
          ? { ok: true, detail: `${leaving}'s pool and ENIs gone after the fault` }
          : {
              ok: false,
              detail: `${leaving}: pool ${c.pools().some((p) => p.metadata.name === leaving) ? 'kept' : 'gone'}, ${enisOf(leaving)} ENIs left`,
            },
      };
    },
  },
  {
    name: 'duplicate-provider-id',
    group: 'Kubernetes',
    summary:
      'a second Node with another node\u2019s providerID (a duplicated providerID, a renamed node whose old Node stays), ' +
      'while pods come and go; then the duplicate is deleted',
    cluster: { ...small, operatorArgs: ['--node-gone-grace=5'] },
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: async (ctx) => {
      const { c } = ctx;
      const since = Date.now();
      const original = c.nodes[0]!;
      const instance = c.pools().find((p) => p.metadata.name === original)!.spec.instanceID!;
      const ownEnis = () =>
        new Set(
          c
            .clusterEnis()
            .filter((e) => e.node === original)
            .map((e) => e.id),
        );
      const before = ownEnis();
      const dup = await c.duplicateNode(original);
      const both = await waitFor(
        () =>
          [original, dup].every((n) =>
            c
              .pools()
              .find((p) => p.metadata.name === n)
              ?.status?.conditions?.some((k) => k.reason === 'DuplicateInstance'),
          ),
        20_000,
      );
      await sleep(ctx.faultMs);
      // Nothing of either pool was released while both named the instance.
      const released = c.ecs
        .calls({ since })
        .filter(
          (r) =>
            (r.action === 'UnassignPrivateIpAddresses' || r.action === 'DeleteNetworkInterface') &&
            r.code === 'OK' &&
            r.instanceId === instance,
        );
      const kept = [...before].every((id) => ownEnis().has(id));
      await c.deleteNodeObject(dup);
      const resolved = await waitFor(() => !c.pools().some((p) => p.metadata.name === dup), 60_000);
      const stillOwn = [...before].every((id) => ownEnis().has(id));
      return {
        'both-told': both
          ? { ok: true, detail: `${original} and ${dup} both Degraded (DuplicateInstance)` }
          : { ok: false, detail: 'the two pools were not both told' },
        'nothing-released': released.length
          ? { ok: false, detail: `${released.length} unassigns or deletes on ${instance} while two pools named it` }
          : { ok: true, detail: `no unassign or delete on ${instance} during the duplicate` },
        'own-enis-kept':
          kept && stillOwn
            ? { ok: true, detail: `${original} kept its ${before.size} ENIs, during and after the duplicate` }
            : { ok: false, detail: `${original} lost ENIs it had made for itself` },
        'duplicate-resolved': resolved
          ? { ok: true, detail: `${dup}'s pool gone once its Node was` }
          : { ok: false, detail: `${dup}'s pool still there` },
      };
    },
  },
  {
    name: 'ecs-stuck-detach',
    group: 'ECS',
    summary: 'half the detaches stay Detaching until reissued, while pools shrink',
    cluster: { ...small, classSpec: { releaseDelaySeconds: 1 } },
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: ecsFault({ stuckDetachRate: 0.5 }),
  },
  {
    name: 'ecs-attach-falls-back',
    group: 'ECS',
    summary: 'half the attaches fall back to Available',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: ecsFault({ attachFailRate: 0.5 }),
  },
  {
    name: 'ecs-scale-up-40',
    group: 'ECS',
    summary: '40 nodes join at once needing 3 ENIs each; Create and Attach at 60/min, 300 ms on Create',
    cluster: {
      nodes: 0,
      heldBack: 40,
      replicas: 1,
      start: { agents: false },
      // A small burst, so that the queue lasts about two minutes.
      limits: {
        CreateNetworkInterface: { perMinute: 60, burst: 10 },
        AttachNetworkInterface: { perMinute: 60, burst: 10 },
        AssignPrivateIpAddresses: { perMinute: 400, burst: 400 },
        DescribeNetworkInterfaces: { perMinute: 800, burst: 800 },
      },
      world: (f) => {
        for (const i of f.instances) i.instanceType = 'ecs.g7.xlarge';
        f.faults = { actionLatencyMs: { CreateNetworkInterface: 300 } };
      },
      // 15 IPs per ENI of a g7.xlarge (its own primary included): 40 IPs need 3 ENIs.
      classSpec: { minAllocate: 40, preAllocate: 0, deleteEmptyENIs: false },
    },
    faultMs: 300_000,
    quickFaultMs: 300_000,
    recoverWithinMs: 30_000,
    workload: false,
    fault: async (ctx) => {
      const t0 = Date.now();
      await ctx.addNodes(40);
      const done = await waitFor(() => ctx.c.readyPools() === 40, ctx.faultMs);
      const took = Date.now() - t0;
      const enis = ctx.c.clusterEnis().length;
      // 120 creates and 120 attaches at 60/min after a burst of 10: the queue bound.
      const boundMs = ((120 - 10) / 60) * 60_000;
      return {
        'all-ready-in-bound':
          done && took <= boundMs * 1.3 + 20_000
            ? {
                ok: true,
                detail: `all Ready after ${(took / 1000).toFixed(0)} s (queue bound ${(boundMs / 1000).toFixed(0)} s)`,
              }
            : {
                ok: false,
                detail: `${ctx.c.readyPools()}/40 Ready after ${(took / 1000).toFixed(0)} s (queue bound ${(boundMs / 1000).toFixed(0)} s)`,
              },
        'enis-as-wanted':
          enis === 120
            ? { ok: true, detail: '120 secondary ENIs for 120 wanted' }
            : { ok: false, detail: `${enis} secondary ENIs in the cloud for 120 wanted` },
      };
    },
  },
  // VPC
  {
    name: 'vpc-devices-late',
    group: 'VPC',
    summary: `a scale-up on the strict VPC (nodes in namespaces, real pods): each new ENI's device appears in its node ${DEVICE_DELAY_MS / 1000} s after the ENI is InUse`,
    cluster: { nodes: 2, heldBack: 2, replicas: 1, vpc: { deviceDelayMs: DEVICE_DELAY_MS } },
    faultMs: 60_000,
    quickFaultMs: 20_000,
    recoverWithinMs: 60_000,
    fault: devicesLate,
  },
  // Kubernetes
  {
    name: 'kube-list-nodes-403-at-start',
    group: 'Kubernetes',
    summary: 'the operator restarts while LIST nodes answers 403 Forbidden',
    cluster: blind,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: async (ctx) => {
      const { c } = ctx;
      const pools = c.pools().length;
      const t0 = Date.now();
      await c.killOperator(c.operators[0]!, 'SIGKILL');
      c.kube.setFaultRules([{ verbs: ['list'], resource: 'nodes', action: 'respond', code: 403 }]);
      await c.startOperator();
      await sleep(ctx.faultMs);
      const verdict = nothingDeleted(c, pools, t0);
      const ready = await c.operatorReady(c.operators.at(-1));
      c.kube.clearFaultRules();
      return {
        'nothing-deleted-while-blind': verdict,
        'not-ready-while-blind': ready
          ? { ok: false, detail: '/readyz answered 200 without a Node cache' }
          : { ok: true, detail: '/readyz answered 503 while Nodes could not be listed' },
      };
    },
  },
  {
    name: 'kube-list-nodes-403-mid-run',
    group: 'Kubernetes',
    summary: 'LIST nodes answers 403 mid-run while watches are closed every 3 s (the informers must relist)',
    cluster: blind,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: async (ctx) => {
      const pools = ctx.c.pools().length;
      const t0 = Date.now();
      ctx.c.kube.setFaultRules([
        { verbs: ['list'], resource: 'nodes', action: 'respond', code: 403 },
        { action: 'close-watches', everySeconds: 3 },
      ]);
      await sleep(ctx.faultMs);
      const verdict = nothingDeleted(ctx.c, pools, t0);
      ctx.c.kube.clearFaultRules();
      return { 'nothing-deleted-while-blind': verdict };
    },
  },
  {
    name: 'kube-watches-closed',
    group: 'Kubernetes',
    summary: 'every watch closed every 3 s',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: kubeFault([{ action: 'close-watches', everySeconds: 3 }]),
  },
  {
    name: 'kube-410-storm',
    group: 'Kubernetes',
    summary: 'watches closed every 2 s and every resumed watch answered 410 Expired',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: kubeFault([
      { verbs: ['watch'], action: 'respond', code: 410, rate: 0.7 },
      { action: 'close-watches', everySeconds: 2 },
    ]),
  },
  {
    name: 'kube-status-conflicts',
    group: 'Kubernetes',
    summary: 'half the pool status writes answered 409 Conflict',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: kubeFault([
      { verbs: ['update', 'patch'], resource: 'enipools/status', action: 'respond', code: 409, rate: 0.5 },
    ]),
  },
  {
    name: 'kube-429-retry-after',
    group: 'Kubernetes',
    summary: 'half of all requests answered 429 with Retry-After: 2',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    fault: kubeFault([
      {
        verbs: ['get', 'list', 'create', 'update', 'patch', 'delete'],
        action: 'respond',
        code: 429,
        retryAfterSeconds: 2,
        rate: 0.5,
      },
    ]),
  },
  {
    name: 'kube-unreachable-30s',
    group: 'Kubernetes',
    summary: 'the API server refuses connections for 30 s',
    cluster: small,
    faultMs: 30_000,
    recoverWithinMs: 60_000,
    workload: true,
    fault: async (ctx) => {
      await ctx.c.kube.refuseConnections(ctx.faultMs);
      await sleep(ctx.faultMs + 500);
    },
  },
  {
    name: 'kube-agent-status-refused',
    group: 'Kubernetes',
    summary:
      'the agents\u2019 status writes answered 429 with Retry-After: 2 for half the fault, then 403 Forbidden; ' +
      'PATCHes per agent per minute stay bounded, and status.used is right again after',
    cluster: { nodes: 4, replicas: 1, agentRequestLogs: true },
    faultMs: 60_000,
    quickFaultMs: 20_000,
    // The back-off is capped at 30 s: the next write after the fault comes within that.
    recoverWithinMs: 90_000,
    fault: async (ctx): Promise<Record<string, Verdict>> => {
      const { c } = ctx;
      const rule = { verbs: ['patch' as const], resource: 'enipools/status', action: 'respond' as const };
      const t0 = Date.now();
      c.kube.setFaultRules([{ ...rule, code: 429, retryAfterSeconds: 2 }]);
      await sleep(ctx.faultMs / 2);
      c.kube.setFaultRules([{ ...rule, code: 403, user: 'system:serviceaccount:kube-system:eni-ipam-agent' }]);
      await sleep(ctx.faultMs / 2);
      const t1 = Date.now();
      c.kube.clearFaultRules();
      const minutes = (t1 - t0) / 60_000;
      const perAgent = c.agents.map((a) => ({ node: a.node, patches: statusPatches(a, t0, t1) }));
      const worst = Math.max(...perAgent.map((x) => x.patches.length / minutes));
      const counts = perAgent.map((x) => `${x.node} ${x.patches.length}`).join(', ');
      const refused = perAgent.every((x) => x.patches.every((p) => p.status === 429 || p.status === 403));
      // Once the server takes writes again, each agent's status.used catches up with what it holds.
      await ctx.stopWorkload();
      const t2 = Date.now();
      const caughtUp = await waitFor(
        async () => (await Promise.all(c.agents.map((a) => usedMatches(c, a)))).every(Boolean),
        60_000,
      );
      const took = Date.now() - t2;
      const after = Math.max(...c.agents.map((a) => statusPatches(a, t1, Date.now()).length));
      const verdicts: Record<string, Verdict> = {
        'agent-patches-bounded':
          worst <= AGENT_PATCHES_PER_MINUTE && refused
            ? {
                ok: true,
                detail: `at most ${worst.toFixed(1)} PATCHes per agent per minute (${counts} in ${(minutes * 60).toFixed(0)} s)`,
              }
            : {
                ok: false,
                detail: `${worst.toFixed(1)} PATCHes per agent per minute, more than ${AGENT_PATCHES_PER_MINUTE} (${counts})${refused ? '' : '; some were not refused'}`,
              },
        'status-used-recovers': caughtUp
          ? {
              ok: true,
              detail: `status.used = each agent's allocations ${(took / 1000).toFixed(1)} s after the workload stopped, ${after} PATCHes at most per agent since the fault`,
            }
          : { ok: false, detail: 'status.used still differs from an agent\u2019s allocations 60 s after the fault' },
      };
      // Unsent for 30 s (the stale threshold), every agent with changes to write says so: a Warning
      // Event (Events are not refused), and once written again, its condition and a Normal Event.
      if (ctx.faultMs >= 45_000) {
        const said = c.agents.filter((a) => poolEvents(c, a.node, 'StatusNotReported').length > 0);
        const back = await waitFor(
          () =>
            said.every((a) => {
              const pool = c.pools().find((p) => p.metadata.name === a.node);
              const cond = pool?.status?.agentConditions?.find((x) => x.type === 'StatusReported');
              return (
                cond?.status === 'True' &&
                /current again after/.test(cond.message ?? '') &&
                poolEvents(c, a.node, 'StatusReported').length > 0
              );
            }),
          30_000,
        );
        verdicts['agents-say-so'] =
          said.length === c.agents.length && back
            ? {
                ok: true,
                detail: `${said.length} agents recorded StatusNotReported, then StatusReported and their condition`,
              }
            : {
                ok: false,
                detail: `${said.length}/${c.agents.length} agents recorded StatusNotReported; ${back ? '' : 'not all '}reported again with their condition`,
              };
      }
      return verdicts;
    },
  },
  {
    name: 'kube-leader-blackholed',
    group: 'Kubernetes',
    summary: 'two replicas; the leader\u2019s API connection black-holed mid scale-up while the follower takes over',
    // A slow create quota, so that the old leader still has creates queued when its connection goes.
    cluster: leaderChange,
    faultMs: 60_000,
    quickFaultMs: 40_000,
    recoverWithinMs: 120_000,
    fault: async (ctx): Promise<Record<string, Verdict>> => {
      const { c } = ctx;
      const old = c.leader();
      if (!old) return { 'old-leader-silent': { ok: false, detail: 'no leader before the fault' } };
      await ctx.addNodes(6);
      await sleep(1000);
      await old.proxy.setMode('blackhole');
      const t0 = Date.now();
      const took = await waitFor(() => !!c.leader() && c.leader() !== old, ctx.faultMs);
      const takeover = Date.now();
      await sleep(Math.max(0, ctx.faultMs - (takeover - t0)));
      const after = mutatingAfter(c, old, takeover);
      const n = Object.values(after).reduce((a, b) => a + b, 0);
      await old.proxy.setMode('pass');
      return {
        'follower-takes-over': took
          ? { ok: true, detail: `after ${((takeover - t0) / 1000).toFixed(1)} s` }
          : { ok: false, detail: 'no takeover' },
        'old-leader-silent':
          n === 0
            ? {
                ok: true,
                detail: `0 mutating calls in the ${((Date.now() - takeover) / 1000).toFixed(0)} s after the takeover`,
              }
            : { ok: false, detail: `${n} mutating calls after the takeover: ${JSON.stringify(after)}` },
      };
    },
  },
  {
    name: 'kube-lease-rewritten',
    group: 'Kubernetes',
    summary: 'two replicas; the follower\u2019s identity written into the Lease with a fresh renewTime mid scale-up',
    cluster: leaderChange,
    faultMs: 30_000,
    quickFaultMs: 20_000,
    recoverWithinMs: 120_000,
    fault: leaseRewritten,
  },
  {
    name: 'metadata-slow',
    group: 'ECS',
    summary:
      'two RAM-role replicas (60 s credentials) whose metadata service answers in 8 s; the Lease rewritten to the follower mid scale-up',
    cluster: { ...leaderChange, ramRole: { credentialTtlSeconds: 60 } },
    faultMs: 60_000,
    quickFaultMs: 60_000,
    recoverWithinMs: 120_000,
    fault: async (ctx) => {
      const { c } = ctx;
      const t0 = Date.now();
      const leader = c.leader();
      const asked = new Map(c.operators.map((op) => [op, op.metadata?.requests.length ?? 0]));
      c.setMetadataLatency(8000);
      // The leader change comes while the leader's refresh is under way (16 s: a token, then the credentials).
      const started = await waitFor(() => (leader?.metadata?.requests.length ?? 0) > (asked.get(leader!) ?? 0), 50_000);
      const refreshAt = leader?.metadata?.requests.at(-1)?.at ?? Date.now();
      const own = await leaseRewritten({ ...ctx, faultMs: Math.max(20_000, ctx.faultMs - (Date.now() - t0)) });
      c.setMetadataLatency(0);
      // A refresh at half the credentials' life: about one a replica in the fault (two requests each), not one per call.
      const bound = 2 * (Math.ceil((Date.now() - t0) / 30_000) + 1);
      const counts = c.operators
        .filter((op) => op.metadata)
        .map((op) => ({ op, n: op.metadata!.requests.length - (asked.get(op) ?? 0) }));
      const over = counts.filter((x) => x.n > bound);
      const detail =
        `metadata requests during the fault: ${counts.map((x) => `${x.op.accessKeyId} ${x.n}`).join(', ')} ` +
        `(at most ${bound}); ` +
        (started && leader?.steppedDown
          ? `the leader stopped leading ${((leader.steppedDown.at - refreshAt) / 1000).toFixed(1)} s into its refresh`
          : 'no refresh of the leader during the fault');
      return {
        ...own,
        'credentials-in-background': { ok: over.length === 0 && started, detail },
      };
    },
  },
  // Processes
  {
    name: 'leader-sigkill',
    group: 'Processes',
    summary: 'the leader SIGKILLed every 8 s during a scale-up and churn (create, attach, assign, unassign), 3 times',
    cluster: { nodes: 4, heldBack: 3, replicas: 2 },
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: leaderSigkill,
  },
  {
    name: 'cilium-release-faults',
    group: 'Processes',
    summary:
      '--pool-api ciliumnode with stand-in cilium-agents: 30% of creates, assigns and unassigns lost, half the CiliumNode updates refused (409), pods coming and going',
    cluster: { ...small, poolApi: 'ciliumnode' },
    faultMs: 30_000,
    quickFaultMs: 12_000,
    recoverWithinMs: 90_000,
    fault: ciliumReleaseFaults,
  },
  {
    name: 'cilium-leader-sigkill',
    group: 'Processes',
    summary:
      '--pool-api ciliumnode with stand-in cilium-agents: the leader SIGKILLed every 8 s during a scale-up and churn, 3 times',
    cluster: { nodes: 4, heldBack: 3, replicas: 2, poolApi: 'ciliumnode' },
    faultMs: 30_000,
    recoverWithinMs: 90_000,
    fault: leaderSigkill,
  },
  {
    name: 'agent-killed-mid-burst',
    group: 'Processes',
    summary: 'an agent SIGKILLed while pods start on its node, restarted 2 s later with its state',
    cluster: { nodes: 3, replicas: 1 },
    faultMs: 20_000,
    recoverWithinMs: 60_000,
    fault: async (ctx) => {
      const a = ctx.c.agents[0]!;
      for (let t = 0; t < ctx.faultMs; t += 10_000) {
        await ctx.c.killAgent(a);
        await sleep(2000);
        await ctx.c.startAgents([a]);
        await sleep(8000);
      }
    },
  },
  {
    name: 'agent-killed-mid-exclusive',
    group: 'Processes',
    summary:
      'eniMode Exclusive on the strict VPC (real pods, each a whole ENI): the agent SIGKILLed in the middle of ' +
      'each pod’s ADD (its device on the way in) and DEL (on the way back), restarted 1 s later',
    cluster: {
      nodes: 2,
      replicas: 1,
      vpc: { deviceDelayMs: 0 },
      classSpec: { eniMode: 'Exclusive', preAllocate: 1, releaseDelaySeconds: 0 },
    },
    // The pods are the fault's own (real sandboxes); the socket workload takes no whole ENI.
    workload: false,
    faultMs: 60_000,
    quickFaultMs: 20_000,
    recoverWithinMs: 60_000,
    fault: agentKilledMidExclusive,
  },
  {
    name: 'second-agent',
    group: 'Processes',
    summary:
      'a second agent started on a node whose agent runs: same state directory and socket (a DaemonSet surge), ' +
      'then another state directory (a stray run); each exits 1, the first serves on',
    cluster: { nodes: 3, replicas: 1 },
    faultMs: 15_000,
    recoverWithinMs: 60_000,
    fault: async (ctx): Promise<Record<string, Verdict>> => {
      const { c } = ctx;
      const a = c.agents[0]!;
      const socketInode = statSync(a.socket).ino;
      const lockInode = statSync(join(a.stateDir, LOCK_FILE)).ino;
      const t0 = Date.now();
      const surge = await c.runSecondAgent(a);
      const stray = await c.runSecondAgent(a, { stateDir: join(c.dir, 'stray-state', a.node) });
      await sleep(Math.max(0, ctx.faultMs - (Date.now() - t0)));
      const alive = a.child?.exitCode === null && a.child.signalCode === null;
      const sameSocket = statSync(a.socket).ino === socketInode;
      const sameLock = statSync(join(a.stateDir, LOCK_FILE)).ino === lockInode;
      // Its pods keep their addresses: what the runtime holds on that node, the agent still lists.
      await ctx.stopWorkload();
      const held = await agentHolds(a);
      const pods = [...ctx.workload.held.values()].filter((h) => h.node === a.node && h.ip);
      const kept = !!held && pods.every((h) => held.get(h.containerId) === h.ip);
      // Its journal is intact: what is on disk is what it serves (it saves before it answers).
      const journal = held && StateFile.in(a.stateDir).load();
      const onDisk = journal
        ? new Map(Object.values(journal.allocations).map((x) => [x.containerId, x.ip]))
        : undefined;
      const intact = !!held && !!onDisk && JSON.stringify([...onDisk].sort()) === JSON.stringify([...held].sort());
      const line = (r: { stderr: string }) => r.stderr.trim().split('\n');
      const exits = (r: { code: number | null; stdout: string; stderr: string }, pattern: RegExp): Verdict =>
        r.code === 1 && line(r).length === 1 && pattern.test(r.stderr) && !r.stdout.includes('"msg":"serving"')
          ? { ok: true, detail: `exit 1: ${r.stderr.trim()}` }
          : {
              ok: false,
              detail: `exit ${r.code}, stdout ${JSON.stringify(r.stdout)}, stderr ${JSON.stringify(r.stderr)}`,
            };
      return {
        'surge-exits': exits(
          surge,
          /^eni-ipam agent: the state directory .* is in use by another eni-ipam agent \(pid \d+ on /,
        ),
        'stray-exits': exits(stray, /^eni-ipam agent: another process \(an eni-ipam agent\?\) serves /),
        'first-serves':
          alive && sameSocket && sameLock && held
            ? { ok: true, detail: `the first agent runs and answers on its socket (same inode), its lock kept` }
            : {
                ok: false,
                detail: `alive ${alive}, same socket ${sameSocket}, same lock ${sameLock}, answers ${!!held}`,
              },
        'pods-keep-addresses': kept
          ? { ok: true, detail: `${pods.length} pods of ${a.node} hold the addresses the agent lists` }
          : {
              ok: false,
              detail: `${pods.filter((h) => held?.get(h.containerId) !== h.ip).length} of ${pods.length} pods lost theirs`,
            },
        'journal-intact': intact
          ? { ok: true, detail: `the state on disk = the ${held!.size} allocations the agent serves` }
          : { ok: false, detail: `on disk ${onDisk?.size ?? 'unreadable'}, served ${held?.size ?? 'no answer'}` },
      };
    },
  },
  {
    name: 'agent-restart-without-state',
    group: 'Processes',
    summary: 'an agent whose pods hold IPs restarted without its state directory',
    cluster: { nodes: 3, replicas: 1 },
    faultMs: 15_000,
    recoverWithinMs: 60_000,
    fault: async (ctx) => {
      const a = ctx.c.agents[0]!;
      await ctx.c.killAgent(a);
      await ctx.c.startAgents([a], { wipeState: true });
      await sleep(ctx.faultMs);
    },
  },
];
