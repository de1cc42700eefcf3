import { sleepOn, type Cancel, type Clock } from '../../clock.js';
import type { Logger } from '../../observability/logger.js';
import {
  isEmptyPlan,
  type DatapathConfig,
  type DatapathPlan,
  type KernelView,
  type PodAddress,
  type PoolEni,
  type Problem,
  type ProblemKind,
} from './model.js';
import { linkLine, routeAddLine, routeDelLine, ruleAddLine, ruleDelLine, type BatchLine } from './iproute.js';
import { RT_PROTOCOL } from './model.js';
import type { KernelPort } from './kernel.js';
import type { DatapathMetrics } from './metrics.js';
import { planDatapath, ruleAddress } from './plan.js';

export interface NodeRoutingOptions {
  node: string;
  config: DatapathConfig;
  kernel: KernelPort;
  clock: Clock;
  /** How long an ADD waits for its ENI's device to appear (after an attach, the guest takes a moment). */
  deviceTimeoutMs: number;
  /** A full reconcile at least this often (it also heals what others changed, e.g. an ifdown that flushed a table). */
  resyncMs: number;
  logger: Logger;
  metrics: DatapathMetrics;
  /** The pool's InUse ENIs, or undefined while the agent has not seen its pool (then nothing is reconciled). */
  poolEnis(): PoolEni[] | undefined;
  /** The addresses pods hold now. */
  addresses(): PodAddress[];
}

export type DatapathFailure = ProblemKind | 'apply-failed' | 'read-failed' | 'released' | 'no-eni-request';

/** The datapath of a pod address could not be set up: which ENI, why, and whether trying again may help. */
export class DatapathError extends Error {
  constructor(
    readonly eniId: string,
    readonly reason: DatapathFailure,
    message: string,
    /** A device that has not appeared yet, or a kernel that did not answer: try again later. */
    readonly transient: boolean,
  ) {
    super(message);
  }
}

/** The plan's changes as ip -batch lines, in an order the kernel accepts: removals, links, routes, rules. */
export function batchLines(plan: DatapathPlan): BatchLine[] {
  return [
    ...plan.delRules.map((r) => ruleDelLine(r, ruleAddress(r))),
    ...plan.delRoutes.map(routeDelLine),
    ...plan.links.map(linkLine),
    // The gateway's link route comes first: the default route's next hop is checked against it.
    ...plan.addRoutes.map(routeAddLine),
    ...plan.addRules.map(ruleAddLine),
  ];
}

/** Problems that may pass by themselves: a device still to appear, an address the node took meanwhile (the retry gets another). */
const TRANSIENT = new Set<ProblemKind>(['device-missing', 'address-on-device', 'not-in-pool']);

/**
 * The node's datapath: serialized reads and changes of the kernel (one at a time), a full
 * reconcile at start, on every pool change and every `resyncMs` (sooner while an ENI's device is
 * missing), and the per-pod steps of ADD (`ensure`) and DEL (`forget`).
 */
export class NodeRouting {
  private tail: Promise<unknown> = Promise.resolve();
  private queued?: Promise<void>;
  private cancelResync?: Cancel;
  private retryMs = 0;
  private problems = new Map<string, ProblemKind>();
  private readyEnis = new Set<string>();
  private held: ReadonlySet<string> = new Set();
  private stopped = false;

  constructor(private readonly options: NodeRoutingOptions) {}

  get metrics(): DatapathMetrics {
    return this.options.metrics;
  }

  /** The ENIs whose device is up and route table set, as the last reconcile left them. */
  ready(): ReadonlySet<string> {
    return this.readyEnis;
  }

  /**
   * Addresses that are the node's, never handed to a pod: each ENI's primary address (an image
   * DHCPs it on a hot-plugged NIC, seconds after the device appears) and whatever else the
   * image's network scripts put on an ENI's device.
   */
  heldByNode(): ReadonlySet<string> {
    const primaries = (this.options.poolEnis() ?? []).flatMap((e) => (e.primaryIP ? [e.primaryIP] : []));
    return primaries.length ? new Set([...this.held, ...primaries]) : this.held;
  }

