/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type CoreV1Event } from '@kubernetes/client-node';
import fc from 'fast-check';
import { PodEventGate, PodEvents, type PodEventPolicy } from '../../src/agent/pod-events.js';
import { systemClock } from '../../src/clock.js';
import { silentLogger } from '../../src/observability/logger.js';
import { agentClient } from '../../src/agent/client.js';
import { eventually, sleep } from '../helpers/ecs.js';
import { agentOnSocket, kubectlFor, type Kubectl } from '../helpers/kube.js';
import { ipamConf } from '../helpers/cni-call.js';

/* Every pod that waits for an address says why where users look (`kubectl describe pod`), without an Event storm. */

const POLICY: PodEventPolicy = { intervalMs: 1_000, changedGapMs: 200, burst: 5, perSecond: 2, maxPods: 50 };

describe('PodEventGate', () => {
  const calls = fc.array(
    fc.record({
      pod: fc.integer({ min: 0, max: 6 }),
      message: fc.constantFrom('a', 'b'),
      dt: fc.integer({ min: 0, max: 700 }),
    }),
    { maxLength: 200 },
  );

  it('per pod: a reason once per interval, a new one not sooner than the gap; node-wide: within the bucket', () => {
    fc.assert(
      fc.property(calls, (seq) => {
        const gate = new PodEventGate(POLICY);
        const last = new Map<number, { at: number; message: string }>();
        const admitted: number[] = [];
        let now = 0;
        for (const c of seq) {
          now += c.dt;
          if (!gate.admit(`ns/p${c.pod}`, c.message, now)) continue;
          const prev = last.get(c.pod);
          if (prev)
            expect(now - prev.at).toBeGreaterThanOrEqual(
              prev.message === c.message ? POLICY.intervalMs : POLICY.changedGapMs,
            );
          last.set(c.pod, { at: now, message: c.message });
          admitted.push(now);
        }
        // Any window of T ms holds at most burst + T × rate writes.
        for (let i = 0; i < admitted.length; i++)
          for (let j = i; j < admitted.length; j++)
            expect(j - i + 1).toBeLessThanOrEqual(
              POLICY.burst + ((admitted[j]! - admitted[i]!) * POLICY.perSecond) / 1000,
            );
      }),
    );
  });

  it('says a pod’s first wait at once while the bucket has room, and a pod that got its address is told only if it was told it waited', () => {
    const gate = new PodEventGate(POLICY);
    expect(gate.admit('ns/a', 'empty', 0)).toBe(true);
    expect(gate.admit('ns/b', 'empty', 0)).toBe(true);
    expect(gate.admit('ns/a', 'empty', 999)).toBe(false);
    expect(gate.admit('ns/a', 'empty', 1_000)).toBe(true);
    expect(gate.served('ns/a', 3_000)).toBe(0); // since its first wait
    expect(gate.served('ns/a', 3_000)).toBeUndefined(); // forgotten once told
    expect(gate.served('ns/never-waited', 3_000)).toBeUndefined();
    // Remembers a bounded number of pods: the longest unheard-of goes.
    const small = new PodEventGate({ ...POLICY, maxPods: 2, burst: 100 });
    for (const p of ['x', 'y', 'z']) small.admit(p, 'm', 0);
    expect(small.admit('x', 'm', 1)).toBe(true); // x was dropped: said again
    expect(small.admit('z', 'm', 1)).toBe(false);
  });

  it('a wall clock stepped back an hour silences nothing: the bucket and the pods go on as before', () => {
    const gate = new PodEventGate(POLICY);
    const hour = 3_600_000;
    expect(gate.admit('ns/a', 'WaitingForPodIP', 10 * hour)).toBe(true);
    // NTP steps the clock back: the next pods and the next retries are told as if no time had passed.
    expect(gate.admit('ns/b', 'WaitingForPodIP', 9 * hour)).toBe(true);
    expect(gate.admit('ns/a', 'WaitingForPodIP', 9 * hour)).toBe(true);
    expect(gate.admit('ns/a', 'WaitingForPodIP', 9 * hour + 10)).toBe(false);
    expect(gate.served('ns/a', 9 * hour + 20)).toBe(9 * hour);
  });
});

