import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CLUSTER_ID, ChaosCluster, type OperatorProcess } from '../../chaos/cluster.js';
import { Checker, deposedVerdict, leakVerdict, quotaVerdict, waitRecovered } from '../../chaos/invariants.js';
import { Workload } from '../../chaos/workload.js';
import { prefixAddresses } from '../../src/ipam/prefix.js';
import { TAGS } from '../../src/operator/eni/cloud-state.js';
import { REGION, eventually, pop } from '../helpers/ecs.js';

/** A cluster with a steady `pods` pods a node (nothing released meanwhile), its checks running. */
async function checked(o: Parameters<typeof ChaosCluster.start>[0], pods: number) {
  const cluster = await ChaosCluster.start(o);
  expect(await waitRecovered(cluster, 60_000)).toBeDefined();
  const workload = new Workload(cluster.agents, (node, name, ip) => cluster.recordPod(node, name, ip), {
    low: pods,
    high: pods,
    periodMs: 10_000,
    stepMs: 100,
  });
  const check = new Checker(cluster, workload);
  check.start();
  workload.start();
  return { cluster, workload, check };
}

let c: ChaosCluster;
let w: Workload;
let checker: Checker;
beforeAll(async () => {
  ({ cluster: c, workload: w, check: checker } = await checked({ nodes: 2, replicas: 1 }, 3));
}, 90_000);
afterAll(async () => {
  await w.stop();
  await checker.stop();
  await c.stop();
});

// The checks must be able to fail: each is shown a violation made on purpose.
describe('the fault suite\u2019s invariant checks', () => {
  it('catch an unassign of an IP a pod holds, with who did it', async () => {
    // Three pods a node, steady: nothing is released meanwhile.
    await eventually(() => w.holders().size === 6, 20_000);
    const ip = [...w.holders().keys()].find((a) =>
      [...c.ecs.world.enis.values()].some((e) => e.secondaryIps.includes(a)),
    )!;
    const eni = [...c.ecs.world.enis.values()].find((e) => e.secondaryIps.includes(ip))!;
    await checker.settle();
    expect(checker.violations['no-release-in-use']).toEqual([]);
    await pop(c.ecs.url).request('UnassignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: eni.id,
      PrivateIpAddress: [ip],
    });
    await new Promise((r) => setTimeout(r, 400));
    await checker.settle();
    expect(w.holders().has(ip)).toBe(true);
    expect(checker.violations['no-release-in-use'].join()).toContain(
      `UnassignPrivateIpAddresses of ${ip} (${eni.id}) by demo`,
    );
  });

  it('catch a burst of calls beyond an action\u2019s quota', async () => {
    const t0 = Date.now();
    expect(quotaVerdict(c, t0, Date.now() + 1).ok).toBe(true);
    const op = pop(c.ecs.url, 'ecs', {
      accessKeyId: c.operators[0]!.accessKeyId,
      accessKeySecret: `${c.operators[0]!.accessKeyId}-secret`,
    });
    // The quota is 60 a burst; throttled calls count too: they were sent.
    await Promise.allSettled(
      Array.from({ length: 70 }, () =>
        op.request('DescribeNetworkInterfaces', { RegionId: REGION, VpcId: 'vpc-bench' }),
      ),
    );
    const v = quotaVerdict(c, t0, Date.now() + 1);
    expect(v.ok).toBe(false);
    expect(v.detail).toMatch(/operator-0 DescribeNetworkInterfaces: \d+ calls in \d+ s, quota allows 6\d/);
  });

  it('catch an ENI tagged for the cluster that no pool holds', async () => {
    expect((await leakVerdict(c, 5000)).ok).toBe(true);
    await pop(c.ecs.url).request('CreateNetworkInterface', {
      RegionId: REGION,
      VSwitchId: 'vsw-0-pods',
      SecurityGroupIds: ['sg-bench-pods'],
      Tag: [
        { Key: TAGS.cluster, Value: CLUSTER_ID },
        { Key: TAGS.node, Value: 'node-x' },
      ],
    });
    const v = await leakVerdict(c, 1000);
    expect(v.ok).toBe(false);
    // Other ENIs may be on their way into a pool at that moment; the leaked one must be named.
    expect(v.detail).toMatch(/^after 1 s: \d+ ENIs in the cloud in no pool \(.*eni-\w+ of node-x Available/);
  });

  it('catch a mutating call from a replica after it read another holder, past one retry period', async () => {
    // A replica of its own AccessKey, as the suite records one from its "lost leadership" line.
    const key = { accessKeyId: 'operator-5', accessKeySecret: 'operator-5-secret' };
    const deposed = { accessKeyId: key.accessKeyId, accessKeyIds: new Set([key.accessKeyId]) } as OperatorProcess;
    await pop(c.ecs.url, 'ecs', key)
      .request('DeleteNetworkInterface', { RegionId: REGION, NetworkInterfaceId: 'eni-gone' })
      .catch(() => undefined); // refused (no such ENI), but sent: it counts
    const sentAt = c.ecs.calls({ accessKeyId: key.accessKeyId }).at(-1)!.at;
    deposed.steppedDown = { at: sentAt - 1000, reason: 'other-holder', holder: 'someone' };
    expect(deposedVerdict(c, [deposed])).toEqual({
      ok: true,
      detail: expect.stringMatching(
        /^operator-5 read another holder \(someone\) at \S+: last mutating call \+1\.0 s from then, none after the grace$/,
      ),
    });
    deposed.steppedDown = { at: sentAt - 5000, reason: 'other-holder', holder: 'someone' };
    expect(deposedVerdict(c, [deposed])).toEqual({
      ok: false,
      detail: expect.stringMatching(
        /: last mutating call \+5\.0 s from then, 1 after the grace: DeleteNetworkInterface \+5\.0 s$/,
      ),
    });
  });
});

describe('the fault suite\u2019s invariant checks, on ENIs of /28 prefixes', () => {
  let pc: ChaosCluster;
  let pw: Workload;
  let pchecker: Checker;
  beforeAll(async () => {
    ({
      cluster: pc,
      workload: pw,
      check: pchecker,
    } = await checked({ nodes: 1, replicas: 1, classSpec: { ipv4Mode: 'Prefix' } }, 2));
  }, 90_000);
  afterAll(async () => {
    await pw.stop();
    await pchecker.stop();
    await pc.stop();
  });

  it('catch an unassign of a prefix one of whose addresses a pod holds', async () => {
    await eventually(() => pw.holders().size === 2, 20_000);
    const ip = [...pw.holders().keys()][0]!;
    const eni = [...pc.ecs.world.enis.values()].find((e) =>
      e.ipv4Prefixes.some((p) => prefixAddresses(p).includes(ip)),
    )!;
    const prefix = eni.ipv4Prefixes.find((p) => prefixAddresses(p).includes(ip))!;
    await pchecker.settle();
    expect(pchecker.violations['no-release-in-use']).toEqual([]);
    await pop(pc.ecs.url).request('UnassignPrivateIpAddresses', {
      RegionId: REGION,
      NetworkInterfaceId: eni.id,
      Ipv4Prefix: [prefix],
    });
    await new Promise((r) => setTimeout(r, 400));
    await pchecker.settle();
    expect(pchecker.violations['no-release-in-use'].join()).toContain(
      `UnassignPrivateIpAddresses of ${ip} (${eni.id}) by demo`,
    );
  });
});
