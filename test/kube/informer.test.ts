import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { Informer } from '../../src/kube/informer.js';
import { silentLogger, type Logger } from '../../src/observability/logger.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { capturingLogger } from '../helpers/cloud.js';
import { eventually } from '../helpers/ecs.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { kube } from '../helpers/kube.js';

let emu: ControlPlane;
let kc: KubeConfig;
let core: CoreV1Api;
const informers: Array<Informer<V1ConfigMap>> = [];
beforeEach(async () => {
  ({ emu, kc } = await kube());
  core = kc.makeApiClient(CoreV1Api);
});
afterEach(async () => {
  await Promise.all(informers.splice(0).map((i) => i.stop()));
  await emu.close();
});

function configMaps(
  o: {
    fieldSelector?: string;
    watchTimeoutSeconds?: number;
    list?: () => ReturnType<CoreV1Api['listNamespacedConfigMap']>;
    clock?: FakeClock;
    logger?: Logger;
  } = {},
) {
  const changes: string[] = [];
  const informer = new Informer<V1ConfigMap>({
    kc,
    path: '/api/v1/namespaces/default/configmaps',
    list: o.list ?? (() => core.listNamespacedConfigMap({ namespace: 'default', fieldSelector: o.fieldSelector })),
    fieldSelector: o.fieldSelector,
    watchTimeoutSeconds: o.watchTimeoutSeconds,
    logger: o.logger ?? silentLogger(),
    onChange: (type, obj) => changes.push(`${type} ${obj.metadata!.name}`),
    clock: o.clock,
  });
  informers.push(informer);
  return { informer, changes };
}

describe('hardened informer', () => {
  it('watches with a server-side timeout and bookmarks, and resumes after each timeout', async () => {
    const { informer, changes } = configMaps({ watchTimeoutSeconds: 1 });
    await informer.start();
    expect(informer.synced).toBe(true);
    await eventually(() => (emu.requests()['watch configmaps'] ?? 0) >= 2, 5000);
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'after-timeout' } } });
    await eventually(() => changes.includes('add after-timeout'));
    expect(emu.requests()['list configmaps']).toBe(1);
  });

  it('is not synced while its list fails (a 403, a 500), and is once a list succeeds', async () => {
    emu.setFaultRules([{ action: 'respond', code: 500 }]);
    const { informer } = configMaps();
    await informer.start();
    expect(informer.synced).toBe(false);
    emu.clearFaultRules();
    await eventually(() => informer.synced, 10_000);
  });

  it('restarts after errors that stop a plain client-node informer', async () => {
    const { informer, changes } = configMaps();
    await informer.start();
    await emu.refuseConnections(500);
    await new Promise((r) => setTimeout(r, 700));
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'after-outage' } } });
    await eventually(() => changes.includes('add after-outage'), 10_000);
    expect(informer.get('after-outage', 'default')).toBeDefined();
  });

  it('watches only what its field selector selects', async () => {
    const { informer, changes } = configMaps({ fieldSelector: 'metadata.name=mine' });
    await informer.start();
    for (const name of ['other', 'mine'])
      await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name } } });
    await eventually(() => changes.includes('add mine'));
    expect(changes).toEqual(['add mine']);
  });

  it('is synced only after a LIST succeeded, and backs off more and more while LISTs fail', async () => {
    const clock = new FakeClock();
    const attempts: number[] = [];
    let refuse = true;
    const forbidden = Object.assign(new Error('HTTP-Code: 403 Message: configmaps is forbidden'), { code: 403 });
    const { informer } = configMaps({
      clock,
      list: async () => {
        attempts.push(clock.now());
        if (refuse) throw forbidden;
        return core.listNamespacedConfigMap({ namespace: 'default' });
      },
    });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'there' } } });
    await informer.start();
    expect(informer.synced).toBe(false);
    let synced = false;
    void informer.untilSynced().then(() => (synced = true));
    for (let i = 0; i < 60; i++) await clock.advance(1000);
    expect(informer.synced).toBe(false);
    expect(synced).toBe(false);
    expect(informer.list()).toEqual([]);
    // 1 s, 2 s, 4 s ... up to a minute, each with jitter of at most half: 7 attempts in a minute, not dozens.
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
    expect(gaps.length).toBeGreaterThanOrEqual(5);
    for (const [i, gap] of gaps.entries()) {
      expect(gap).toBeGreaterThanOrEqual(500 * 2 ** i);
      expect(gap).toBeLessThanOrEqual(1000 * 2 ** i + 1000); // the clock moves in 1 s steps
    }
    refuse = false;
    await clock.advance(60_000);
    await eventually(() => informer.synced, 10_000);
    expect(synced).toBe(true);
    expect(informer.get('there', 'default')).toBeDefined();
  });

  it('restarts a watch that heard nothing, not even a bookmark, for twice its longest timeout', async () => {
    // kube-apiserver sends a bookmark about once a minute: none comes within the test, so only the fake clock moves.
    const clock = new FakeClock();
    const { logger, lines } = capturingLogger();
    const { informer } = configMaps({ clock, logger, watchTimeoutSeconds: 10 });
    await informer.start();
    expect(informer.synced).toBe(true);
    const restarts = () => lines.filter((l) => l.includes('watch heard nothing for too long')).length;
    // 2 x (10 s + 20% jitter) = 24 s: the ticks at 10 and 20 s find it quiet but not for too long.
    await clock.advance(20_000);
    expect(restarts()).toBe(0);
    await clock.advance(10_000);
    expect(restarts()).toBe(1);
    // Restarted, it counts as heard from: not restarted again at the next tick.
    await clock.advance(10_000);
    expect(restarts()).toBe(1);
    await informer.stop();
    expect(clock.pending).toBe(0);
  });
});
