import type { TaintSpec } from '../../src/kube/taint.js';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../src/observability/logger.js';
import { createLogger, silentLogger } from '../../src/observability/logger.js';
import { defaultWorld, nodeObject, startEcsEmulator, type EcsEmulator, type Fixture } from '../ecs/index.js';
import { lockWorkDir } from './work-dir-lock.js';
import { startControlPlane, type ControlPlane } from '../control-plane/index.js';
import { ensureUpstream } from '../control-plane/upstream.js';
import { issue } from '../control-plane/pki.js';
import { Kubelet } from './runtime/kubelet.js';
import { startKubeProxy } from './runtime/kube-proxy.js';
import { startKubeletServer, type KubeletServer } from './runtime/kubelet-server.js';
import { ClusterNetwork, runtimeUnavailable } from './runtime/network.js';
import { NodeApi } from './runtime/node-api.js';
import { NodeRegistration } from './runtime/node-registration.js';
import { servePodLog } from './runtime/pod-log.js';
import type { RawApi } from './runtime/raw-api.js';
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
  /** Kubeconfig, the control plane's state, node directories (hostPath roots, pods' volumes) go here. */
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
  kube: ControlPlane;
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
 * Service-account tokens from the API server's TokenRequest, bound to the pod, asked with the
 * node's credentials as the kubelet asks for its projected volumes (the Node authorizer lets a
 * node ask only for its own pods).
 */
export const boundTokens =
  (api: RawApi): TokenMinter =>
  async (r) => {
    const path = `/api/v1/namespaces/${r.namespace}/serviceaccounts/${r.serviceAccountName}/token`;
    const body = {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        audiences: r.audiences.length ? r.audiences : undefined,
        expirationSeconds: Math.max(600, r.expirationSeconds),
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: r.pod.name, uid: r.pod.uid },
      },
    };
    const t = await api('POST', path, body);
    if (t.status !== 201)
      throw new Error(
        `TokenRequest for ${r.namespace}/${r.serviceAccountName} refused (${t.status}): ${t.body?.message}`,
      );
    return { token: t.body.status.token, expirationTimestamp: t.body.status.expirationTimestamp };
  };

