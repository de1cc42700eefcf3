import { ChaosCluster, type AddNodesOptions, type ClusterOptions } from './cluster.js';
import {
  Checker,
  INVARIANTS,
  callsIn,
  deposedVerdict,
  leakVerdict,
  quotaVerdict,
  tokenVerdict,
  waitRecovered,
  type InvariantName,
  type Verdict,
} from './invariants.js';
import { Workload } from './workload.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ScenarioContext {
  c: ChaosCluster;
  /** The fault's length (shorter in the quick version). */
  faultMs: number;
  /** Registers nodes held back at start and starts their agents (a scale-up during the fault). */
  addNodes(n: number, opts?: AddNodesOptions): Promise<void>;
  /** Stops the pods coming and going (for a check of a settled state before the fault returns). */
  stopWorkload(): Promise<void>;
  /** The pods' addresses as the container runtime knows them. */
  workload: Workload;
}

export interface Scenario {
  name: string;
  group: 'ECS' | 'VPC' | 'Kubernetes' | 'Processes';
  summary: string;
  cluster: ClusterOptions & { heldBack?: number };
  faultMs: number;
  quickFaultMs?: number;
  /** The stated time within which every pool is Ready again once the fault ends. */
  recoverWithinMs: number;
  /** Pods come and go during the fault (default true). */
  workload?: boolean;
  /** Injects the fault, holds it for ctx.faultMs, clears it; may answer checks of its own. */
  fault(ctx: ScenarioContext): Promise<Record<string, Verdict> | void>;
}

export interface ScenarioResult {
  scenario: string;
  group: string;
  summary: string;
  command: string;
  quick: boolean;
  at: string;
  faultMs: number;
  recoveryMs?: number;
  recoverWithinMs: number;
  /** Calls the operators made during the fault, per action. */
  callsDuringFault: Record<string, number>;
  verdicts: Record<string, Verdict>;
  ok: boolean;
  workload?: { allocations: number; releases: number; failures: number };
  error?: string;
}

const OK = (detail: string): Verdict => ({ ok: true, detail });
const FAIL = (detail: string): Verdict => ({ ok: false, detail });

/** Starts a cluster, warms it up, injects the scenario's fault and checks every invariant. */
export async function runScenario(
  s: Scenario,
  o: { quick: boolean; log?: (m: string) => void },
): Promise<ScenarioResult> {
  return (await runSeries([s], o))[0]!;
}

/**
 * Runs scenarios one after another on one cluster (the first one's): each fault, then its
 * recovery and its checks. The short versions in `npm test` share a cluster this way.
 */
export async function runSeries(
  list: Scenario[],
  o: {
    quick: boolean;
    faultMs?: number;
    warmMs?: number;
    cluster?: Partial<Scenario['cluster']>;
    log?: (m: string) => void;
  },
): Promise<ScenarioResult[]> {
  const log = o.log ?? (() => {});
  const first = { ...list[0]!, cluster: { ...list[0]!.cluster, ...o.cluster } };
  const heldBack = o.cluster?.heldBack ?? list.reduce((n, s) => n + (s.cluster.heldBack ?? 0), 0);
  const results: ScenarioResult[] = [];
  let c: ChaosCluster | undefined;
  let w: Workload | undefined;
  let checker: Checker | undefined;
  try {
    c = await ChaosCluster.start({ ...first.cluster, nodes: first.cluster.nodes + heldBack, heldBack });
    w = new Workload(c.agents, (node, name, ip) => c!.recordPod(node, name, ip));
    checker = new Checker(c, w);
    log(`${first.name}: ${c.nodes.length} nodes, ${c.operators.length} operators; warming up`);
    if (c.operators.length && c.agents.some((a) => a.child || a.cilium)) {
      const warm = await waitRecovered(c, 90_000);
      if (warm === undefined)
        throw new Error(
          `the cluster was not Ready within 90 s before the fault (${c.readyPools()}/${c.nodes.length} pools Ready)`,
        );
    }
    checker.start();
    for (const s of list) results.push(await phase(c, w, checker, s, { ...o, log }));
  } catch (e) {
    for (const s of list.slice(results.length))
      results.push({ ...emptyResult(s, o.quick, o.faultMs ?? s.faultMs), error: (e as Error).message });
    await w?.stop();
  } finally {
    await checker?.stop();
    await c?.stop();
  }
  return results;
}

