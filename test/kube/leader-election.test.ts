import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api, KubeConfig, V1MicroTime } from '@kubernetes/client-node';
import { LeaderElector } from '../../src/kube/leader-election.js';
import { silentLogger, type Logger } from '../../src/observability/logger.js';
import { isConflict } from '../../src/kube/errors.js';
import { capturingLogger } from '../helpers/cloud.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { eventually, sleep } from '../helpers/ecs.js';
import { startFaultProxy } from '../../testbed/harness/netfault.js';
import { http, kube } from '../helpers/kube.js';

let emu: ControlPlane;
let kc: KubeConfig;
const electors: LeaderElector[] = [];
beforeEach(async () => {
  ({ emu, kc } = await kube());
});
afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.stop()));
  await emu.close();
});

function candidate(identity: string, events: string[] = [], via: KubeConfig = kc, logger: Logger = silentLogger()) {
  const e = new LeaderElector({
    kc: via,
    namespace: 'kube-system',
    name: 'eni-ipam',
    identity,
    leaseDurationSeconds: 2,
    renewDeadlineSeconds: 1,
    retryPeriodSeconds: RETRY_MS / 1000,
    logger,
    onStartedLeading: () => events.push(`${identity} leads`),
    onStoppedLeading: () => events.push(`${identity} stops`),
  });
  electors.push(e);
  return e;
}

/** Candidate a leading, then candidate b started; both write to one list of events. */
async function leaderAndStandby() {
  const events: string[] = [];
  const a = candidate('a', events);
  const b = candidate('b', events);
  a.start();
  await eventually(() => a.leader);
  b.start();
  return { a, b, events };
}

const RETRY_MS = 200;

const lease = () =>
  kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'eni-ipam', namespace: 'kube-system' });

/** Writes another holder into the Lease, as a replica's acquisition or a forced chart upgrade would; answers when. */
async function rewriteLease(holder: string, renewTime: number): Promise<number> {
  const api = kc.makeApiClient(CoordinationV1Api);
  for (;;) {
    const current = await lease();
    try {
      await api.replaceNamespacedLease({
        name: 'eni-ipam',
        namespace: 'kube-system',
        body: { ...current, spec: { ...current.spec, holderIdentity: holder, renewTime: new V1MicroTime(renewTime) } },
      });
      return Date.now();
    } catch (e) {
      if (!isConflict(e)) throw e; // the leader renewed between our read and our write: again
    }
  }
}

/**
 * Every Lease read of an elector as it saw it: the holder, when it arrived, and whether the
 * elector still claimed a fresh lease once it had handled that answer (before any timer or I/O).
 */
function watchReads(e: LeaderElector) {
  const reads: Array<{ holder?: string; at: number; freshAfter: boolean }> = [];
  const api = (e as unknown as { api: CoordinationV1Api }).api;
  const read = api.readNamespacedLease.bind(api);
  api.readNamespacedLease = (async (...args: Parameters<typeof read>) => {
    const l = await read(...args);
    const at = Date.now();
    setImmediate(() => reads.push({ holder: l.spec?.holderIdentity, at, freshAfter: e.holdsFreshLease() }));
    return l;
  }) as typeof api.readNamespacedLease;
  return reads;
}

/** A candidate leading, with its events, its Lease reads, its log lines and when it stopped leading. */
async function watchedLeader() {
  const events: string[] = [];
  const { logger, lines } = capturingLogger();
  const a = candidate('a', events, kc, logger);
  const reads = watchReads(a);
  let stoppedAt = 0;
  const options = (a as unknown as { options: { onStoppedLeading: () => void } }).options;
  const inner = options.onStoppedLeading;
  options.onStoppedLeading = () => {
    stoppedAt ||= Date.now();
    inner();
  };
  a.start();
  await eventually(() => a.leader);
  await sleep(3 * RETRY_MS); // a few renews
  /** When it stopped leading (within 3 s), once the reads it had handled by then are recorded. */
  const stopped = async () => {
    const at = await eventually(() => stoppedAt, 3000, 5);
    // Reads are recorded on the turn after they are handled: let the ones up to the step-down land.
    await eventually(() => reads.some((r) => r.at >= at - 50), 2000, 5).catch(() => undefined);
    await sleep(20);
    return at;
  };
  return { a, events, reads, lines, stopped };
}

