import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { EventRecorder } from '../../src/kube/events.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { kube } from '../helpers/kube.js';

let emu: ControlPlane;
let kc: KubeConfig;
beforeAll(async () => ({ emu, kc } = await kube()));
afterAll(() => emu.close());

const events = async (name: string) =>
  (
    await kc
      .makeApiClient(CoreV1Api)
      .listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${name}` })
  ).items;

describe('Events', () => {
  it('a repeat folds into the Event it repeats (its count), by a patch', async () => {
    const r = new EventRecorder(kc, 'test', silentLogger());
    const target = { apiVersion: 'eniipam.io/v1alpha1', kind: 'ENIPool', name: 'folded' };
    await r.record(target, 'Warning', 'Same', 'the same words');
    await r.record(target, 'Warning', 'Same', 'the same words');
    const list = await events('folded');
    expect(list.map((e) => [e.reason, e.count])).toEqual([['Same', 2]]);
    expect(emu.audit().filter((e) => e.resource === 'events' && e.verb === 'patch')).toHaveLength(1);
  });

  it('without folding, a recorder only creates (it needs no right to patch)', async () => {
    const before = emu.audit().filter((e) => e.resource === 'events' && e.verb === 'patch').length;
    const r = new EventRecorder(kc, 'test', silentLogger(), { fold: false });
    const target = { apiVersion: 'eniipam.io/v1alpha1', kind: 'ENIPool', name: 'unfolded' };
    await r.record(target, 'Warning', 'Same', 'the same words');
    await r.record(target, 'Warning', 'Same', 'the same words');
    expect((await events('unfolded')).map((e) => e.count)).toEqual([1, 1]);
    expect(emu.audit().filter((e) => e.resource === 'events' && e.verb === 'patch')).toHaveLength(before);
  });
});
