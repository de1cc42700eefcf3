import type { TaintSpec } from '../../src/kube/taint.js';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../src/observability/logger.js';
import { silentLogger } from '../../src/observability/logger.js';
import { defaultWorld, nodeObject, startEcsEmulator, type EcsEmulator, type Fixture } from '../ecs/index.js';
import { lockWorkDir } from './work-dir-lock.js';
import { StatusError } from '../kube/core/errors.js';
import { startKubeEmulator, type KubeEmulator } from '../kube/index.js';
import { startControllers, type Controllers } from './controllers/index.js';
import { Objects } from './objects.js';
import { Kubelet } from './runtime/kubelet.js';
import { ClusterNetwork, runtimeUnavailable } from './runtime/network.js';
import { servePodLog } from './runtime/pod-log.js';
import type { TokenMinter } from './runtime/volumes.js';
import { startVpc, type Vpc, type VpcNode, type VpcOptions } from '../vpc/index.js';

export { runtimeUnavailable } from './runtime/network.js';
export { WorkDirInUse } from './work-dir-lock.js';

/** A cluster that cannot be made as asked (the user's options): said in one line, nothing started. */
export class ClusterOptionError extends Error {}
export type { TokenMinter } from './runtime/volumes.js';

import { CHECKOUT } from '../checkout.js';
export { CHECKOUT };

export interface ClusterOptions {
  nodes: number;
  /** Kubeconfig, node directories (hostPath roots, pods' volumes) go here. */
  workDir: string;
  /** Mounted at /app in every container (built: dist/src must exist). */
  checkout?: string;
  fixture?: Fixture;
  logger?: Logger;
  /** Mints the service-account tokens of pods (default: the API server's TokenRequest, bound to the pod). */
  mint?: TokenMinter;
  /** The kubelet's first restart back-off (default 10 s). */
  backoffBaseMs?: number;
  /** The API server's port (default 6443). */
  kubePort?: number;
  /** Authenticate and authorize requests with RBAC (pods run with their service accounts' rights). */
  auth?: boolean;
  /** The emulated VPC's knobs: what ENI devices are called, how late they appear after InUse. */
  vpc?: Pick<VpcOptions, 'deviceName' | 'deviceDelayMs'>;
  /**
   * The taints each node registers with, as kubelet's --register-with-taints (default: eni-ipam's
   * startup taint, as the README tells node pools to; [] for none).
   */
  registerWithTaints?: TaintSpec[];
}

/** The taint the README has node pools register with; the chart's operator removes it once the pool is Ready. */
export const STARTUP_TAINT: TaintSpec = { key: 'eniipam.io/pool-not-ready', effect: 'NoSchedule' };

export interface EmulatedCluster {
  ecs: EcsEmulator;
  kube: KubeEmulator;
  network: ClusterNetwork;
  kubelets: Kubelet[];
  /** The VPC in namespaces: each node's ENIs appear in its namespace; `vpc.vpcHost` is outside the cluster. */
  vpc: Vpc;
  /** Node names, in order. */
  nodes: string[];
  kubeconfigPath: string;
  close(): Promise<void>;
}

/**
 * Service-account tokens from the API server's TokenRequest, bound to the pod, as the kubelet gets
 * them for projected volumes.
 */
export const boundTokens =
  (kube: KubeEmulator): TokenMinter =>
  async (r) => {
    const t = kube.issueServiceAccountToken({
      namespace: r.namespace,
      serviceAccount: r.serviceAccountName,
      audiences: r.audiences.length ? r.audiences : undefined,
      expirationSeconds: Math.max(600, r.expirationSeconds),
      boundObject: { kind: 'Pod', name: r.pod.name, uid: r.pod.uid },
    });
    return { token: t.token, expirationTimestamp: t.expirationTimestamp };
  };

