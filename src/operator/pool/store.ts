import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, GROUP, VERSION, type ENIPool } from '../../api/types.js';
import { ignoreNotFound } from '../../kube/errors.js';
import type { EventRecorder, EventTarget } from '../../kube/events.js';
import type { PoolEvents, PoolStore } from './ports.js';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const pools = { group: GROUP, version: VERSION, plural: 'enipools' };

/** ENIPools and Nodes on the API server, through @kubernetes/client-node. */
export class KubePoolStore implements PoolStore {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;

  constructor(kc: KubeConfig) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  async readPool(name: string): Promise<ENIPool | undefined> {
    return (await ignoreNotFound(this.custom.getClusterCustomObjectStatus({ ...pools, name }))) as ENIPool | undefined;
  }

  async setFinalizers(name: string, finalizers: string[], resourceVersion?: string): Promise<ENIPool | undefined> {
    const body = { metadata: { finalizers, resourceVersion } };
    return (await ignoreNotFound(this.custom.patchClusterCustomObject({ ...pools, name, body }, merge))) as
      ENIPool | undefined;
  }

  async patchStatus(name: string, resourceVersion: string | undefined, patch: Record<string, unknown>): Promise<void> {
    const body = { metadata: { resourceVersion }, status: patch };
    await this.custom.patchClusterCustomObjectStatus({ ...pools, name, body }, merge);
  }

  async deletePool(name: string): Promise<void> {
    await ignoreNotFound(this.custom.deleteClusterCustomObject({ ...pools, name }));
  }

  async nodeExists(name: string): Promise<boolean> {
    return (await ignoreNotFound(this.core.readNode({ name }))) !== undefined;
  }

  async removeTaint(name: string, resourceVersion: string, index: number): Promise<void> {
    // The test makes the index safe: the Node is still the one read, so the entry is still ours.
    const body = [
      { op: 'test', path: '/metadata/resourceVersion', value: resourceVersion },
      { op: 'remove', path: `/spec/taints/${index}` },
    ];
    await this.core.patchNode({ name, body }, jsonPatch);
  }
}

/**
 * Pool Events through the recorder; pools are cluster-scoped, so the Event's object has no
 * namespace. `instead` names another object of the node to record them on (its CiliumNode).
 */
export const poolEvents = (
  recorder: EventRecorder,
  instead: (node: string) => EventTarget | undefined = () => undefined,
): PoolEvents => ({
  record: (pool, type, reason, message) =>
    void recorder.record(
      instead(pool.metadata.name) ?? {
        apiVersion: API_VERSION,
        kind: 'ENIPool',
        name: pool.metadata.name,
        uid: pool.metadata.uid,
      },
      type,
      reason,
      message,
    ),
});
