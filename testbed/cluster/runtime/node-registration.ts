/* eslint-disable @typescript-eslint/no-explicit-any -- API objects are plain JSON here */
import type { Logger } from '../../../src/observability/logger.js';
import { KUBERNETES_VERSION } from '../../control-plane/upstream.js';
import type { RawApi } from './raw-api.js';

/** How often the node says it is alive (the kubelet's default node-status and lease periods). */
export const HEARTBEAT_MS = 10_000;

/** MicroTime as the API server parses it: six fractional digits. */
const microTime = (at = new Date()) => at.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
const time = (at = new Date()) => at.toISOString().replace(/\.\d{3}Z$/, 'Z');

export interface NodeRegistrationOptions {
  api: RawApi;
  /** The Node as the kubelet registers it: labels, providerID, podCIDR, taints (--register-with-taints). */
  node: any;
  /** Its addresses, and where the API server reaches its kubelet. */
  addresses: Array<{ type: string; address: string }>;
  kubeletPort: number;
  log: Logger;
}

/**
 * A kubelet's Node: registered with the node's own credentials (NodeRestriction takes only what
 * a kubelet may set), then kept alive as a kubelet keeps it: its Lease in kube-node-lease
 * renewed and its status (Ready, addresses, capacity, kubelet endpoint) written every 10 s, so
 * that the node lifecycle controller sees it up and lifts `node.kubernetes.io/not-ready`.
 */
export class NodeRegistration {
  private timer?: NodeJS.Timeout;
  private readonly readySince = time();

  constructor(private readonly o: NodeRegistrationOptions) {}

  get name(): string {
    return this.o.node.metadata.name;
  }

  async register(): Promise<void> {
    const r = await this.o.api('POST', '/api/v1/nodes', this.o.node);
    if (r.status !== 201 && r.status !== 409)
      throw new Error(
        `node ${this.name} could not register (${r.status}): ${r.body?.message ?? JSON.stringify(r.body)}`,
      );
    await this.beat();
    this.timer = setInterval(() => void this.beat(), HEARTBEAT_MS);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private status(): any {
    const now = time();
    const resources = { cpu: '8', memory: '32Gi', pods: '110', 'ephemeral-storage': '100Gi' };
    return {
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'KubeletReady',
          message: 'kubelet is posting ready status',
          lastHeartbeatTime: now,
          lastTransitionTime: this.readySince,
        },
      ],
      addresses: this.o.addresses,
      daemonEndpoints: { kubeletEndpoint: { Port: this.o.kubeletPort } },
      // A merge patch: resources another writer adds (the agent's eniipam.io/eni) stay.
      capacity: resources,
      allocatable: resources,
      nodeInfo: {
        machineID: '',
        systemUUID: '',
        bootID: '',
        kernelVersion: '',
        osImage: 'eni-ipam emulated node',
        containerRuntimeVersion: 'eni-ipam-emulator://local-processes',
        kubeletVersion: KUBERNETES_VERSION,
        kubeProxyVersion: '',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
    };
  }

  private async beat(): Promise<void> {
    try {
      const s = await this.o.api(
        'PATCH',
        `/api/v1/nodes/${this.name}/status`,
        { status: this.status() },
        'application/merge-patch+json',
      );
      if (s.status !== 200) this.o.log.warn({ status: s.status, message: s.body?.message }, 'node status not written');
      await this.renewLease();
    } catch (e) {
      this.o.log.warn({ err: e }, 'node heartbeat failed');
    }
  }

  private async renewLease(): Promise<void> {
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${this.name}`;
    const spec = { holderIdentity: this.name, leaseDurationSeconds: 40, renewTime: microTime() };
    const r = await this.o.api('PATCH', path, { spec }, 'application/merge-patch+json');
    if (r.status === 404)
      await this.o.api('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: this.name, namespace: 'kube-node-lease' },
        spec,
      });
  }
}
