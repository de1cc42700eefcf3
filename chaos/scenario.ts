import { ChaosCluster, type ClusterOptions } from './cluster.js';
import { Checker, INVARIANTS, callsIn, leakVerdict, quotaVerdict, tokenVerdict, waitRecovered, type InvariantName, type Verdict } from './invariants.js';
import { Workload } from './workload.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ScenarioContext {
  c: ChaosCluster;
  /** The fault's length (shorter in the quick version). */
  faultMs: number;
  /** Registers nodes held back at start and starts their agents (a scale-up during the fault). */
  addNodes(n: number): Promise<void>;
}

export interface Scenario {
  name: string;
  group: 'ECS' | 'Kubernetes' | 'Processes';
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
export async function runScenario(s: Scenario, o: { quick: boolean; log?: (m: string) => void }): Promise<ScenarioResult> {
  const log = o.log ?? (() => {});
  const faultMs = o.quick ? (s.quickFaultMs ?? Math.min(s.faultMs, 10_000)) : s.faultMs;
  const result: ScenarioResult = {
    scenario: s.name,
    group: s.group,
    summary: s.summary,
    command: `npm run chaos -- ${s.name}${o.quick ? ' --quick' : ''}`,
    quick: o.quick,
    at: new Date().toISOString(),
    faultMs,
    recoverWithinMs: s.recoverWithinMs,
    callsDuringFault: {},
    verdicts: {},
    ok: false,
  };
  const heldBack = s.cluster.heldBack ?? 0;
  const c = await ChaosCluster.start({ ...s.cluster, nodes: s.cluster.nodes + heldBack, heldBack } as ClusterOptions);
  const w = new Workload(c.agents);
  const checker = new Checker(c, w);
  try {
    log(`${s.name}: ${c.nodes.length} nodes, ${c.operators.length} operators; warming up`);
    if (c.operators.length && c.agents.some((a) => a.child)) {
      const warm = await waitRecovered(c, 90_000);
      if (warm === undefined) throw new Error(`the cluster was not Ready within 90 s before the fault (${c.readyPools()}/${c.nodes.length} pools Ready)`);
    }
    checker.start();
    if (s.workload !== false) {
      w.start();
      await sleep(4000);
    }
    const t0 = Date.now();
    const ctx: ScenarioContext = { c, faultMs, addNodes: (n) => c.addHeldBackNodes(n) };
    log(`${s.name}: fault for ${(faultMs / 1000).toFixed(0)} s`);
    const own = (await s.fault(ctx)) ?? {};
    const t1 = Date.now();
    result.faultMs = t1 - t0;
    await w.stop();
    log(`${s.name}: fault over; waiting for recovery`);
    result.recoveryMs = await waitRecovered(c, s.recoverWithinMs);
    const keys = c.operators.map((op) => op.accessKeyId);
    result.callsDuringFault = callsIn(c, keys, t0, t1);
    const v: Record<string, Verdict> = {};
    v.recovers = result.recoveryMs !== undefined ? OK(`after ${(result.recoveryMs / 1000).toFixed(1)} s`) : FAIL(`not within ${(s.recoverWithinMs / 1000).toFixed(0)} s: ${c.readyPools()}/${c.nodes.length} pools Ready, leader ${c.leader()?.identity ?? 'none'}`);
    // GC deletes a leaked ENI once it is older than its minimum age, at its next pass.
    v['no-leak'] = await leakVerdict(c, 10_000 + 10_000 + 15_000);
    await checker.stop();
    for (const k of ['one-pod-per-ip', 'one-eni-per-ip', 'no-release-in-use'] as const) {
      const list = checker.violations[k];
      v[k] = list.length ? FAIL(`${list.length} seen, first: ${list.slice(0, 3).join('; ')}`) : OK(`${checker.polls} polls`);
    }
    v['within-quota'] = quotaVerdict(c, t0, t1);
    v['create-tokens'] = tokenVerdict(c, 0);
    result.verdicts = { ...v, ...own };
    result.workload = { allocations: w.allocations, releases: w.releases, failures: w.failures };
    result.ok = Object.values(result.verdicts).every((x) => x.ok);
  } catch (e) {
    result.error = (e as Error).message;
    await w.stop();
    await checker.stop();
  } finally {
    await c.stop();
  }
  return result;
}

export const invariantNames = Object.keys(INVARIANTS) as InvariantName[];
