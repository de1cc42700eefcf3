import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CloudError, staticCredentials, type NetworkInterface } from '../../src/cloud/index.js';
import type { EcsEmulator, FaultSpec } from '../../testbed/ecs/index.js';
import { capturingLogger, clientFor, metricValue } from '../helpers/cloud.js';
import { emulator } from '../helpers/ecs.js';

/*
 * ecs-bad-answers: answers that are not what their action promises (a gateway's 503 without a
 * Code, a list or id left out, a NextToken that comes back, a create answered {}) are errors of
 * their own, retried, counted and logged, and never read as data.
 */

const SECRET = 'BadAnswers-Secret-4e1d0b';
const KEY = { accessKeyId: 'bad-answers-key', accessKeySecret: SECRET };
const RETRY = { maxAttempts: 4, baseDelayMs: 10, maxDelayMs: 50, maxElapsedMs: 2000, attemptTimeoutMs: 1000 };
// The longest a call may take: its retry budget plus one attempt that started just before it ran out.
const DEADLINE_MS = RETRY.maxElapsedMs + RETRY.attemptTimeoutMs + 500;
const REJECTED = 'OpenAPI answer rejected: not what the action promises';
const BAD = 'Cloud.BadAnswer';

let emu: EcsEmulator;
beforeAll(async () => {
  // Enough of everything that each NextToken listing takes two pages or more.
  emu = await emulator((f) => {
    f.credentials.push(KEY);
    for (let i = 0; i < 150; i++)
      f.securityGroups.push({ id: `sg-extra-${String(i).padStart(3, '0')}`, vpcId: 'vpc-demo' });
    for (let i = 0; i < 110; i++) {
      f.instanceTypes.push({
        id: `ecs.t9.x${i}`,
        cpuCores: 2,
        memoryGiB: 4,
        eniQuantity: 2,
        eniPrivateIpAddressQuantity: 4,
        eniIpv6AddressQuantity: 0,
      });
      f.instances.push({
        id: `i-extra-${String(i).padStart(3, '0')}`,
        instanceType: 'ecs.g7.large',
        vSwitchId: 'vsw-h-nodes',
        securityGroupIds: ['sg-demo-nodes'],
      });
    }
  });
  // ENIs past one page of 500, put straight into the world (creating them through the API is not the point here).
  const vsw = emu.world.vSwitches.get('vsw-h-pods')!;
  for (let i = 0; i < 400; i++)
    emu.world.newEni({
      type: 'Secondary',
      vsw,
      securityGroupIds: ['sg-demo-pods'],
      primaryIp: vsw.pool.take(1)![0]!,
      tags: [],
    });
});
afterAll(() => emu.close());
afterEach(() => emu.clearFaults());

function client() {
  const { logger, lines } = capturingLogger();
  const c = clientFor(emu, { credentials: staticCredentials(KEY), logger, retry: RETRY });
  const rejected = () => lines.map((l) => JSON.parse(l)).filter((l) => l.msg === REJECTED);
  return Object.assign(c, { lines, rejected });
}

async function timed<T>(p: Promise<T>): Promise<{ error?: CloudError; value?: T; ms: number }> {
  const t0 = Date.now();
  try {
    return { value: await p, ms: Date.now() - t0 };
  } catch (e) {
    return { error: e as CloudError, ms: Date.now() - t0 };
  }
}

const requests = (c: ReturnType<typeof client>, action: string, code: string) =>
  metricValue(c.registry, 'eni_ipam_openapi_requests_total', { action, code });

const rule = (r: FaultSpec['rules']): FaultSpec => ({ rules: r, seed: 1 });

