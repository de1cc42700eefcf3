import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { ENIPoolClass } from '../../src/api/types.js';
import { createCloudClient, staticCredentials, MUTATING_ACTIONS, type CloudClient } from '../../src/cloud/index.js';
import { whatIf, type WhatIf, type WhatIfInput } from '../../src/inspect/plan.js';
import { DEFAULT_OPERATOR_CONFIG } from '../../src/operator/config.js';
import { Operator } from '../../src/operator/operator.js';
import { silentLogger } from '../../src/observability/logger.js';
import { CLUSTER_ID, POD_CLASS, allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { DEMO_KEY, REGION } from '../helpers/ecs.js';

/**
 * `kubectl eni-ipam plan` against the real thing: the what-if is made from the world as the
 * plugin sees it (the class as the API server has it, the instance type and vSwitches as the
 * cloud describes them, the operator's own resolved quotas), then the nodes join and the
 * operator fills their pools on the emulators. Calls, addresses and vSwitches must come out as
 * predicted; the time, with quotas low enough to dominate, within a factor of it.
 */

const VPC = 'vpc-demo';
const TYPE = 'ecs.g7.xlarge';
const SCALE_NODES = 8;
const PRIMARY_NODES = 6;
/** Low enough that 16 creates queue for 14 s behind a burst of 2: the quota, not the machine, sets the pace. */
const QUOTA = { perMinute: 60, burst: 2 };
const LIMITED = ['CreateNetworkInterface', 'AttachNetworkInterface'] as const;

let c: TestCluster;
let plugin: CloudClient;
let operatorClient: CloudClient;

beforeAll(async () => {
  c = await testCluster((f) => {
    // Instances of one type: 8 in zone h for the scale-up, 6 in zone i for the primary-ENI class.
    for (let n = 1; n <= SCALE_NODES + PRIMARY_NODES; n++) {
      const primary = n > SCALE_NODES;
      f.instances.push({
        id: `i-plan-${n}`,
        instanceType: TYPE,
        vSwitchId: primary ? 'vsw-i-nodes' : 'vsw-h-nodes',
        securityGroupIds: ['sg-demo-nodes'],
        hostName: `plan-${n}`,
      });
    }
    // The account's quotas as low as the operator's, with one call of slack in the burst: the
    // operator's own limiters set the pace (what the plan times), the account never throttles it.
    for (const action of LIMITED) f.quotas!.api![action] = { ...QUOTA, burst: QUOTA.burst + 1 };
  });
  plugin = createCloudClient({
    region: REGION,
    ecsEndpoint: c.ecs.url,
    vpcEndpoint: c.ecs.url,
    credentials: staticCredentials(DEMO_KEY),
  });
  c.clients.push(plugin);
  await c.addClass('scale', { ...POD_CLASS, preAllocate: 20 });
  await c.addClass('primary', {
    ...POD_CLASS,
    nodeSelector: { matchLabels: { pool: 'primary' } },
    priority: 10,
    usePrimaryENI: true,
    preAllocate: 8,
  });
  // As testCluster's startOperator, with the low quotas in the operator's own limiters.
  let op: Operator | undefined = undefined;
  operatorClient = createCloudClient({
    region: REGION,
    ecsEndpoint: c.ecs.url,
    vpcEndpoint: c.ecs.url,
    credentials: staticCredentials(DEMO_KEY),
    registry: new Registry(),
    mayMutate: () => op?.mayMutate() ?? false,
    limits: Object.fromEntries(LIMITED.map((a) => [a, QUOTA])),
  });
  c.clients.push(operatorClient);
  op = new Operator({
    kc: c.kc,
    api: operatorClient.api,
    logger: silentLogger(),
    config: {
      ...DEFAULT_OPERATOR_CONFIG,
      clusterId: CLUSTER_ID,
      vpcId: VPC,
      pollMinIntervalMs: 50,
      pollMaxIntervalMs: 400,
    },
    credentialsSource: staticCredentials(DEMO_KEY).source,
  });
  c.operators.push(op);
  await op.start();
});
afterAll(() => c.close());

/** The what-if for `nodes` nodes of the class in `zone`, from what the plugin can read now. */
async function predict(
  className: string,
  nodes: number,
  zone: string,
  nodeVSwitchId?: string,
): Promise<{ input: WhatIfInput; w: WhatIf }> {
  const cls = (await c.custom.getClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipoolclasses',
    name: className,
  })) as ENIPoolClass;
  const [type] = await plugin.api.describeInstanceTypes([TYPE]);
  const vSwitches = await plugin.api.describeVSwitches({ vpcId: VPC });
  const input: WhatIfInput = {
    className,
    spec: cls.spec,
    nodes,
    instanceType: TYPE,
    limits: { eniQuantity: type!.eniQuantity, ipv4PerEni: type!.ipv4PerEni, ipv6PerEni: type!.ipv6PerEni },
    podsPerNode: 0,
    zone,
    vpcId: VPC,
    vSwitches: vSwitches.map((v) => ({
      id: v.id,
      zoneId: v.zoneId,
      vpcId: v.vpcId,
      cidr: v.cidr,
      ...(v.ipv6Cidr ? { ipv6Cidr: v.ipv6Cidr } : {}),
      free: v.availableIpCount,
      tags: v.tags,
    })),
    ...(nodeVSwitchId ? { nodeVSwitchId } : {}),
    quotas: operatorClient.limiters.limits,
    attachDelayMs: c.ecs.fixture.delays?.attachMs ?? 0,
  };
  return { input, w: whatIf(input) };
}

