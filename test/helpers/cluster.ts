/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import type { Clock } from '../../src/clock.js';
import { CRDS } from '../../src/api/crds.js';
import type { ENIPool, ENIPoolClass } from '../../src/api/types.js';
import {
  createCloudClient,
  staticCredentials,
  type CloudClient,
  type Credentials,
  type CredentialsProvider,
  type RetryPolicy,
} from '../../src/cloud/index.js';
import { DEFAULT_OPERATOR_CONFIG, type OperatorConfig } from '../../src/operator/config.js';
import { Operator, type LeaderElectionConfig } from '../../src/operator/operator.js';
import { createLogger, silentLogger, type Logger } from '../../src/observability/logger.js';
import { nodeObject, type EcsEmulator, type Fixture } from '../../testbed/ecs/index.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { DEMO_KEY, REGION, emulator, eventually } from './ecs.js';
import { http, kube } from './kube.js';

export const CLUSTER_ID = 'c-test';

export interface TestCluster {
  ecs: EcsEmulator;
  kube: ControlPlane;
  kc: KubeConfig;
  custom: CustomObjectsApi;
  operators: Operator[];
  clients: CloudClient[];
  startOperator(o?: {
    config?: Partial<OperatorConfig>;
    leaderElection?: LeaderElectionConfig;
    logger?: Logger;
    retry?: Partial<RetryPolicy>;
    /** Default: the emulator's demo AccessKey. */
    credentials?: CredentialsProvider;
    ecsEndpoint?: string;
    /** Default: the system's clock. */
    clock?: Clock;
  }): Promise<Operator>;
  /** Registers the instance's Node, with `taints` as kubelet's --register-with-taints would. */
  addNode(
    instanceId: string,
    labels?: Record<string, string>,
    o?: {
      taints?: Array<{ key: string; value?: string; effect: string }>;
      /** Registered without spec.providerID (which, once set, no update may remove). */
      withoutProviderID?: boolean;
    },
  ): Promise<string>;
  addClass(name: string, spec: ENIPoolClass['spec']): Promise<void>;
  pool(name: string): Promise<ENIPool>;
  pools(): Promise<ENIPool[]>;
  mutatingCalls(): Record<string, number>;
  close(): Promise<void>;
}