describe('ecs-bad-answers', () => {
  it('takes a 503 without a Code as a bad answer: retried, counted, logged with status and body, no secret', async () => {
    const c = client();
    emu.setFaults(rule([{ action: 'DescribeNetworkInterfaces', kind: 'http-no-code', rate: 1 }]));
    const r = await timed(c.api.describeNetworkInterfaces({ vpcId: 'vpc-demo' }));
    expect(r.error).toBeInstanceOf(CloudError);
    expect(r.error).toMatchObject({
      action: 'DescribeNetworkInterfaces',
      code: BAD,
      kind: 'transient',
      retryable: true,
      attempts: RETRY.maxAttempts,
      outcomeUnknown: false,
    });
    expect(r.error!.message).toMatch(/HTTP 503 without an error Code/);
    expect(r.ms).toBeLessThan(DEADLINE_MS);
    expect(await requests(c, 'DescribeNetworkInterfaces', BAD)).toBe(RETRY.maxAttempts);
    expect(await requests(c, 'DescribeNetworkInterfaces', 'OK')).toBe(0);
    expect(
      await metricValue(c.registry, 'eni_ipam_openapi_retries_total', {
        action: 'DescribeNetworkInterfaces',
        code: BAD,
      }),
    ).toBe(RETRY.maxAttempts - 1);
    const logged = c.rejected();
    expect(logged).toHaveLength(RETRY.maxAttempts);
    expect(logged[0]).toMatchObject({ level: 'warn', action: 'DescribeNetworkInterfaces', code: BAD, httpStatus: 503 });
    expect(logged[0].body).toMatch(/^\{"RequestId":"[0-9A-F-]+","Message":"The gateway could not reach/);
    expect(logged[0].body.length).toBeLessThanOrEqual(200);
    const everything = [...c.lines, r.error!.message, JSON.stringify(r.error)].join('\n');
    expect(everything).not.toContain(SECRET);
    expect(everything).not.toMatch(/Signature=|https?:\/\/127\.0\.0\.1/);
    await c.close();
  });

  it('retries a bad answer until a good one comes', async () => {
    const c = client();
    emu.setFaults(rule([{ action: 'DescribeNetworkInterfaces', kind: 'http-no-code', rate: 1, times: 2 }]));
    const enis = await c.api.describeNetworkInterfaces({ vpcId: 'vpc-demo' });
    expect(enis.length).toBe(emu.state().enis.length);
    expect(await requests(c, 'DescribeNetworkInterfaces', BAD)).toBe(2);
    expect(await requests(c, 'DescribeNetworkInterfaces', 'OK')).toBe(2); // two pages
    await c.close();
  });

  it('takes a 200 without its list, or with a list that is not one, as a bad answer, never as an empty list', async () => {
    const c = client();
    emu.setFaults(rule([{ action: 'DescribeNetworkInterfaces', kind: 'missing-field', rate: 1 }]));
    const missing = await timed(c.api.describeNetworkInterfaces({ vpcId: 'vpc-demo' }));
    expect(missing.error).toMatchObject({ code: BAD, attempts: RETRY.maxAttempts });
    expect(missing.error!.message).toMatch(/NetworkInterfaceSets is missing/);
    expect(c.rejected()[0]).toMatchObject({ httpStatus: 200, problem: 'NetworkInterfaceSets is missing' });

    const cases: Array<[string, string, unknown, RegExp]> = [
      [
        'DescribeNetworkInterfaces',
        'NetworkInterfaceSets',
        { NetworkInterfaceSet: {} },
        /NetworkInterfaceSet must be array/,
      ],
      [
        'DescribeNetworkInterfaces',
        'NetworkInterfaceSets',
        { NetworkInterfaceSet: [{ Status: 'InUse' }] },
        /NetworkInterfaceSet\[0\]\.NetworkInterfaceId is missing/,
      ],
      ['DescribeSecurityGroups', 'SecurityGroups', null, /SecurityGroups must be object/],
      ['DescribeInstances', 'Instances', { Instance: 'i-1' }, /Instances\.Instance must be array/],
      ['DescribeInstanceTypes', 'InstanceTypes', { InstanceType: [{ InstanceTypeId: 'x' }] }, /EniQuantity is missing/],
      ['DescribeVSwitches', 'TotalCount', '8', /TotalCount must be integer/],
      ['DescribeVpcs', 'Vpcs', { Vpc: [{ VpcId: 'vpc-demo' }] }, /Vpcs\.Vpc\[0\]\.CidrBlock is missing/],
    ];
    const calls: Record<string, () => Promise<unknown>> = {
      DescribeNetworkInterfaces: () => c.api.describeNetworkInterfaces({ vpcId: 'vpc-demo' }),
      DescribeSecurityGroups: () => c.api.describeSecurityGroups({ vpcId: 'vpc-demo' }),
      DescribeInstances: () => c.api.describeInstances({ ids: ['i-demo-01'] }),
      DescribeInstanceTypes: () => c.api.describeInstanceTypes(['ecs.g7.large']),
      DescribeVSwitches: () => c.api.describeVSwitches({ vpcId: 'vpc-demo' }),
      DescribeVpcs: () => c.api.describeVpcs(),
    };
    for (const [action, field, value, problem] of cases) {
      emu.setFaults(rule([{ action, kind: 'wrong-field', field, value, rate: 1 }]));
      const r = await timed(calls[action]!());
      expect(r.error).toMatchObject({ action, code: BAD, kind: 'transient' });
      expect(r.error!.message).toMatch(problem);
    }
    await c.close();
  });

  it('throws out of a listing that fails part-way: the pages read are never taken for the whole', async () => {
    const c = client();
    const pages: NetworkInterface[][] = [];
    const listing = (async () => {
      for await (const page of c.api.networkInterfacePages({ vpcId: 'vpc-demo' })) {
        pages.push(page);
        // The second page is asked for after the first is taken: from now on, answers lack their list.
        emu.setFaults(rule([{ action: 'DescribeNetworkInterfaces', kind: 'missing-field', rate: 1 }]));
      }
    })();
    const r = await timed(listing);
    expect(pages).toHaveLength(1);
    expect(pages[0]).toHaveLength(500);
    expect(r.error).toMatchObject({ code: BAD, action: 'DescribeNetworkInterfaces', attempts: RETRY.maxAttempts });
    await c.close();
  });

  it('ends a listing whose NextToken comes back with an error, in bounded time, for every NextToken listing', async () => {
    const c = client();
    const listings: Record<string, () => Promise<unknown[]>> = {
      DescribeNetworkInterfaces: () => c.api.describeNetworkInterfaces({ vpcId: 'vpc-demo' }),
      DescribeSecurityGroups: () => c.api.describeSecurityGroups({ vpcId: 'vpc-demo' }),
      DescribeInstances: () => c.api.describeInstances({ vpcId: 'vpc-demo' }),
      DescribeInstanceTypes: () => c.api.describeInstanceTypes(),
    };
    for (const [action, list] of Object.entries(listings)) {
      emu.setFaults(rule([{ action, kind: 'repeat-next-token', rate: 1 }]));
      const r = await timed(list());
      expect(r.error).toMatchObject({ action, code: BAD, kind: 'transient', attempts: RETRY.maxAttempts });
      expect(r.error!.message).toMatch(/NextToken ".+" came back on page 2; following it would page forever/);
      expect(r.ms).toBeLessThan(DEADLINE_MS);
      // The first page, then page 2 asked for again on each retry: never a third.
      expect(emu.stats().calls[action]).toMatchObject({ RepeatNextToken: RETRY.maxAttempts });
      emu.resetStats();
    }
    await c.close();
  });

  it('pages on once the repeated NextToken stops, and lists everything once', async () => {
    const c = client();
    emu.setFaults(rule([{ action: 'DescribeNetworkInterfaces', kind: 'repeat-next-token', rate: 1, times: 1 }]));
    const enis = await c.api.describeNetworkInterfaces({ vpcId: 'vpc-demo' });
    const ids = enis.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.sort()).toEqual(
      emu
        .state()
        .enis.map((e) => e.id)
        .sort(),
    );
    expect(await requests(c, 'DescribeNetworkInterfaces', BAD)).toBe(1);
    await c.close();
  });

  it('takes a page-number listing whose TotalCount does not match its pages as a bad answer', async () => {
    const c = client();
    const vSwitches = (await c.api.describeVSwitches({ vpcId: 'vpc-demo' })).length;
    expect(vSwitches).toBe(8);
    for (const [value, problem] of [
      [3, /page 1 lists 8 items where its TotalCount 3 promises 3: more than it counts/],
      [120, /page 1 lists 8 items where its TotalCount 120 promises 50: the listing would be incomplete/],
    ] as const) {
      emu.setFaults(rule([{ action: 'DescribeVSwitches', kind: 'wrong-field', field: 'TotalCount', value, rate: 1 }]));
      const r = await timed(c.api.describeVSwitches({ vpcId: 'vpc-demo' }));
      expect(r.error).toMatchObject({ action: 'DescribeVSwitches', code: BAD });
      expect(r.error!.message).toMatch(problem);
    }
    emu.setFaults(rule([{ action: 'DescribeVpcs', kind: 'missing-field', field: 'TotalCount', rate: 1 }]));
    expect((await timed(c.api.describeVpcs())).error!.message).toMatch(/TotalCount is missing/);
    await c.close();
  });

  it('answers a create answered {} with an outcome-unknown error, never an ENI without an id; its token resolves it', async () => {
    const c = client();
    const before = new Set(emu.state().enis.map((e) => e.id));
    const token = 'bad-answers-create-1';
    emu.setFaults(rule([{ action: 'CreateNetworkInterface', kind: 'empty-answer', rate: 1 }]));
    const r = await timed(
      c.api.createNetworkInterface({
        vSwitchId: 'vsw-h-pods',
        securityGroupIds: ['sg-demo-pods'],
        secondaryIpCount: 2,
        clientToken: token,
      }),
    );
    expect(r.value).toBeUndefined();
    expect(r.error).toMatchObject({
      action: 'CreateNetworkInterface',
      code: BAD,
      outcomeUnknown: true,
      attempts: RETRY.maxAttempts,
    });
    expect(r.error!.message).toMatch(/RequestId is missing/);
    expect(c.rejected()[0]).toMatchObject({ httpStatus: 200, body: '{}' });
    // It was carried out, once: every attempt carried the same ClientToken.
    const created = emu.state().enis.filter((e) => !before.has(e.id));
    expect(created).toHaveLength(1);
    const attempts = emu.calls({ action: 'CreateNetworkInterface' }).filter((x) => x.clientToken === token);
    expect(attempts.map((x) => x.code)).toEqual(Array(RETRY.maxAttempts).fill('EmptyAnswer'));
    // Once answers are whole again, the same token answers the ENI it made.
    emu.clearFaults();
    const eni = await c.api.createNetworkInterface({
      vSwitchId: 'vsw-h-pods',
      securityGroupIds: ['sg-demo-pods'],
      secondaryIpCount: 2,
      clientToken: token,
    });
    expect(eni.id).toBe(created[0]!.id);
    expect(eni.secondaryIps).toHaveLength(2);
    await c.api.deleteNetworkInterface(eni.id);
    await c.close();
  });

  it('retries a create whose id was left out with its token, and gets the one ENI it made', async () => {
    const c = client();
    const before = new Set(emu.state().enis.map((e) => e.id));
    emu.setFaults(rule([{ action: 'CreateNetworkInterface', kind: 'missing-field', rate: 1, times: 1 }]));
    const eni = await c.api.createNetworkInterface({ vSwitchId: 'vsw-h-pods', securityGroupIds: ['sg-demo-pods'] });
    const created = emu.state().enis.filter((e) => !before.has(e.id));
    expect(created.map((e) => e.id)).toEqual([eni.id]);
    expect(await requests(c, 'CreateNetworkInterface', BAD)).toBe(1);
    await c.api.deleteNetworkInterface(eni.id);
    await c.close();
  });

  it('marks any bad answer to a mutating call outcome-unknown, to a read not', async () => {
    const c = client();
    const eni = await c.api.createNetworkInterface({ vSwitchId: 'vsw-h-pods', securityGroupIds: ['sg-demo-pods'] });
    emu.setFaults(
      rule([
        {
          action: 'AssignPrivateIpAddresses',
          kind: 'wrong-field',
          field: 'AssignedPrivateIpAddressesSet',
          value: { PrivateIpSet: { PrivateIpAddress: [] } },
          rate: 1,
        },
        { action: 'DeleteNetworkInterface', kind: 'http-no-code', rate: 1 },
        { action: 'DescribeNetworkInterfaceAttribute', kind: 'empty-answer', rate: 1 },
      ]),
    );
    const assign = await timed(c.api.assignPrivateIpAddresses(eni.id, { count: 2 }));
    expect(assign.error).toMatchObject({ code: BAD, outcomeUnknown: true });
    expect(assign.error!.message).toMatch(/it lists 0 assigned addresses; 2 were asked for/);
    const del = await timed(c.api.deleteNetworkInterface(eni.id));
    expect(del.error).toMatchObject({ code: BAD, outcomeUnknown: true });
    const read = await timed(c.api.describeNetworkInterfaceAttribute(eni.id));
    expect(read.error).toMatchObject({ code: BAD, outcomeUnknown: false });
    emu.clearFaults();
    await c.api.deleteNetworkInterface(eni.id);
    await c.close();
  });

  it('takes a body of JSON null as a bad answer', async () => {
    const server: Server = createServer((_req, res) => res.writeHead(200).end('null'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { logger, lines } = capturingLogger();
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const c = clientFor({ url } as EcsEmulator, { logger, retry: { ...RETRY, maxAttempts: 2 } });
    const r = await timed(c.api.describeVpcs());
    await c.close();
    await new Promise((r) => server.close(r));
    expect(r.error).toMatchObject({ code: BAD, attempts: 2, message: expect.stringMatching(/not a JSON object/) });
    expect(lines.filter((l) => l.includes(REJECTED))).toHaveLength(2);
  });

  it('passes good answers, empty lists included, for every action the client calls', async () => {
    const c = client();
    expect(await c.api.describeNetworkInterfaces({ vpcId: 'vpc-demo', tags: { nobody: 'has-this' } })).toEqual([]);
    expect(await c.api.describeSecurityGroups({ vpcId: 'vpc-demo', tags: { nobody: 'has-this' } })).toEqual([]);
    expect(await c.api.describeInstances({ ids: ['i-none'] })).toEqual([]);
    expect(await c.api.describeInstanceTypes(['ecs.none'])).toEqual([]);
    expect(await c.api.describeVSwitches({ vpcId: 'vpc-demo', zoneId: 'cn-hangzhou-x' })).toEqual([]);
    expect(await c.api.describeVpcs('vpc-none')).toEqual([]);
    expect((await c.api.describeSecurityGroups({ vpcId: 'vpc-demo' })).length).toBe(152);
    expect((await c.api.describeInstanceTypes()).length).toBe(114);
    expect((await c.api.describeInstances({ vpcId: 'vpc-demo' })).length).toBe(134);

    const eni = await c.api.createNetworkInterface({ vSwitchId: 'vsw-j-pods', securityGroupIds: ['sg-demo-pods'] });
    expect(eni.secondaryIps).toEqual([]);
    const ips = await c.api.assignPrivateIpAddresses(eni.id, { count: 2 });
    const v6 = await c.api.assignIpv6Addresses(eni.id, { count: 1 });
    expect([ips.length, v6.length]).toEqual([2, 1]);
    await c.api.unassignPrivateIpAddresses(eni.id, ips);
    await c.api.unassignIpv6Addresses(eni.id, v6);
    await c.api.attachNetworkInterface(eni.id, 'i-demo-03');
    const attached = await c.api.describeNetworkInterfaceAttribute(eni.id);
    expect(attached).toMatchObject({ id: eni.id, secondaryIps: [], ipv6: [] });
    await new Promise((r) => setTimeout(r, 150));
    await c.api.detachNetworkInterface(eni.id, 'i-demo-03');
    await new Promise((r) => setTimeout(r, 150));
    await c.api.deleteNetworkInterface(eni.id);
    const bad = await metricValue(c.registry, 'eni_ipam_openapi_requests_total', { code: BAD });
    expect(bad).toBe(0);
    expect(c.rejected()).toEqual([]);
    await c.close();
  });
});
