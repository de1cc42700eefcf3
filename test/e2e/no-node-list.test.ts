/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, CustomObjectsApi, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { CRDS } from '../../src/api/crds.js';
import type { ENIPool } from '../../src/api/types.js';
import { createCloudClient, staticCredentials, type CloudClient } from '../../src/cloud/index.js';
import { DEFAULT_OPERATOR_CONFIG } from '../../src/operator/config.js';
import { Operator } from '../../src/operator/operator.js';
import { silentLogger, type Logger } from '../../src/observability/logger.js';
import { nodeObject, type EcsEmulator } from '../../testbed/ecs/index.js';
import type { ControlPlane } from '../../testbed/control-plane/index.js';
import { capturingLogger, metricValue } from '../helpers/cloud.js';
import { DEMO_KEY, REGION, emulator, eventually } from '../helpers/ecs.js';
import { kube as controlPlane } from '../helpers/kube.js';

let ecs: EcsEmulator;
let kube: ControlPlane;
const operators: Operator[] = [];
const clients: CloudClient[] = [];
afterAll(async () => {
  await Promise.all(operators.map((o) => o.stop()));
  await Promise.all(clients.map((c) => c.close()));
  await kube?.close();
  await ecs?.close();
});

function operator(kc: KubeConfig, logger: Logger = silentLogger()): Operator {
  let op: Operator | undefined = undefined;
  const client = createCloudClient({
    region: REGION,
    ecsEndpoint: ecs.url,
    vpcEndpoint: ecs.url,
    credentials: staticCredentials(DEMO_KEY),
    registry: new Registry(),
    mayMutate: () => op?.mayMutate() ?? false,
  });
  clients.push(client);
  op = new Operator({
    kc,
    api: client.api,
    logger,
    config: {
      ...DEFAULT_OPERATOR_CONFIG,
      clusterId: 'c-test',
      vpcId: 'vpc-demo',
      pollMinIntervalMs: 50,
      pollMaxIntervalMs: 400,
    },
    leaderElection: {
      namespace: 'default',
      name: 'eni-ipam',
      identity: `op-${operators.length}`,
      leaseDurationSeconds: 2,
      renewDeadlineSeconds: 1.5,
      retryPeriodSeconds: 0.3,
    },
  });
  operators.push(op);
  return op;
}

const ready = (p: ENIPool) => p.status?.conditions?.find((k) => k.type === 'Ready')?.status === 'True';

describe('an operator that may not list Nodes (an RBAC change, an overloaded API server)', () => {
  it('neither leads nor reports ready, and deletes no pool and no ENI, until it can', async () => {
    ecs = await emulator();
    let admin: KubeConfig;
    ({ emu: kube, kc: admin } = await controlPlane());
    await kube.createCrds(Object.values(CRDS));
    const custom = admin.makeApiClient(CustomObjectsApi);
    const core = admin.makeApiClient(CoreV1Api);
    await eventually(
      async () =>
        (await custom.listClusterCustomObject({ group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools' })) !==
        undefined,
    );
    await custom.createClusterCustomObject({
      group: 'eniipam.io',
      version: 'v1alpha1',
      plural: 'enipoolclasses',
      body: {
        apiVersion: 'eniipam.io/v1alpha1',
        kind: 'ENIPoolClass',
        metadata: { name: 'default' },
        spec: { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'], preAllocate: 4 },
      },
    });
    const nodes = ['i-demo-01', 'i-demo-02', 'i-demo-03', 'i-demo-04', 'i-demo-05', 'i-demo-06'];
    for (const id of nodes) await core.createNode({ body: nodeObject(ecs.world, id) as any });
    const first = operator(admin);
    await first.start();
    const pools = async () =>
      ((await custom.listClusterCustomObject({ group: 'eniipam.io', version: 'v1alpha1', plural: 'enipools' })) as any)
        .items as ENIPool[];
    await eventually(async () => (await pools()).length === nodes.length && (await pools()).every(ready), 90_000, 100);
    await first.stop();
    const enis = ecs
      .state()
      .enis.filter((e) => e.type === 'Secondary')
      .map((e) => e.id);

    // The operator's service account may do everything it needs but list Nodes.
    await core.createNamespacedServiceAccount({ namespace: 'default', body: { metadata: { name: 'operator' } } });
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const rules = [
      {
        apiGroups: ['eniipam.io'],
        resources: ['enipools', 'enipools/status', 'enipoolclasses', 'enipoolclasses/status'],
        verbs: ['get', 'list', 'watch', 'create', 'patch', 'update', 'delete'],
      },
      { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
    ];
    await rbac.createClusterRole({ body: { metadata: { name: 'operator' }, rules } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'operator' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'operator' },
        subjects: [{ kind: 'ServiceAccount', name: 'operator', namespace: 'default' }],
      },
    });
    // A token of the service account, from the API server's TokenRequest.
    const token = (
      await core.createNamespacedServiceAccountToken({
        namespace: 'default',
        name: 'operator',
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      })
    ).status!.token;
    const sa = new KubeConfig();
    sa.loadFromOptions({
      clusters: [{ name: 'c', server: admin.getCurrentCluster()!.server, caData: admin.getCurrentCluster()!.caData }],
      users: [{ name: 'operator', token }],
      contexts: [{ name: 'c', cluster: 'c', user: 'operator' }],
      currentContext: 'c',
    });

    const { logger, lines } = capturingLogger();
    const second = operator(sa, logger);
    void second.start();
    // Its LIST of Nodes is refused, and refused again after a back-off: long enough to have led,
    // had it campaigned (the first operator gave the lease up), and to have deleted, had it reconciled.
    const refusals = () =>
      lines.filter((l) => l.includes('"path":"/api/v1/nodes"') && l.includes('watch failed') && l.includes('403'));
    await eventually(() => refusals().length >= 2, 15_000, 100);
    expect(second.synced).toBe(false);
    expect(second.isLeader).toBe(false);
    expect((await pools()).map((p) => p.metadata.name).sort()).toEqual(
      nodes.map((id) => nodeObject(ecs.world, id).metadata.name).sort(),
    );
    expect(ecs.mutatingCalls().DeleteNetworkInterface ?? 0).toBe(0);
    expect(
      ecs
        .state()
        .enis.filter((e) => e.type === 'Secondary')
        .map((e) => e.id),
    ).toEqual(enis);

    // Allowed again: it lists, leads and finds every pool in order.
    await rbac.patchClusterRole({
      name: 'operator',
      body: [
        {
          op: 'add',
          path: '/rules/-',
          value: { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
        },
      ],
    });
    await eventually(() => second.synced && second.isLeader, 90_000, 100);
    // Once it has reconciled every pool, not after a fixed time.
    await eventually(
      async () =>
        (await metricValue(second.registry, 'eni_ipam_reconcile_duration_seconds_count', { kind: 'pool' })) >=
        nodes.length,
      15_000,
      50,
    );
    expect((await pools()).length).toBe(nodes.length);
    expect((await pools()).every(ready)).toBe(true);
    expect(ecs.mutatingCalls().DeleteNetworkInterface ?? 0).toBe(0);
  }, 150_000);
});