/** The committed name, a link to the static binary `npm run build` writes. */
const PLUGIN = fileURLToPath(new URL('../../bin/eni-ipam-cni', import.meta.url));
const IPS = ['10.5.0.1', '10.5.0.2'];
let env: Awaited<ReturnType<typeof agentOnSocket>>;
let core: CoreV1Api;
let kubectl: Kubectl;

/** A CNI ADD through the real plugin, with the pod's variables as containerd sets them (its UID too). */
function add(container: string, pod: { namespace: string; name: string; uid?: string }) {
  const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=${pod.namespace};K8S_POD_NAME=${pod.name}${pod.uid ? `;K8S_POD_UID=${pod.uid}` : ''}`;
  return new Promise<{ code: number; out: any }>((resolve) => {
    const child = execFile(
      PLUGIN,
      [],
      {
        env: {
          CNI_COMMAND: 'ADD',
          CNI_CONTAINERID: container,
          CNI_NETNS: `/var/run/netns/${container}`,
          CNI_IFNAME: 'eth0',
          CNI_PATH: '/opt/cni/bin',
          CNI_ARGS: args,
        },
        timeout: 30_000,
      },
      (err, stdout) =>
        resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, out: JSON.parse(stdout) }),
    );
    child.stdin!.end(ipamConf(env.socket));
  });
}

async function pod(namespace: string, name: string): Promise<string> {
  const made = await core.createNamespacedPod({
    namespace,
    body: { metadata: { name }, spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'x' }] } },
  });
  return made.metadata!.uid!;
}

const eventsOn = async (namespace: string, name: string): Promise<CoreV1Event[]> =>
  (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` })).items.filter(
    (e) => e.source?.component === 'eni-ipam-agent',
  );

