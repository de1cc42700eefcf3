import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import {
  CoreV1Api,
  CustomObjectsApi,
  ListWatch,
  PatchStrategy,
  Watch,
  makeInformer,
  setHeaderOptions,
  type KubeConfig,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import type { KubeEmulator } from '../../../testbed/kube/index.js';
import { eventually, sleep } from '../../helpers/ecs.js';
import { WIDGET_CRD, widget } from '../../helpers/kube.js';
import { http, kube } from '../../helpers/kube-emulator.js';

let emu: KubeEmulator;
let kc: KubeConfig;
let core: CoreV1Api;
const stops: Array<() => void> = [];
beforeEach(async () => {
  ({ emu, kc } = await kube({ historyLimit: 50, bookmarkIntervalMs: 100 }));
  core = kc.makeApiClient(CoreV1Api);
});
afterEach(async () => {
  stops.splice(0).forEach((s) => s());
  await emu.close();
});

const cm = (name: string, labels: Record<string, string> = {}, data: Record<string, string> = {}): V1ConfigMap => ({
  metadata: { name, labels },
  data,
});

/** An informer on ConfigMaps in `default` that records what it sees. */
async function configMapInformer(labelSelector?: string) {
  const informer = makeInformer(
    kc,
    '/api/v1/namespaces/default/configmaps',
    () => core.listNamespacedConfigMap({ namespace: 'default', labelSelector }),
    labelSelector,
  );
  const seen: string[] = [];
  informer.on('add', (o) => seen.push(`add ${o.metadata!.name}`));
  informer.on('update', (o) => seen.push(`update ${o.metadata!.name} ${o.data?.v ?? ''}`));
  informer.on('delete', (o) => seen.push(`delete ${o.metadata!.name}`));
  let stopped = false;
  informer.on('error', () => setTimeout(() => stopped || void informer.start(), 50));
  await informer.start();
  stops.push(() => {
    stopped = true;
    void informer.stop();
  });
  // A stop on purpose must not look like a failure to the restart-on-error handler above.
  const pause = () => {
    stopped = true;
    return informer.stop();
  };
  const resume = () => {
    stopped = false;
    return informer.start();
  };
  return { informer, seen, pause, resume };
}

describe('client-node informers against the emulator', () => {
  it('lists, then watches adds, updates and deletes', async () => {
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('a') });
    const { informer, seen } = await configMapInformer();
    await eventually(() => seen.includes('add a'));
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('b') });
    await core.patchNamespacedConfigMap(
      { namespace: 'default', name: 'a', body: { data: { v: '1' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await core.deleteNamespacedConfigMap({ namespace: 'default', name: 'b' });
    await eventually(() => seen.includes('delete b'));
    expect(seen).toEqual(['add a', 'add b', 'update a 1', 'delete b']);
    expect(informer.list('default').map((o) => o.metadata!.name)).toEqual(['a']);
  });

  it('resumes from the last resourceVersion after a clean watch close, without relisting', async () => {
    const { seen } = await configMapInformer();
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('a') });
    await eventually(() => seen.includes('add a'));
    const lists = emu.requests()['list configmaps'];
    emu.closeWatches();
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('b') });
    await eventually(() => seen.includes('add b'));
    expect(emu.requests()['list configmaps']).toBe(lists);
    expect(emu.requests()['watch configmaps']).toBeGreaterThanOrEqual(2);
    expect(seen).toEqual(['add a', 'add b']);
  });

  it('relists after 410 Expired with no object lost or duplicated', async () => {
    const { informer, seen, pause, resume } = await configMapInformer();
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('keep') });
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('gone') });
    await eventually(() => seen.includes('add gone'));
    // The informer is away while things change and the history that would replay them is compacted.
    await pause();
    await core.deleteNamespacedConfigMap({ namespace: 'default', name: 'gone' });
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('new') });
    await core.patchNamespacedConfigMap(
      { namespace: 'default', name: 'keep', body: { data: { v: '2' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    emu.compact();
    const lists = emu.requests()['list configmaps'];
    await resume();
    await eventually(() => informer.list('default').length === 2 && informer.get('keep', 'default')?.data?.v === '2');
    expect(emu.requests()['list configmaps']).toBe(lists + 1);
    expect(
      informer
        .list('default')
        .map((o) => o.metadata!.name)
        .sort(),
    ).toEqual(['keep', 'new']);
    expect(seen).toEqual(['add keep', 'add gone', 'delete gone', 'update keep 2', 'add new']);
  });

  it('relists when a watch is answered with an in-stream 410', async () => {
    const { informer, seen } = await configMapInformer();
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('a') });
    await eventually(() => seen.includes('add a'));
    const lists = emu.requests()['list configmaps'];
    emu.expireNextWatches(1);
    emu.closeWatches();
    await eventually(() => emu.requests()['list configmaps'] === lists + 1);
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('b') });
    await eventually(() => seen.includes('add b'));
    expect(seen).toEqual(['add a', 'add b']);
    expect(informer.list('default')).toHaveLength(2);
  });

  it('answers a watch from a resourceVersion older than the history with 410 in the stream', async () => {
    const first = await core.createNamespacedConfigMap({ namespace: 'default', body: cm('x') });
    for (let i = 0; i < 60; i++)
      await core.patchNamespacedConfigMap(
        { namespace: 'default', name: 'x', body: { data: { v: String(i) } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const events: Array<{ type: string; code?: number }> = [];
    await new Promise<void>((resolve) => {
      void new Watch(kc).watch(
        '/api/v1/namespaces/default/configmaps',
        { resourceVersion: first.metadata!.resourceVersion },
        (type, obj) => events.push({ type, code: obj.code }),
        () => resolve(),
      );
    });
    expect(events).toEqual([{ type: 'ERROR', code: 410 }]);
  });

  it('sends bookmarks that advance the resourceVersion when asked', async () => {
    const rvs: string[] = [];
    const req = await new Watch(kc).watch(
      '/api/v1/namespaces/default/configmaps',
      { allowWatchBookmarks: true, resourceVersion: '1' },
      (type, obj) => {
        if (type === 'BOOKMARK') rvs.push(obj.metadata.resourceVersion);
      },
      () => undefined,
    );
    stops.push(() => req.abort());
    await eventually(() => rvs.length >= 1);
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('later') });
    await eventually(() => rvs.length >= 1 && Number(rvs[rvs.length - 1]) > Number(rvs[0]));
  });

  it('delivers objects entering and leaving a label selection as ADDED and DELETED', async () => {
    await core.createNamespacedConfigMap({ namespace: 'default', body: cm('m', { team: 'a' }) });
    const { seen } = await configMapInformer('team=a');
    await eventually(() => seen.includes('add m'));
    await core.patchNamespacedConfigMap(
      { namespace: 'default', name: 'm', body: { metadata: { labels: { team: 'b' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually(() => seen.includes('delete m'));
    await core.patchNamespacedConfigMap(
      { namespace: 'default', name: 'm', body: { metadata: { labels: { team: 'a' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually(() => seen.filter((s) => s === 'add m').length === 2);
    expect(seen).toEqual(['add m', 'delete m', 'add m']);
  });

  it('watches custom objects with a field selector on the name, as a node agent does', async () => {
    await http(emu, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', WIDGET_CRD);
    const api = kc.makeApiClient(CustomObjectsApi);
    const path = '/apis/example.io/v1/namespaces/default/widgets';
    // client-node 1.4.0's makeInformer takes no field selector; ListWatch does.
    const informer = new ListWatch(
      path,
      new Watch(kc),
      () =>
        api.listNamespacedCustomObject({
          group: 'example.io',
          version: 'v1',
          namespace: 'default',
          plural: 'widgets',
          fieldSelector: 'metadata.name=mine',
        }),
      false,
      undefined,
      'metadata.name=mine',
    );
    const names: string[] = [];
    informer.on('add', (o: { metadata?: { name?: string } }) => names.push(o.metadata!.name!));
    await informer.start();
    stops.push(() => void informer.stop());
    for (const n of ['other', 'mine'])
      await api.createNamespacedCustomObject({
        group: 'example.io',
        version: 'v1',
        namespace: 'default',
        plural: 'widgets',
        body: widget(n),
      });
    await eventually(() => names.includes('mine'));
    await sleep(100);
    expect(names).toEqual(['mine']);
  });
});