/**
 * A local cluster: the ECS and Kubernetes emulators on a bridge, the workload controllers,
 * and N nodes (one per emulated ECS instance, as a cloud provider registers them), each a
 * network namespace with a kubelet that runs pods of eni-ipam's image and of the toolbox as
 * local processes, outside the host network through the node's CNI chain. Needs root.
 */
export async function startCluster(o: ClusterOptions): Promise<EmulatedCluster> {
  const why = runtimeUnavailable();
  if (why) throw new Error(`cannot run emulated nodes: ${why}`);
  const logger = o.logger ?? silentLogger();
  // Refused before anything is started or written: a mistake must not break a running cluster.
  const world = o.fixture ?? defaultWorld();
  if (world.instances.length < o.nodes)
    throw new ClusterOptionError(
      `the ECS world has ${world.instances.length} instances; --nodes ${o.nodes} needs as many ` +
        '(lower --nodes, or give a --fixture with more instances)',
    );
  mkdirSync(o.workDir, { recursive: true });
  const unlock = lockWorkDir(o.workDir);
  let network: ClusterNetwork;
  try {
    network = await ClusterNetwork.create();
  } catch (e) {
    unlock();
    throw e;
  }
  let ecs: EcsEmulator | undefined;
  let kube: KubeEmulator | undefined;
  let controllers: Controllers | undefined;
  let vpc: Vpc | undefined;
  const kubelets: Kubelet[] = [];
  const close = async () => {
    await Promise.all(kubelets.map((k) => k.stop()));
    await vpc?.stop();
    controllers?.stop();
    await kube?.close();
    await ecs?.close();
    await network.destroy();
    unlock();
  };
  try {
    // RRSA: the ECS emulator's STS takes this cluster's projected service-account tokens.
    const trust: { verify?: (token: string, audience: string) => string | undefined } = {};
    ecs = await startEcsEmulator({
      fixture: o.fixture,
      host: network.hostAddress,
      oidcVerifier: (token, audience) => trust.verify?.(token, audience),
    });
    const kubeconfigPath = join(o.workDir, 'kubeconfig');
    // HTTPS, as in-cluster clients require, with the bridge address in the certificate.
    kube = await startKubeEmulator({
      host: network.hostAddress,
      port: o.kubePort ?? 6443,
      kubeconfigPath,
      tls: { sans: [network.hostAddress] },
      auth: o.auth,
    });
    const api = kube;
    trust.verify = (token, audience) => api.verifyServiceAccountToken(token, [audience]);
    const objects = new Objects(kube.store);
    controllers = startControllers(objects, logger.child({ component: 'controllers' }), { caCert: kube.caCert });
    const instances = [...ecs.world.instances.values()].slice(0, o.nodes);
    const nodes: string[] = [];
    const vpcNodes: VpcNode[] = [];
    for (const [i, inst] of instances.entries()) {
      const ecsUrl = new URL(ecs.url);
      const net = await network.addNode(i, { host: ecsUrl.hostname, port: Number(ecsUrl.port) });
      // The node's eth0 stays on the bridge (the API server and the emulators are there): not the VPC's.
      vpcNodes.push({ instanceId: inst.id, netns: net.netns, primaryDevice: null });
      const n = nodeObject(ecs.world, inst.id, {
        'kubernetes.io/hostname': inst.hostName,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
      });
      const dir = join(o.workDir, 'nodes', inst.hostName);
      rmSync(dir, { recursive: true, force: true });
      const taints = o.registerWithTaints ?? [STARTUP_TAINT];
      objects.create('nodes', {
        ...n,
        spec: { ...n.spec, podCIDR: net.podCIDR, podCIDRs: [net.podCIDR], ...(taints.length ? { taints } : {}) },
      } as never);
      const created = objects.get('nodes', undefined, inst.hostName)!;
      objects.updateStatus('nodes', undefined, inst.hostName, {
        ...n.status,
        addresses: [...n.status.addresses, { type: 'Hostname', address: inst.hostName }],
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status',
            lastHeartbeatTime: created.metadata.creationTimestamp,
            lastTransitionTime: created.metadata.creationTimestamp,
          },
        ],
        nodeInfo: {
          kubeletVersion: 'v1.32.0-eni-ipam-emulated',
          osImage: 'eni-ipam emulated node',
          operatingSystem: 'linux',
          architecture: 'amd64',
          containerRuntimeVersion: 'eni-ipam-emulator://local-processes',
          kernelVersion: '',
          kubeProxyVersion: '',
        },
      });
      const kubelet = new Kubelet({
        objects,
        node: inst.hostName,
        network: net,
        cluster: network,
        dir,
        checkout: o.checkout ?? CHECKOUT,
        apiHost: network.hostAddress,
        apiPort: Number(new URL(kube.url).port),
        caCert: kube.caCert ?? '',
        mint: o.mint ?? boundTokens(api),
        logger: logger.child({ component: 'kubelet' }),
        backoffBaseMs: o.backoffBaseMs,
      });
      kubelet.start();
      kubelets.push(kubelet);
      nodes.push(inst.hostName);
    }
    vpc = await startVpc({
      world: ecs.world,
      nodes: vpcNodes,
      prefix: `ecv${network.id}-`,
      logger,
      ...o.vpc,
    });
    kube.store.hooks.kubeletRuns = (node) => nodes.includes(node);
    kube.store.hooks.podLog = (pod, query, res) =>
      servePodLog(
        kubelets.find((k) => k.node === pod.spec?.nodeName),
        pod,
        query,
        res,
      );
    kube.store.hooks.podExec = (pod, request) => {
      const kubelet = kubelets.find((k) => k.node === pod.spec?.nodeName);
      if (!kubelet)
        throw new StatusError(
          400,
          'BadRequest',
          `node ${pod.spec?.nodeName} of pod ${pod.metadata.name} runs no kubelet`,
        );
      return kubelet.prepareExec(pod, request);
    };
    return { ecs, kube, network, kubelets, vpc, nodes, kubeconfigPath, close };
  } catch (e) {
    await close().catch(() => undefined);
    throw e;
  }
}

