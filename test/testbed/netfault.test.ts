import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, KubeConfig, VersionApi, Watch } from '@kubernetes/client-node';
import { startFaultProxy, type FaultProxy } from '../../testbed/harness/netfault.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { eventually, sleep } from '../helpers/ecs.js';
import { kube } from '../helpers/kube.js';

let emu: ControlPlane;
let direct: KubeConfig;
let proxy: FaultProxy;
let viaProxy: KubeConfig;
beforeAll(async () => {
  ({ emu, kc: direct } = await kube());
  const u = new URL(emu.url);
  proxy = await startFaultProxy({ host: u.hostname, port: Number(u.port) });
  viaProxy = new KubeConfig();
  // The same credentials and CA, another address: the proxy's (the serving certificate covers 127.0.0.1).
  viaProxy.loadFromString(emu.kubeconfig.replace(emu.url, `https://${proxy.host}:${proxy.port}`));
});
afterAll(async () => {
  await proxy.close();
  await emu.close();
});

const configMap = (name: string) => ({ metadata: { name }, data: { a: '1' } });

describe('TCP fault proxy', () => {
  it('passes traffic, then black-holes it (connections stay open, nothing moves) while direct clients carry on, then heals', async () => {
    const core = viaProxy.makeApiClient(CoreV1Api);
    expect((await core.listNamespace()).items.length).toBeGreaterThan(0);
    const seen: string[] = [];
    const watch = await new Watch(viaProxy).watch(
      '/api/v1/namespaces/default/configmaps',
      {},
      (_t, o) => seen.push(o.metadata.name),
      () => {},
    );
    await direct.makeApiClient(CoreV1Api).createNamespacedConfigMap({ namespace: 'default', body: configMap('one') });
    await eventually(() => seen.includes('one'));

    await proxy.setMode('blackhole');
    const open = proxy.connections();
    expect(open).toBeGreaterThan(0);
    let answered = false;
    const held = core.readNamespace({ name: 'default' }).then((ns) => ((answered = true), ns));
    await direct.makeApiClient(CoreV1Api).createNamespacedConfigMap({ namespace: 'default', body: configMap('two') });
    await sleep(1000);
    expect(answered).toBe(false);
    expect(seen).not.toContain('two');
    expect(proxy.connections()).toBeGreaterThanOrEqual(open);

    // What was sent meanwhile arrives once the path heals, as TCP retransmits it.
    await proxy.setMode('pass');
    expect((await held).metadata?.name).toBe('default');
    await eventually(() => seen.includes('two'));
    watch.abort();
  });

  it('refuses connections and resets open ones, then serves again on the same port', async () => {
    await proxy.setMode('refuse');
    const version = viaProxy.makeApiClient(VersionApi);
    const err = await version.getCode().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(String(err)).toMatch(/ECONNREFUSED/);
    expect(proxy.connections()).toBe(0);
    await proxy.setMode('pass');
    expect((await version.getCode()).gitVersion).toBe('v1.33.13');
  });
});