/** The ECS emulator and a real control plane, the CRDs installed, and operators started in-process on demand. */
export async function testCluster(patch?: (f: Fixture) => void): Promise<TestCluster> {
  const ecs = await emulator(patch);
  const { emu: kubeEmu, kc } = await kube();
  await kubeEmu.createCrds(Object.values(CRDS));
  const custom = kc.makeApiClient(CustomObjectsApi);
  const operators: Operator[] = [];
  const clients: CloudClient[] = [];
  const cluster: TestCluster = {
    ecs,
    kube: kubeEmu,
    kc,
    custom,
    operators,
    clients,
    async startOperator(o = {}) {
      let op: Operator | undefined = undefined;
      const client = createCloudClient({
        region: REGION,
        ecsEndpoint: o.ecsEndpoint ?? ecs.url,
        vpcEndpoint: o.ecsEndpoint ?? ecs.url,
        credentials: o.credentials ?? staticCredentials(DEMO_KEY),
        registry: new Registry(),
        mayMutate: () => op?.mayMutate() ?? false,
        retry: o.retry,
      });
      clients.push(client);
      op = new Operator({
        kc,
        api: client.api,
        logger:
          o.logger ??
          (process.env.DEBUG_OPERATOR ? createLogger({ level: process.env.DEBUG_OPERATOR }) : silentLogger()),
        config: {
          ...DEFAULT_OPERATOR_CONFIG,
          clusterId: CLUSTER_ID,
          vpcId: 'vpc-demo',
          pollMinIntervalMs: 50,
          pollMaxIntervalMs: 400,
          ...o.config,
        },
        leaderElection: o.leaderElection,
        credentialsSource: (o.credentials ?? staticCredentials(DEMO_KEY)).source,
        clock: o.clock,
      });
      operators.push(op);
      await op.start();
      return op;
    },
    async addNode(instanceId, labels = {}, o = {}) {
      const node = nodeObject(ecs.world, instanceId, labels);
      const spec: Record<string, unknown> = { ...node.spec, ...(o.taints ? { taints: o.taints } : {}) };
      if (o.withoutProviderID) delete spec.providerID;
      const body = { ...node, spec };
      const r = await http(kubeEmu, 'POST', '/api/v1/nodes', body);
      if (r.status !== 201) throw new Error(`node not created: ${JSON.stringify(r.body)}`);
      return node.metadata.name;
    },
    async addClass(name, spec) {
      await custom.createClusterCustomObject({
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipoolclasses',
        body: { apiVersion: 'eniipam.io/v1alpha1', kind: 'ENIPoolClass', metadata: { name }, spec },
      });
    },
    pool: async (name) =>
      (await custom.getClusterCustomObject({
        group: 'eniipam.io',
        version: 'v1alpha1',
        plural: 'enipools',
        name,
      })) as ENIPool,
    pools: async () =>
      ((await custom.listClusterCustomObject({ group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools' })) as any)
        .items as ENIPool[],
    mutatingCalls: () => ecs.mutatingCalls(),
    async close() {
      await Promise.all(operators.map((o) => o.stop().catch(() => undefined)));
      await Promise.all(clients.map((c) => c.close()));
      await kubeEmu.close();
      await ecs.close();
    },
  };
  return cluster;
}

/** The class most e2e cases use: the default world's pod vSwitches and security group. */
export const POD_CLASS = { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'] };

/** The demo AccessKey with a wrong secret: every call is refused (SignatureDoesNotMatch). */
export const WRONG_KEY: Credentials = { accessKeyId: 'demo', accessKeySecret: 'not-the-secret' };

/** Credentials a test can change, as a rotated Secret changes the files the operator reads. */
export function switchableCredentials(initial: Credentials): CredentialsProvider & { set(c: Credentials): void } {
  let current = initial;
  return {
    source: 'files in /etc/eni-ipam/credentials',
    getCredentials: async () => current,
    set: (next) => (current = next),
  };
}

/** Short lease timings (4 s / 3 s / 1 s) on the `eni-ipam-operator` Lease in `default`, for `identity`. */
export const shortLease = (identity: string): LeaderElectionConfig => ({
  namespace: 'default',
  name: 'eni-ipam-operator',
  identity,
  leaseDurationSeconds: 4,
  renewDeadlineSeconds: 3,
  retryPeriodSeconds: 1,
});

/** An object's condition of a type, as read from the API server. */
export const conditionOf = (o: { status?: { conditions?: any[] } } | undefined, type: string) =>
  o?.status?.conditions?.find((x: any) => x.type === type);

export const ready = (p: ENIPool): boolean => p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

/** Waits until the node's pool passes `test`, and answers it. */
export const poolWhere = (
  c: Pick<TestCluster, 'pool'>,
  node: string,
  test: (p: ENIPool) => boolean,
  timeoutMs?: number,
): Promise<ENIPool> =>
  eventually(async () => {
    const p = await c.pool(node);
    return test(p) ? p : undefined;
  }, timeoutMs);

/** Waits until every pool of the given nodes is Ready. */
export async function allReady(c: TestCluster, nodes: string[], timeoutMs = 30_000): Promise<ENIPool[]> {
  try {
    return await eventually(
      async () => {
        const pools = await c.pools();
        const mine = pools.filter((p) => nodes.includes(p.metadata.name));
        return mine.length === nodes.length && mine.every(ready) ? mine : undefined;
      },
      timeoutMs,
      100,
    );
  } catch (e) {
    // Say which pools are not Ready, and what they say, rather than only that one is not.
    const pools = await c.pools();
    const why = nodes.flatMap((n) => {
      const pool = pools.find((p) => p.metadata.name === n);
      if (!pool) return [`${n}: no pool`];
      if (ready(pool)) return [];
      const cond = pool.status?.conditions?.find((x) => x.type === 'Ready');
      return [`${n}: ${cond ? `${cond.reason}: ${cond.message}` : 'no Ready condition'}`];
    });
    throw new Error(`${(e as Error).message}; not Ready: ${why.join('; ')}`);
  }
}

/** Writes a pool's status fields as its node agent does (a merge patch of the status subresource). */
export function writeAsAgent(c: Pick<TestCluster, 'custom'>, node: string, status: Record<string, unknown>) {
  return c.custom.patchClusterCustomObjectStatus(
    { group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools', name: node, body: { status } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** Deletes a node's pool as a user does (`kubectl delete enipool`): its finalizer holds it for the teardown. */
export function deletePool(c: Pick<TestCluster, 'custom'>, node: string) {
  return c.custom.deleteClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipools',
    name: node,
  });
}

/** A node agent in this process for `node`, its state in a fresh directory, ready once it has its pool. */
export async function startAgentFor(
  c: Pick<TestCluster, 'kc'>,
  node: string,
  o: { cooldownMs: number; statusIntervalMs: number; dir?: string },
): Promise<Agent> {
  const agent = new Agent({
    kc: c.kc,
    node,
    stateDir: o.dir ?? mkdtempSync(join(tmpdir(), 'agent-')),
    cooldownMs: o.cooldownMs,
    statusIntervalMs: o.statusIntervalMs,
    logger: silentLogger(),
    registry: new Registry(),
  });
  await agent.start();
  await eventually(() => agent.ready);
  return agent;
}

/** The Events about one object (a pool, a class, a node), as `Reason: message`, in the order listed. */
export async function eventsFor(c: Pick<TestCluster, 'kc'>, name: string): Promise<string[]> {
  const list = await c.kc
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace: 'default', fieldSelector: `involvedObject.name=${name}` });
  return list.items.map((e) => `${e.reason}: ${e.message}`);
}
