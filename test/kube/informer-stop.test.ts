// Found in review: Informer.start() arms the watchdog after its first LIST returns; stop()
// during that LIST (a signal while the caches list: cli/operator.ts races start() with it)
// cancels nothing yet, and the watchdog is armed after stop(): a timer left on the clock.
import { describe, expect, it } from '@jest/globals';
import { KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { Informer } from '../../src/kube/informer.js';
import { silentLogger } from '../../src/observability/logger.js';
import { FakeClock, settle } from '../helpers/fake-clock.js';

describe('Informer stopped while its first LIST is under way', () => {
  it('leaves no timer on its clock', async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: 'http://127.0.0.1:9' }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const clock = new FakeClock();
    let answer!: (r: { metadata: { resourceVersion: string }; items: V1ConfigMap[] }) => void;
    const informer = new Informer<V1ConfigMap>({
      kc,
      path: '/api/v1/namespaces/default/configmaps',
      list: () => new Promise((r) => (answer = r)),
      logger: silentLogger(),
      clock,
    });
    const started = informer.start();
    await settle();
    await informer.stop();
    answer({ metadata: { resourceVersion: '1' }, items: [] });
    await started;
    await settle();
    expect(clock.pending).toBe(0);
  });
});
