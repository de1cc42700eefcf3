import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ignoreNotFound } from '../../kube/errors.js';
import { CILIUM_NODES, type CiliumNode } from './types.js';

/** CiliumNodes on the API server. */
export interface CiliumNodeStore {
  /** The node as the API server has it now; undefined when it is gone. */
  read(name: string): Promise<CiliumNode | undefined>;
  /** UpdateStatus: the whole status, refused with a 409 unless the node is still at its resourceVersion. */
  replaceStatus(node: CiliumNode): Promise<CiliumNode>;
  /** Update: the whole object (the status is left alone), refused with a 409 likewise. */
  replace(node: CiliumNode): Promise<CiliumNode>;
}

/**
 * Full-object writes with the resourceVersion read, as the agent writes (reference §2.1, §2.3):
 * a merge patch would not be refused when the agent wrote in between, and the agent's own
 * updates replace the whole object.
 */
export class KubeCiliumNodeStore implements CiliumNodeStore {
  private readonly custom: CustomObjectsApi;

  constructor(kc: KubeConfig) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
  }

  async read(name: string): Promise<CiliumNode | undefined> {
    return (await ignoreNotFound(this.custom.getClusterCustomObject({ ...CILIUM_NODES, name }))) as
      CiliumNode | undefined;
  }

  async replaceStatus(node: CiliumNode): Promise<CiliumNode> {
    const name = node.metadata.name;
    return (await this.custom.replaceClusterCustomObjectStatus({ ...CILIUM_NODES, name, body: node })) as CiliumNode;
  }

  async replace(node: CiliumNode): Promise<CiliumNode> {
    const name = node.metadata.name;
    return (await this.custom.replaceClusterCustomObject({ ...CILIUM_NODES, name, body: node })) as CiliumNode;
  }
}