const logged = (lines: string[], reason: string) =>
  lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.reason === reason);

describe('leader election on a Lease', () => {
  it('elects one of two candidates and writes MicroTime timestamps', async () => {
    const { a, b, events } = await leaderAndStandby();
    await sleep(600);
    expect([a.leader, b.leader]).toEqual([true, false]);
    const l = await lease();
    expect(l.spec?.holderIdentity).toBe('a');
    expect(String(l.spec?.renewTime)).toMatch(/\.\d{6}Z$/);
    expect(events).toEqual(['a leads']);
  });

  it('hands over at once when the leader stops, with a lease transition', async () => {
    const { a, b, events } = await leaderAndStandby();
    await a.stop();
    const t0 = Date.now();
    await eventually(() => b.leader, 3000);
    // Released: no need to wait out the 2 s lease.
    expect(Date.now() - t0).toBeLessThan(1400);
    expect((await lease()).spec?.leaseTransitions).toBe(1);
    expect(events).toEqual(['a leads', 'a stops', 'b leads']);
  });

  it('takes over within the lease duration when the leader vanishes without a word', async () => {
    const a = candidate('a');
    a.start();
    await eventually(() => a.leader);
    // Simulate a crash: a stops renewing but keeps the lease.
    (a as unknown as { running: boolean }).running = false;
    const b = candidate('b');
    const t0 = Date.now();
    b.start();
    await eventually(() => b.leader, 5000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(Date.now() - t0).toBeLessThan(5000); // one lease (2 s) plus retries, with room for a loaded machine
  });

  it('steps down when it cannot renew in time', async () => {
    const events: string[] = [];
    const a = candidate('a', events);
    a.start();
    await eventually(() => a.leader);
    emu.setFaultRules([{ action: 'respond', code: 500 }]);
    await eventually(() => !a.leader, 3000);
    emu.clearFaultRules();
    expect(events).toEqual(['a leads', 'a stops']);
    await eventually(() => a.leader, 3000);
  });

  it('is refused a lease written with 3-digit fractions, as the API server parses MicroTime', async () => {
    const r = await http(emu, 'POST', '/apis/coordination.k8s.io/v1/namespaces/default/leases', {
      metadata: { name: 'x' },
      spec: { holderIdentity: 'x', renewTime: '2026-01-01T00:00:00.123Z' },
    });
    expect(r.status).toBe(400);
    expect(r.body.message).toContain(
      'cannot be handled as a Lease: parsing time "2026-01-01T00:00:00.123Z" as "2006-01-02T15:04:05.000000Z07:00"',
    );
  });

  it('steps down within the renew deadline when the API server stops answering, and never holds a stale lease', async () => {
    const target = new URL(emu.url);
    const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
    const viaProxy = new KubeConfig();
    viaProxy.loadFromString(emu.kubeconfig.replace(emu.url, `https://${proxy.host}:${proxy.port}`));
    const events: string[] = [];
    const a = candidate('a', events, viaProxy);
    a.start();
    await eventually(() => a.leader);
    const b = candidate('b', events);
    b.start();
    await sleep(500);
    await proxy.setMode('blackhole');
    const cut = Date.now();
    // Every lease read and write now hangs: the leader must still step down on time (1 s).
    await eventually(() => !a.leader, 3000, 10);
    const steppedDown = Date.now() - cut;
    expect(steppedDown).toBeLessThan(1500);
    expect(a.holdsFreshLease()).toBe(false);
    await eventually(() => b.leader, 5000);
    // The follower took over only once the lease (2 s) had run out: never two at once.
    expect(Date.now() - cut).toBeGreaterThanOrEqual(1400);
    expect(events.slice(0, 3)).toEqual(['a leads', 'a stops', 'b leads']);
    expect(a.holdsFreshLease()).toBe(false);
    await proxy.close();
  });

  it.each([
    ['a fresh renewTime', 0],
    ['a renewTime an hour old', 3_600_000],
  ])(
    'stops leading the moment it reads another holder in the Lease (with %s), not at its renew deadline',
    async (_, age) => {
      const { a, events, reads, lines, stopped } = await watchedLeader();
      const writtenAt = await rewriteLease('intruder', Date.now() - age);
      const stoppedAt = await stopped();
      expect(a.holdsFreshLease()).toBe(false);
      expect(events).toEqual(['a leads', 'a stops']);
      // pino writes a turn later.
      const said = () => [...logged(lines, 'other-holder'), ...logged(lines, 'conflict')];
      await eventually(() => said().length > 0, 5000, 5);
      if (logged(lines, 'conflict').length) {
        // The rewrite landed between its read of the Lease and its renew: it lost the update, and
        // stopped at that, as at once.
        expect(stoppedAt - writtenAt).toBeLessThan(RETRY_MS + 300);
        expect(said()).toHaveLength(1);
      } else {
        // It reads the Lease every retry period: it learns within one, and acts on that read.
        const seen = reads.find((r) => r.holder === 'intruder')!;
        expect(seen.at - writtenAt).toBeLessThan(RETRY_MS + 300);
        expect(stoppedAt - seen.at).toBeLessThan(50);
        expect(seen.freshAfter).toBe(false);
        expect(logged(lines, 'other-holder')).toEqual([
          expect.objectContaining({
            level: 'warn',
            lease: 'eni-ipam',
            identity: 'a',
            holder: 'intruder',
            msg: 'lost leadership: the lease is held by another holder',
          }),
        ]);
      }
      // It does not take the lease back while the other holder's lease runs.
      await sleep(800);
      expect(a.leader).toBe(false);
      expect((await lease()).spec?.holderIdentity).toBe('intruder');
    },
  );

  it('stops leading at once when its renew loses an update conflict on the Lease', async () => {
    const { a, events, lines, stopped } = await watchedLeader();
    emu.setFaultRules([{ verbs: ['update'], resource: 'leases', action: 'respond', code: 409, times: 1 }]);
    const faultAt = Date.now();
    const stoppedAt = await stopped();
    // The next renew (within one retry period) meets the conflict; the renew deadline is 1 s.
    expect(stoppedAt - faultAt).toBeLessThan(RETRY_MS + 300);
    expect(a.holdsFreshLease()).toBe(false);
    expect(events.slice(0, 2)).toEqual(['a leads', 'a stops']);
    expect(logged(lines, 'conflict')).toEqual([
      expect.objectContaining({
        level: 'warn',
        identity: 'a',
        msg: 'lost leadership: the lease update lost a conflict',
      }),
    ]);
  });

  it('keeps leading through transient lease errors until its renew deadline', async () => {
    const { a, events, lines, stopped } = await watchedLeader();
    emu.setFaultRules([{ verbs: ['update'], resource: 'leases', action: 'respond', code: 503 }]);
    const faultAt = Date.now();
    const stoppedAt = await stopped();
    emu.clearFaultRules();
    // Its last renew was at most one retry period before the fault; the deadline is 1 s after it.
    expect(stoppedAt - faultAt).toBeGreaterThanOrEqual(1000 - RETRY_MS - 100);
    expect(stoppedAt - faultAt).toBeLessThan(1000 + 300);
    expect(events.slice(0, 2)).toEqual(['a leads', 'a stops']);
    expect(logged(lines, 'renew-deadline')).toHaveLength(1);
    expect(logged(lines, 'conflict')).toHaveLength(0);
    await eventually(() => a.leader, 3000);
  });
});
