import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { Informer } from '../../src/kube/informer.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { KubeEmulator } from '../../testbed/kube/index.js';
import { eventually } from '../helpers/ecs.js';
import { kube } from '../helpers/kube.js';

let emu: KubeEmulator;
let kc: KubeConfig;
let core: CoreV1Api;
const informers: Array<Informer<V1ConfigMap>> = [];
beforeEach(async () => {
  ({ emu, kc } = await kube({ bookmarkIntervalMs: 100 }));
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
  } = {},
) {
  const changes: string[] = [];
  const informer = new Informer<V1ConfigMap>({
    kc,
    path: '/api/v1/namespaces/default/configmaps',
    list: o.list ?? (() => core.listNamespacedConfigMap({ namespace: 'default', fieldSelector: o.fieldSelector })),
    fieldSelector: o.fieldSelector,
    watchTimeoutSeconds: o.watchTimeoutSeconds,
    logger: silentLogger(),
    onChange: (type, obj) => changes.push(`${type} ${obj.metadata!.name}`),
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
    emu.setFaults({ errors: { code: 500, rate: 1 } });
    const { informer } = configMaps();
    await informer.start();
    expect(informer.synced).toBe(false);
    emu.setFaults({});
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
    const attempts: number[] = [];
    let refuse = true;
    const forbidden = Object.assign(new Error('HTTP-Code: 403 Message: configmaps is forbidden'), { code: 403 });
    const { informer } = configMaps({
      list: async () => {
        attempts.push(Date.now());
        if (refuse) throw forbidden;
        return core.listNamespacedConfigMap({ namespace: 'default' });
      },
    });
    await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'there' } } });
    await informer.start();
    expect(informer.synced).toBe(false);
    let synced = false;
    void informer.untilSynced().then(() => (synced = true));
    await new Promise((r) => setTimeout(r, 4000));
    expect(informer.synced).toBe(false);
    expect(synced).toBe(false);
    expect(informer.list()).toEqual([]);
    // 1 s, 2 s, 4 s ... with jitter of at most half: three or four attempts in 4 s, not dozens.
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.length).toBeLessThanOrEqual(4);
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]!).toBeGreaterThan(gaps[i - 1]! * 0.9);
    refuse = false;
    await eventually(() => informer.synced, 10_000);
    expect(synced).toBe(true);
    expect(informer.get('there', 'default')).toBeDefined();
  });
});