/** The AccessKey Secret `emulate cluster` creates for the chart's credential form `secret`. */
export const ACCESS_KEY_SECRET = { namespace: 'kube-system', name: 'eni-ipam-access-key' };

/** The values that install the chart against this cluster's emulators (credential form `secret`). */
export function chartValues(cluster: EmulatedCluster): string[] {
  const region = cluster.ecs.world.region;
  const vpc = [...cluster.ecs.world.vpcs.keys()][0] ?? '';
  return [
    `region=${region}`,
    `vpcId=${vpc}`,
    'clusterId=emulated',
    `endpoints.ecs=${cluster.ecs.url}`,
    `endpoints.vpc=${cluster.ecs.url}`,
    'credentials.mode=secret',
    `credentials.secret.name=${ACCESS_KEY_SECRET.name}`,
    'defaultClass.create=true',
    // The operators run in the host network, one per node (their ports are the node's).
    ...(cluster.nodes.length < 2 ? ['operator.replicas=1'] : []),
  ];
}

/** Creates the AccessKey Secret of the ECS emulator's first credential (what a user creates with kubectl). */
export function createAccessKeySecret(cluster: EmulatedCluster): void {
  const key = cluster.ecs.fixture.credentials[0];
  if (!key) throw new Error('the ECS world has no credentials to put in a Secret');
  const objects = new Objects(cluster.kube.store);
  if (objects.get('secrets', ACCESS_KEY_SECRET.namespace, ACCESS_KEY_SECRET.name)) return;
  objects.create('secrets', {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { ...ACCESS_KEY_SECRET },
    type: 'Opaque',
    data: {
      'access-key-id': Buffer.from(key.accessKeyId).toString('base64'),
      'access-key-secret': Buffer.from(key.accessKeySecret).toString('base64'),
    },
  });
}