  private locked<T>(f: () => Promise<T>): Promise<T> {
    const run = this.tail.then(f, f);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Compares the kernel with the pool and the pods, and sets it right; never rejects (it logs). */
  reconcile(): Promise<void> {
    // One waiting is enough: it reads the kernel when its turn comes.
    if (this.queued) return this.queued;
    const run = this.locked(async () => {
      this.queued = undefined;
      if (!this.stopped) await this.reconcileNow();
    });
    this.queued = run;
    return run;
  }

  private schedule(): void {
    this.cancelResync?.();
    if (this.stopped) return;
    this.cancelResync = this.options.clock.after(this.retryMs || this.options.resyncMs, () => void this.reconcile());
  }

  private async read(): Promise<KernelView> {
    return this.options.kernel.read();
  }

  /** Runs the lines; counts and answers the failed ones (1-based line number -> the kernel's answer). */
  private async apply(lines: BatchLine[]): Promise<Map<number, string>> {
    if (!lines.length) return new Map();
    let failed: Map<number, string>;
    try {
      failed = await this.options.kernel.apply(lines.map((l) => l.text));
    } catch (e) {
      failed = new Map(lines.map((_, i) => [i + 1, (e as Error).message]));
    }
    lines.forEach((l, i) => {
      if (failed.has(i + 1) || failed.has(0))
        this.options.metrics.applyFailures.inc({ change: l.change, eni: l.eniId ?? '' });
      else this.options.metrics.changes.inc({ change: l.change });
    });
    return failed;
  }

  private async reconcileNow(): Promise<void> {
    const enis = this.options.poolEnis();
    if (!enis) return;
    const end = this.options.metrics.reconcile.startTimer();
    let view: KernelView;
    try {
      view = await this.read();
    } catch (e) {
      this.options.logger.error(
        { node: this.options.node, err: (e as Error).message },
        'cannot read the node’s datapath',
      );
      end({ result: 'failed' });
      this.retryMs = Math.min(this.options.resyncMs, Math.max(500, this.retryMs * 2));
      return this.schedule();
    }
    const plan = planDatapath({ enis, addresses: this.options.addresses() }, view, this.options.config);
    this.held = new Set(plan.deviceAddresses);
    const lines = batchLines(plan);
    const failed = await this.apply(lines);
    for (const [n, err] of failed) {
      const l = n > 0 ? lines[n - 1]! : undefined;
      this.options.logger.warn(
        {
          node: this.options.node,
          eni: l?.eniId,
          ip: l?.ip,
          change: l?.change,
          command: l ? `ip ${l.text}` : 'ip -batch',
          err,
        },
        'the kernel refused a datapath change; the next reconcile tries again',
      );
    }
    if (lines.length)
      this.options.logger.info(
        {
          node: this.options.node,
          links: plan.links.length,
          routesAdded: plan.addRoutes.length,
          routesRemoved: plan.delRoutes.length,
          rulesAdded: plan.addRules.length,
          rulesRemoved: plan.delRules.length,
          failed: failed.size,
        },
        'reconciled the node’s datapath',
      );
    const failedEnis = new Set(
      failed.has(0) ? lines.map((l) => l.eniId) : [...failed.keys()].map((n) => lines[n - 1]!.eniId),
    );
    this.noteEnis(plan, failedEnis);
    end({ result: failed.size ? 'partial' : 'ok' });
    // Devices appear a moment after an attach: look again soon while one is missing or a change failed.
    const again = failed.size > 0 || plan.problems.some((p) => p.kind === 'device-missing');
    this.retryMs = again ? Math.min(this.options.resyncMs, Math.max(500, this.retryMs * 2)) : 0;
    this.schedule();
  }

  /** Logs and counts what changed about each ENI: a problem that starts or ends, a device made ready. */
  private noteEnis(plan: DatapathPlan, failedEnis: ReadonlySet<string | undefined>): void {
    const now = new Map<string, ProblemKind>();
    for (const p of plan.problems) if (!p.ip) now.set(p.eniId, p.kind);
    for (const p of plan.problems) {
      if (p.ip || this.problems.get(p.eniId) === p.kind) continue;
      this.options.logger.warn({ node: this.options.node, eni: p.eniId, reason: p.kind }, p.message);
    }
    const ready = new Set(Object.keys(plan.ready).filter((id) => !failedEnis.has(id)));
    for (const id of ready)
      if (!this.readyEnis.has(id))
        this.options.logger.info(
          {
            node: this.options.node,
            eni: id,
            dev: plan.ready[id]!.dev,
            table: plan.ready[id]!.table,
            mtu: this.options.config.mtu,
          },
          'the ENI’s device is up and its route table set',
        );
    this.options.metrics.setProblems(now, this.problems);
    this.options.metrics.enisReady.set(ready.size);
    this.problems = now;
    this.readyEnis = ready;
  }

  /**
   * Makes sure the pod address's ENI has its device up and its table, and the address its two
   * rules, before an ADD answers: waits up to `deviceTimeoutMs` for a device that is not there
   * yet. On failure nothing of the address is left set, and the DatapathError says which ENI and why.
   */
  async ensure(a: PodAddress): Promise<void> {
    const end = this.options.metrics.podSetup.startTimer();
    const { clock } = this.options;
    const deadline = clock.now() + this.options.deviceTimeoutMs;
    try {
      for (let wait = 50; ; wait = Math.min(500, wait * 2)) {
        const problem = await this.locked(() => this.ensureNow(a));
        if (!problem) return;
        const left = deadline - clock.now();
        if (problem.kind !== 'device-missing' || left <= 0) {
          const waited = problem.kind === 'device-missing' ? ` (waited ${this.options.deviceTimeoutMs / 1000} s)` : '';
          throw new DatapathError(a.eniId, problem.kind, `${problem.message}${waited}`, TRANSIENT.has(problem.kind));
        }
        await sleepOn(clock, Math.min(wait, left));
      }
    } finally {
      end();
    }
  }

  /** One try of ensure, under the lock: undefined once set, or the problem in the way. */
  private async ensureNow(a: PodAddress): Promise<Problem | undefined> {
    // A DEL released it meanwhile (the runtime gave up on the ADD): nothing more to set for it.
    if (!this.options.addresses().some((x) => x.ip === a.ip))
      throw new DatapathError(a.eniId, 'released', `${a.ip} (ENI ${a.eniId}) was released while its ADD waited`, true);
    const enis = this.options.poolEnis();
    if (!enis)
      return { kind: 'not-in-pool', eniId: a.eniId, ip: a.ip, message: 'the agent has not seen its ENIPool yet' };
    let view: KernelView;
    try {
      view = await this.read();
    } catch (e) {
      throw new DatapathError(
        a.eniId,
        'read-failed',
        `cannot read the node's datapath for ${a.ip} (ENI ${a.eniId}): ${(e as Error).message}`,
        true,
      );
    }
    const plan = planDatapath({ enis, addresses: this.options.addresses(), fresh: [a.ip] }, view, this.options.config, {
      enis: [a.eniId],
      ips: [a.ip],
    });
    this.held = new Set(plan.deviceAddresses);
    const problem = plan.problems.find((p) => p.ip === a.ip) ?? plan.problems.find((p) => p.eniId === a.eniId);
    if (problem) return problem;
    if (isEmptyPlan(plan)) return undefined;
    const lines = batchLines(plan);
    const failed = await this.apply(lines);
    if (!failed.size) return undefined;
    await this.takeBack(plan).catch((e: unknown) =>
      this.options.logger.warn(
        { node: this.options.node, eni: a.eniId, ip: a.ip, err: (e as Error).message },
        'cannot take back what a failed ADD set; the next reconcile removes it',
      ),
    );
    const [n, err] = [...failed][0]!;
    const what = n > 0 ? `\`ip ${lines[n - 1]!.text}\` failed` : 'ip -batch stopped';
    throw new DatapathError(a.eniId, 'apply-failed', `cannot set up ${a.ip} on ENI ${a.eniId}: ${what}: ${err}`, false);
  }

  /**
   * Nothing half-set after a failed ADD: what the kernel holds now (whichever of the lines ran)
   * of the rules the plan added goes again, and so do the routes of a table the plan wrote only
   * partly.
   */
  private async takeBack(plan: DatapathPlan): Promise<void> {
    const view = await this.read();
    const key = (r: object) => JSON.stringify(r);
    const added = new Set(plan.addRules.map(({ ip: _ip, eniId: _eni, ...r }) => key(r)));
    const undo: BatchLine[] = view.rules.filter((r) => added.has(key(r))).map((r) => ruleDelLine(r, ruleAddress(r)));
    const tables = new Set(plan.addRoutes.map((r) => r.table));
    for (const table of tables) {
      const wanted = plan.addRoutes.filter((r) => r.table === table).map(({ eniId: _eni, ...r }) => key(r));
      const ours = view.routes.filter((r) => r.table === table && r.protocol === RT_PROTOCOL);
      const have = new Set(ours.map(key));
      if (!wanted.every((w) => have.has(w))) undo.push(...ours.map(routeDelLine));
    }
    await this.apply(undo);
  }

  /** Takes away the rules of released addresses (DEL); logs what the kernel refuses, never throws. */
  forget(ips: readonly string[]): Promise<void> {
    if (!ips.length) return Promise.resolve();
    return this.locked(async () => {
      try {
        const view = await this.read();
        const plan = planDatapath(
          { enis: this.options.poolEnis() ?? [], addresses: this.options.addresses() },
          view,
          this.options.config,
          { enis: [], ips },
        );
        const lines = batchLines(plan);
        const failed = await this.apply(lines);
        for (const [n, err] of failed)
          this.options.logger.warn(
            { node: this.options.node, ip: lines[n - 1]?.ip, command: `ip ${lines[n - 1]?.text ?? '-batch'}`, err },
            'cannot remove the rule of a released address; the next reconcile tries again',
          );
      } catch (e) {
        this.options.logger.warn(
          { node: this.options.node, ips, err: (e as Error).message },
          'cannot remove the rules of released addresses; the next reconcile tries again',
        );
      }
    });
  }

  /** Starts the periodic reconcile (the first one is the caller's). */
  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelResync?.();
    await this.tail;
  }
}