/** One node: its network namespace, its kubelet (with the node's credentials) and the kubelet's API. */
async function startNode(
  o: ClusterOptions,
  kube: ControlPlane,
  network: ClusterNetwork,
  ecs: EcsEmulator,
  index: number,
  instanceId: string,
  logger: Logger,
) {
  const inst = ecs.world.instances.get(instanceId)!;
  const ecsUrl = new URL(ecs.url);
  const net = await network.addNode(index, { host: ecsUrl.hostname, port: Number(ecsUrl.port) });
  const n = nodeObject(ecs.world, inst.id, {
    'kubernetes.io/hostname': inst.hostName,
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
  });
  const dir = join(o.workDir, 'nodes', inst.hostName);
  rmSync(dir, { recursive: true, force: true });
  const log = logger.child({ component: 'kubelet', node: inst.hostName });
  const kc = new KubeConfig();
  kc.loadFromString(await kube.nodeKubeconfig(inst.hostName));
  const api = new NodeApi(kc, inst.hostName, log);
  const kubelet = new Kubelet({
    objects: api,
    node: inst.hostName,
    network: net,
    cluster: network,
    dir,
    checkout: o.checkout ?? CHECKOUT,
    apiHost: network.hostAddress,
    apiPort: Number(new URL(kube.url).port),
    caCert: kube.caCert,
    mint: o.mint ?? boundTokens(api.api),
    logger: log,
    backoffBaseMs: o.backoffBaseMs,
  });
  const server: KubeletServer = await startKubeletServer({
    serving: await issue(kube.pki.ca, {
      subject: `CN=system:node:${inst.hostName}, O=system:nodes`,
      usage: 'server',
      sans: ['localhost', '127.0.0.1'],
    }),
    ca: kube.caCert,
    backend: {
      pod: (namespace, name) => api.get('pods', namespace, name),
      prepareExec: (pod, request) => kubelet.prepareExec(pod, request),
      serveLog: (pod, query, res) => servePodLog(kubelet, pod, query, res),
    },
  });
  const taints = o.registerWithTaints ?? [STARTUP_TAINT];
  const registration = new NodeRegistration({
    api: api.api,
    node: {
      ...n,
      status: undefined,
      spec: { ...n.spec, podCIDR: net.podCIDR, podCIDRs: [net.podCIDR], ...(taints.length ? { taints } : {}) },
    },
    addresses: [
      ...n.status.addresses,
      { type: 'Hostname', address: inst.hostName },
      { type: 'InternalDNS', address: 'localhost' },
    ],
    kubeletPort: server.port,
    log,
  });
  let proxy: Awaited<ReturnType<typeof startKubeProxy>> | undefined;
  // Each part stops whatever happened before, so a failure part-way leaves nothing running.
  const stop = async () => {
    await proxy?.stop();
    registration.stop();
    await kubelet.stop().catch(() => undefined);
    await api.stop();
    await server.close();
  };
  try {
    await registration.register();
    await api.start();
    kubelet.start();
    proxy = await startKubeProxy({
      kube,
      node: inst.hostName,
      netns: net.netns,
      hostIP: net.hostIP,
      dir: join(dir, 'kube-proxy'),
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return { name: inst.hostName, kubelet, net, stop };
}

/**
 * A local cluster: the ECS emulator and a real control plane (see testbed/control-plane) on a
 * bridge, and N nodes (one per emulated ECS instance, as a cloud provider registers them), each
 * a network namespace with a kubelet that registers the Node with the node's own credentials,
 * runs pods of eni-ipam's image and of the toolbox as local processes, outside the host network
 * through the node's CNI chain, and serves exec and logs to the API server. Needs root.
 */
export async function startCluster(o: ClusterOptions): Promise<EmulatedCluster> {
  const why = runtimeUnavailable();
  if (why) throw new Error(`cannot run emulated nodes: ${why}`);
  // DEBUG_CLUSTER=<level>: the kubelets' logs on stderr, for a test that fails.
  const logger =
    o.logger ?? (process.env.DEBUG_CLUSTER ? createLogger({ level: process.env.DEBUG_CLUSTER }) : silentLogger());
  // Refused before anything is started or written: a mistake must not break a running cluster.
  const world = o.fixture ?? defaultWorld();
  if (world.instances.length < o.nodes)
    throw new ClusterOptionError(
      `the ECS world has ${world.instances.length} instances; --nodes ${o.nodes} needs as many ` +
        '(lower --nodes, or give a --fixture with more instances)',
    );
  ensureUpstream(['kube-proxy']);
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
  let kube: ControlPlane | undefined;
  let vpc: Vpc | undefined;
  const nodeStops: Array<() => Promise<void>> = [];
  const kubelets: Kubelet[] = [];
  // Every step runs whatever an earlier one threw: no process or namespace outlives close().
  const close = async () => {
    const steps = [
      () => Promise.all(nodeStops.map((s) => s())),
      () => vpc?.stop(),
      () => kube?.close(),
      () => ecs?.close(),
      () => network.destroy(),
    ];
    let failure: unknown;
    for (const step of steps) await Promise.resolve(step()).catch((e: unknown) => (failure ??= e));
    unlock();
    if (failure) throw failure;
  };
  try {
    // RRSA: the ECS emulator's STS takes this cluster's projected service-account tokens.
    const trust: { verify?: (token: string, audiences: string[]) => string | undefined } = {};
    ecs = await startEcsEmulator({
      fixture: o.fixture,
      host: network.hostAddress,
      oidcVerifier: (token, audience) => trust.verify?.(token, [audience]),
    });
    // HTTPS, as in-cluster clients require, with the bridge address in the certificate.
    const cpDir = join(o.workDir, 'control-plane');
    rmSync(cpDir, { recursive: true, force: true });
    kube = await startControlPlane({
      workDir: cpDir,
      host: network.hostAddress,
      port: o.kubePort ?? 6443,
      sans: [network.hostAddress],
      advertiseAddress: network.hostAddress,
      controllers: true,
      scheduler: true,
    });
    const kubeconfigPath = join(o.workDir, 'kubeconfig');
    writeFileSync(kubeconfigPath, kube.kubeconfig, { mode: 0o600 });
    trust.verify = kube.verifyServiceAccountToken;
    const instances = [...ecs.world.instances.values()].slice(0, o.nodes);
    const nodes: string[] = [];
    const vpcNodes: VpcNode[] = [];
    for (const [i, inst] of instances.entries()) {
      const node = await startNode(o, kube, network, ecs, i, inst.id, logger);
      nodeStops.push(node.stop);
      kubelets.push(node.kubelet);
      nodes.push(node.name);
      // The node's eth0 stays on the bridge (the API server and the emulators are there): not the VPC's.
      vpcNodes.push({ instanceId: inst.id, netns: node.net.netns, primaryDevice: null });
    }
    vpc = await startVpc({
      world: ecs.world,
      nodes: vpcNodes,
      prefix: `ecv${network.id}-`,
      logger,
      ...o.vpc,
    });
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
export async function createAccessKeySecret(cluster: EmulatedCluster): Promise<void> {
  const key = cluster.ecs.fixture.credentials[0];
  if (!key) throw new Error('the ECS world has no credentials to put in a Secret');
  const r = await cluster.kube.rest('POST', `/api/v1/namespaces/${ACCESS_KEY_SECRET.namespace}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { ...ACCESS_KEY_SECRET },
    type: 'Opaque',
    data: {
      'access-key-id': Buffer.from(key.accessKeyId).toString('base64'),
      'access-key-secret': Buffer.from(key.accessKeySecret).toString('base64'),
    },
  });
  if (r.status !== 201 && r.status !== 409)
    throw new Error(`the AccessKey Secret was refused (${r.status}): ${r.body?.message}`);
}