/** Successful mutating calls per action answered since `since` (the emulator's journal). */
function mutatingSince(since: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of c.ecs.calls({ since }))
    if (r.code === 'OK' && MUTATING_ACTIONS.has(r.action)) out[r.action] = (out[r.action] ?? 0) + 1;
  return out;
}

/** Each vSwitch of the prediction's free addresses now, as the emulator keeps them. */
const freeNow = (w: WhatIf) =>
  Object.fromEntries(w.vSwitches.map((v) => [v.id, c.ecs.state().vSwitches.find((s) => s.id === v.id)!.free]));

async function join(from: number, count: number, labels: Record<string, string> = {}): Promise<string[]> {
  const nodes: string[] = [];
  for (let n = from; n < from + count; n++) nodes.push(await c.addNode(`i-plan-${n}`, labels));
  return nodes;
}

describe('plan predicts a scale-up on the emulators', () => {
  it('8 nodes at once: the calls, the ENIs and IPs per node and the vSwitches as predicted, the time within a factor', async () => {
    const { w } = await predict('scale', SCALE_NODES, 'cn-hangzhou-h');
    // 20 IPs a node: 14 and 6 on two ENIs, each a create and an attach; 16 of each, 14 past the burst.
    expect(w.perNode).toMatchObject({ enis: 2, ips: 20, ready: true });
    expect(w.calls).toEqual({ CreateNetworkInterface: 16, AttachNetworkInterface: 16 });
    expect(w.warnings).toContainEqual(
      'CreateNetworkInterface: 16 calls exceed its burst of 2; the last waits 14.0 s at 60 a minute',
    );

    const t0 = Date.now();
    const nodes = await join(1, SCALE_NODES);
    const pools = await allReady(c, nodes, Math.max(30_000, 3 * w.predictedSeconds * 1000));
    const measuredSeconds = (Date.now() - t0) / 1000;

    expect(mutatingSince(t0)).toEqual(w.calls);
    for (const p of pools) {
      expect(p.status!.summary).toMatchObject({ enis: w.perNode.enis, available: w.perNode.ips });
      expect(p.status!.enis!.map((e) => e.ips!.length).sort((a, b) => a - b)).toEqual([6, 14]);
    }
    expect(freeNow(w)).toEqual(Object.fromEntries(w.vSwitches.map((v) => [v.id, v.freeAfter])));
    expect(w.vSwitches.find((v) => v.id === 'vsw-h-pods')).toMatchObject({
      freeAfter: w.vSwitches.find((v) => v.id === 'vsw-h-pods')!.freeBefore - SCALE_NODES * 22,
    });

    const ratio = measuredSeconds / w.predictedSeconds;
    const throttled = LIMITED.map((a) => c.ecs.stats().calls[a]?.['Throttling.User'] ?? 0);
    console.log(
      `plan: predicted ${w.predictedSeconds.toFixed(2)} s (bound ${w.boundSeconds.toFixed(2)} s), ` +
        `measured ${measuredSeconds.toFixed(2)} s: ${ratio.toFixed(2)}x the prediction; ` +
        `throttled answers ${LIMITED.map((a, i) => `${a} ${throttled[i]}`).join(', ')}`,
    );
    expect(w.predictedSeconds).toBeGreaterThanOrEqual(w.boundSeconds);
    // The quota dominates: no operator beats it (a little slack for the buckets' refill ticks).
    expect(measuredSeconds).toBeGreaterThanOrEqual(0.5 * w.predictedSeconds);
  }, 60_000);

  it('usePrimaryENI: one assign per node from the nodes’ own vSwitch, as predicted', async () => {
    const { w } = await predict('primary', PRIMARY_NODES, 'cn-hangzhou-i', 'vsw-i-nodes');
    expect(w.perNode).toMatchObject({ enis: 0, ips: 8, ready: true });
    expect(w.calls).toEqual({ AssignPrivateIpAddresses: PRIMARY_NODES });

    const t0 = Date.now();
    const nodes = await join(SCALE_NODES + 1, PRIMARY_NODES, { pool: 'primary' });
    const pools = await allReady(c, nodes);

    expect(mutatingSince(t0)).toEqual(w.calls);
    for (const p of pools) {
      expect(p.spec.className).toBe('primary');
      expect(p.status!.summary).toMatchObject({ enis: 1, available: w.perNode.ips });
    }
    expect(freeNow(w)).toEqual(Object.fromEntries(w.vSwitches.map((v) => [v.id, v.freeAfter])));
  });
});