function emptyResult(s: Scenario, quick: boolean, faultMs: number): ScenarioResult {
  return {
    scenario: s.name,
    group: s.group,
    summary: s.summary,
    command: `npm run chaos -- ${s.name}${quick ? ' --quick' : ''}`,
    quick,
    at: new Date().toISOString(),
    faultMs,
    recoverWithinMs: s.recoverWithinMs,
    callsDuringFault: {},
    verdicts: {},
    ok: false,
  };
}

async function phase(
  c: ChaosCluster,
  w: Workload,
  checker: Checker,
  s: Scenario,
  o: { quick: boolean; faultMs?: number; warmMs?: number; log: (m: string) => void },
): Promise<ScenarioResult> {
  const faultMs = o.faultMs ?? (o.quick ? (s.quickFaultMs ?? Math.min(s.faultMs, 10_000)) : s.faultMs);
  const result = emptyResult(s, o.quick, faultMs);
  checker.reset();
  if (s.workload !== false) {
    w.start();
    await sleep(o.warmMs ?? 4000);
  }
  const t0 = Date.now();
  const ctx: ScenarioContext = {
    c,
    faultMs,
    addNodes: (n, opts) => c.addHeldBackNodes(n, opts),
    stopWorkload: () => w.stop(),
    workload: w,
  };
  o.log(`${s.name}: fault for ${(faultMs / 1000).toFixed(0)} s`);
  const own = (await s.fault(ctx)) ?? {};
  const t1 = Date.now();
  result.faultMs = t1 - t0;
  await w.stop();
  o.log(`${s.name}: fault over; waiting for recovery`);
  result.recoveryMs = await waitRecovered(c, s.recoverWithinMs);
  result.callsDuringFault = callsIn(c, c.operators, t0, t1);
  const v: Record<string, Verdict> = {};
  v.recovers =
    result.recoveryMs !== undefined
      ? OK(`after ${(result.recoveryMs / 1000).toFixed(1)} s`)
      : FAIL(
          `not within ${(s.recoverWithinMs / 1000).toFixed(0)} s: ${c.readyPools()}/${c.nodes.length} pools Ready, leader ${c.leader()?.podName ?? 'none'}`,
        );
  // GC deletes a leaked ENI once it is older than its minimum age (10 s), at its next pass (every 10 s).
  v['no-leak'] = await leakVerdict(c, 10_000 + 10_000 + 15_000);
  await checker.settle();
  for (const k of ['one-pod-per-ip', 'one-eni-per-ip', 'no-release-in-use'] as const) {
    const list = checker.violations[k];
    v[k] = list.length
      ? FAIL(`${list.length} seen, first: ${list.slice(0, 3).join('; ')}`)
      : OK(`${checker.polls} polls`);
  }
  v['within-quota'] = quotaVerdict(c, t0, t1);
  v['create-tokens'] = tokenVerdict(c, t0);
  v['silent-once-deposed'] = deposedVerdict(c);
  const cilium = c.agents.flatMap((a) => (a.cilium ? [a.cilium] : []));
  if (cilium.length) {
    // The agent fails an allocation whose ENI is not in status: no address may be pooled before its ENI is listed.
    const early = cilium.flatMap((a) => [...a.unlisted].map((ip) => `${a.name}/${ip}`));
    v['eni-listed-first'] = early.length
      ? FAIL(`${early.length} pooled before their ENI was in status, first: ${early.slice(0, 3).join('; ')}`)
      : OK(`${cilium.length} cilium-agents, every pooled address's ENI in status first`);
  }
  result.verdicts = { ...v, ...own };
  result.workload = { allocations: w.allocations, releases: w.releases, failures: w.failures };
  result.ok = Object.values(result.verdicts).every((x) => x.ok);
  return result;
}

export const invariantNames = Object.keys(INVARIANTS) as InvariantName[];
