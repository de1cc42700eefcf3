import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, VERSION, type ENIPool, type ENIPoolClassStatus } from '../../api/types.js';
import { isConflict } from '../../kube/errors.js';
import type { EventRecorder } from '../../kube/events.js';
import type { ObjectEvents, PlacementStore, PoolPatch } from './ports.js';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Pools and class statuses on the API server, through @kubernetes/client-node. */
export class KubePlacementStore implements PlacementStore {
  private readonly custom: CustomObjectsApi;

  constructor(kc: KubeConfig) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
  }

  async createPool(pool: ENIPool): Promise<boolean> {
    try {
      await this.custom.createClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools', body: pool });
      return true;
    } catch (e) {
      if (isConflict(e)) return false;
      throw e;
    }
  }

  async patchPool(name: string, patch: PoolPatch): Promise<void> {
    await this.custom.patchClusterCustomObject(
      { group: GROUP, version: VERSION, plural: 'enipools', name, body: patch },
      merge,
    );
  }

  async patchClassStatus(name: string, status: ENIPoolClassStatus): Promise<void> {
    await this.custom.patchClusterCustomObjectStatus(
      { group: GROUP, version: VERSION, plural: 'enipoolclasses', name, body: { status } },
      merge,
    );
  }
}

/** Events through the recorder (it folds repeats and never throws). */
export const objectEvents = (recorder: EventRecorder): ObjectEvents => ({
  record: (target, type, reason, message) => void recorder.record(target, type, reason, message),
});