describe('Events on the pods whose ADD waits (kube emulator, real plugin and kubectl)', () => {
  beforeAll(async () => {
    env = await agentOnSocket(
      'n1',
      { cidr: '10.5.0.0/24', gateway: '10.5.0.253', ips: IPS },
      { cooldownMs: 100, tmpPrefix: 'pod-events-', podEvents: POLICY },
    );
    core = env.kc.makeApiClient(CoreV1Api);
    kubectl = kubectlFor(env.emu);
    for (const ns of ['apps', 'other']) await core.createNamespace({ body: { metadata: { name: ns } } });
    // Every address of the pool is taken.
    for (const [i] of IPS.entries())
      expect(
        await agentClient.allocate(env.socket, { containerId: `busy${i}`, ifName: 'eth0', pod: `apps/busy${i}` }),
      ).not.toBe('pool-empty');
  });
  afterAll(() => env?.close());

  it('a waiting pod is told why on the pod, once per interval however often the runtime retries, then that it got its address', async () => {
    const uid = await pod('apps', 'web');
    const first = await add('web-1', { namespace: 'apps', name: 'web', uid });
    expect(first.code).toBe(1);
    expect(first.out).toMatchObject({ code: 11 });
    const events = await eventually(async () => {
      const e = await eventsOn('apps', 'web');
      return e.length ? e : undefined;
    });
    expect(events).toHaveLength(1);
    const [told] = events;
    expect(told).toMatchObject({
      type: 'Warning',
      reason: 'WaitingForPodIP',
      count: 1,
      involvedObject: { kind: 'Pod', namespace: 'apps', name: 'web', uid },
    });
    // In the pool's own words: what the CNI error says too.
    expect(told!.message).toBe(`no free pod IP on node n1 yet: ${env.agent.whyEmpty()}; the runtime retries`);
    expect(first.out.msg).toContain(env.agent.whyEmpty());
    // A runtime retrying fast: no new Event, no new count within the interval.
    for (let i = 0; i < 5; i++) expect((await add('web-1', { namespace: 'apps', name: 'web', uid })).code).toBe(1);
    await sleep(150);
    expect((await eventsOn('apps', 'web')).map((e) => e.count)).toEqual([1]);
    // After the interval, the same reason is counted on the same Event.
    await sleep(POLICY.intervalMs);
    await add('web-1', { namespace: 'apps', name: 'web', uid });
    await eventually(async () => (await eventsOn('apps', 'web'))[0]?.count === 2);
    expect(await eventsOn('apps', 'web')).toHaveLength(1);
    // Where users look.
    const described = await kubectl(['describe', 'pod', 'web', '-n', 'apps']);
    expect(described.code).toBe(0);
    expect(described.stdout).toMatch(/Warning\s+WaitingForPodIP\s+.*eni-ipam-agent\s+no free pod IP on node n1 yet: /);
    // An address comes back: the next ADD gets it, and the pod is told.
    await agentClient.release(env.socket, 'busy0', 'eth0');
    const got = await eventually(async () => {
      const r = await add('web-1', { namespace: 'apps', name: 'web', uid });
      return r.code === 0 ? r : undefined;
    }, 5_000);
    const ip = got.out.ips[0].address.split('/')[0];
    const assigned = await eventually(async () =>
      (await eventsOn('apps', 'web')).find((e) => e.reason === 'PodIPAssigned'),
    );
    expect(assigned).toMatchObject({ type: 'Normal', involvedObject: { uid } });
    expect(assigned.message).toMatch(
      new RegExp(`^${ip.replaceAll('.', '\\.')} \\(ENI eni-a\\) on node n1, after \\d+ s$`),
    );
  }, 30_000);

  it('a reason whose numbers move (IPs in use, IPs coming) is one Event, counted, with the latest words', async () => {
    const uid = await pod('apps', 'mover');
    const events = new PodEvents(env.kc, { node: 'n1', clock: systemClock, logger: silentLogger(), policy: POLICY });
    const ref = { pod: 'apps/mover', podUid: uid };
    events.waiting(ref, 'WaitingForPodIP', 'all 2 pod IPs are in use; 3 more are being allocated');
    await eventually(async () => (await eventsOn('apps', 'mover')).length === 1);
    // Within the interval the numbers move on every retry: nothing is written.
    for (let i = 0; i < 5; i++)
      events.waiting(ref, 'WaitingForPodIP', `all 2 pod IPs are in use; ${i} more are being allocated`);
    await sleep(200);
    expect((await eventsOn('apps', 'mover')).map((e) => e.count)).toEqual([1]);
    await sleep(POLICY.intervalMs);
    events.waiting(ref, 'WaitingForPodIP', 'all 4 pod IPs are in use; 1 more is being allocated');
    await eventually(async () => (await eventsOn('apps', 'mover'))[0]?.count === 2);
    const [only, ...more] = await eventsOn('apps', 'mover');
    expect(more).toEqual([]);
    expect(only!.message).toBe('all 4 pod IPs are in use; 1 more is being allocated');
  }, 30_000);

  it('without K8S_POD_UID the pod is found by name; a same-named pod of another namespace is another pod', async () => {
    const uidApps = await pod('apps', 'twin');
    const uidOther = await pod('other', 'twin');
    expect((await add('twin-a', { namespace: 'apps', name: 'twin' })).code).toBe(1);
    expect((await add('twin-o', { namespace: 'other', name: 'twin', uid: uidOther })).code).toBe(1);
    const apps = await eventually(async () => (await eventsOn('apps', 'twin'))[0]);
    const other = await eventually(async () => (await eventsOn('other', 'twin'))[0]);
    expect(apps.involvedObject).toMatchObject({ namespace: 'apps', uid: uidApps });
    expect(other.involvedObject).toMatchObject({ namespace: 'other', uid: uidOther });
    // A pod the API server does not know gets no Event (and the ADD still answers).
    expect((await add('ghost-1', { namespace: 'apps', name: 'ghost' })).out).toMatchObject({ code: 11 });
    await sleep(300);
    expect(await eventsOn('apps', 'ghost')).toEqual([]);
  }, 30_000);
});
