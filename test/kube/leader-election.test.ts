import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api, KubeConfig } from '@kubernetes/client-node';
import { LeaderElector } from '../../src/kube/leader-election.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { KubeEmulator } from '../../src/sim/kube/index.js';
import { eventually, sleep } from '../helpers/ecs.js';
import { startFaultProxy } from '../../src/sim/netfault.js';
import { http, kube } from '../helpers/kube.js';

let emu: KubeEmulator;
let kc: KubeConfig;
const electors: LeaderElector[] = [];
beforeEach(async () => {
  ({ emu, kc } = await kube());
});
afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.stop()));
  await emu.close();
});

function candidate(identity: string, events: string[] = [], via: KubeConfig = kc) {
  const e = new LeaderElector({
    kc: via,
    namespace: 'kube-system',
    name: 'eni-ipam',
    identity,
    leaseDurationSeconds: 1.5,
    renewDeadlineSeconds: 1,
    retryPeriodSeconds: 0.2,
    logger: silentLogger(),
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

const lease = () =>
  kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'eni-ipam', namespace: 'kube-system' });

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
    // Released: no need to wait out the 1.5 s lease.
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
    expect(Date.now() - t0).toBeLessThan(5000); // one lease (1.5 s) plus retries, with room for a loaded machine
  });

  it('steps down when it cannot renew in time', async () => {
    const events: string[] = [];
    const a = candidate('a', events);
    a.start();
    await eventually(() => a.leader);
    emu.setFaults({ errors: { code: 500, rate: 1 } });
    await eventually(() => !a.leader, 3000);
    emu.setFaults({});
    expect(events).toEqual(['a leads', 'a stops']);
    await eventually(() => a.leader, 3000);
  });

  it('is refused a lease written with 3-digit fractions, as the API server parses MicroTime', async () => {
    const r = await http(emu, 'POST', '/apis/coordination.k8s.io/v1/namespaces/default/leases', {
      metadata: { name: 'x' },
      spec: { holderIdentity: 'x', renewTime: '2026-01-01T00:00:00.123Z' },
    });
    expect(r.status).toBe(422);
    expect(r.body.message).toContain('spec.renewTime: Invalid value: "2026-01-01T00:00:00.123Z": must be a MicroTime');
  });

  it('steps down within the renew deadline when the API server stops answering, and never holds a stale lease', async () => {
    const target = new URL(emu.url);
    const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
    const viaProxy = new KubeConfig();
    viaProxy.loadFromString(emu.kubeconfig.replace(emu.url, proxy.url));
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
    // The follower took over only once the lease (1.5 s) had run out: never two at once.
    expect(Date.now() - cut).toBeGreaterThanOrEqual(1400);
    expect(events.slice(0, 3)).toEqual(['a leads', 'a stops', 'b leads']);
    expect(a.holdsFreshLease()).toBe(false);
    await proxy.close();
  });
});
