import { afterEach, describe, expect, it } from '@jest/globals';
import RPCClient from '@alicloud/pop-core';
import type { EcsEmulator } from '../../../testbed/ecs/index.js';
import { DEMO_KEY, REGION, emulator } from '../../helpers/ecs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let emu: EcsEmulator | undefined;
afterEach(async () => {
  await emu?.close();
  emu = undefined;
});

/** pop-core as a careful user builds it: verbose, so that the HTTP status of an answer is seen too. */
function verbose(url: string, version: 'ecs' | 'vpc' = 'ecs') {
  const client = new (RPCClient as any)(
    { endpoint: url, apiVersion: version === 'ecs' ? '2014-05-26' : '2016-04-28', ...DEMO_KEY },
    true,
  );
  return async (action: string, params: object): Promise<{ status: number; body: any }> => {
    const [body, entry] = await client.request(action, { RegionId: REGION, ...params }, { method: 'POST' });
    return { status: entry.response.statusCode, body };
  };
}

const CREATE = { VSwitchId: 'vsw-h-pods', SecurityGroupIds: ['sg-demo-pods'] };
const secondaryEnis = (e: EcsEmulator) => e.state().enis.filter((x) => x.type === 'Secondary').length;

describe('answers that are not what the action promises', () => {
  it('http-no-code: a gateway status with a JSON body and no Code, the call not carried out', async () => {
    emu = await emulator();
    const ecs = verbose(emu.url);
    emu.setFaults({ rules: [{ action: 'DescribeNetworkInterfaces', kind: 'http-no-code', rate: 1 }] });
    const a = await ecs('DescribeNetworkInterfaces', {});
    expect(a.status).toBe(503);
    expect(Object.keys(a.body).sort()).toEqual(['Message', 'RequestId']);
    expect(a.body.Code).toBeUndefined();

    emu.setFaults({ rules: [{ action: 'CreateNetworkInterface', kind: 'http-no-code', status: 502, rate: 1 }] });
    const before = secondaryEnis(emu);
    expect((await ecs('CreateNetworkInterface', CREATE)).status).toBe(502);
    expect(secondaryEnis(emu)).toBe(before);
    expect(emu.stats().calls).toMatchObject({
      DescribeNetworkInterfaces: { HttpNoCode: 1 },
      CreateNetworkInterface: { HttpNoCode: 1 },
    });
  });

  it('missing-field: the call is carried out and its main field left out; a replay of its token answers whole', async () => {
    emu = await emulator();
    const ecs = verbose(emu.url);
    emu.setFaults({ rules: [{ action: 'CreateNetworkInterface', kind: 'missing-field', rate: 1, times: 1 }] });
    const before = secondaryEnis(emu);
    const token = 'create-token-missing-field';
    const first = await ecs('CreateNetworkInterface', { ...CREATE, ClientToken: token });
    expect(first.status).toBe(200);
    expect(first.body.NetworkInterfaceId).toBeUndefined();
    expect(first.body.RequestId).toEqual(expect.any(String));
    expect(first.body.PrivateIpSets).toBeDefined(); // only the id is gone
    expect(secondaryEnis(emu)).toBe(before + 1);
    const replay = await ecs('CreateNetworkInterface', { ...CREATE, ClientToken: token });
    expect(replay.body.NetworkInterfaceId).toMatch(/^eni-/);
    expect(secondaryEnis(emu)).toBe(before + 1);
    expect(emu.calls({ action: 'CreateNetworkInterface' }).map((c) => [c.code, c.eniId])).toEqual([
      ['MissingField', replay.body.NetworkInterfaceId],
      ['OK', replay.body.NetworkInterfaceId],
    ]);

    emu.setFaults({ rules: [{ action: 'DescribeNetworkInterfaces', kind: 'missing-field', rate: 1 }] });
    const listed = await ecs('DescribeNetworkInterfaces', {});
    expect(listed.status).toBe(200);
    expect(listed.body.NetworkInterfaceSets).toBeUndefined();
    expect(listed.body.RequestId).toEqual(expect.any(String));

    emu.setFaults({ rules: [{ action: 'DescribeVSwitches', kind: 'missing-field', field: 'TotalCount', rate: 1 }] });
    const vsw = await verbose(emu.url, 'vpc')('DescribeVSwitches', {});
    expect(vsw.body.TotalCount).toBeUndefined();
    expect(vsw.body.VSwitches.VSwitch.length).toBeGreaterThan(0);
  });

  it('wrong-field: a field of the answer set to another value', async () => {
    emu = await emulator();
    emu.setFaults({
      rules: [
        {
          action: 'DescribeNetworkInterfaces',
          kind: 'wrong-field',
          field: 'NetworkInterfaceSets',
          value: { NetworkInterfaceSet: {} },
          rate: 1,
        },
      ],
    });
    const a = await verbose(emu.url)('DescribeNetworkInterfaces', {});
    expect(a.body.NetworkInterfaceSets).toEqual({ NetworkInterfaceSet: {} });
    expect(emu.stats().calls.DescribeNetworkInterfaces).toEqual({ WrongField: 1 });
  });

  it('repeat-next-token: a page answers the token it was asked with, so following it never ends', async () => {
    emu = await emulator();
    const ecs = verbose(emu.url);
    emu.setFaults({ rules: [{ action: 'DescribeNetworkInterfaces', kind: 'repeat-next-token', rate: 1 }] });
    // A first page carries no token: it is not hit, and answers the real next one.
    const first = await ecs('DescribeNetworkInterfaces', { MaxResults: 10 });
    expect(first.body.NextToken).not.toBe('');
    const second = await ecs('DescribeNetworkInterfaces', { MaxResults: 10, NextToken: first.body.NextToken });
    expect(second.body.NextToken).toBe(first.body.NextToken);
    // The page itself is the one the token points at.
    const firstIds = first.body.NetworkInterfaceSets.NetworkInterfaceSet.map((e: any) => e.NetworkInterfaceId);
    const secondIds = second.body.NetworkInterfaceSets.NetworkInterfaceSet.map((e: any) => e.NetworkInterfaceId);
    expect(secondIds).toHaveLength(10);
    expect(secondIds.filter((id: string) => firstIds.includes(id))).toEqual([]);
    expect(emu.stats().calls.DescribeNetworkInterfaces).toEqual({ OK: 1, RepeatNextToken: 1 });
  });

  it('empty-answer: the call is carried out and answered {}, its replays too while the fault lasts', async () => {
    emu = await emulator();
    const ecs = verbose(emu.url);
    emu.setFaults({ rules: [{ action: 'CreateNetworkInterface', kind: 'empty-answer', rate: 1, times: 2 }] });
    const before = secondaryEnis(emu);
    const create = { ...CREATE, ClientToken: 'create-token-empty' };
    expect(await ecs('CreateNetworkInterface', create)).toEqual({ status: 200, body: {} });
    expect(await ecs('CreateNetworkInterface', create)).toEqual({ status: 200, body: {} });
    expect(secondaryEnis(emu)).toBe(before + 1);
    const whole = await ecs('CreateNetworkInterface', create);
    expect(emu.state().enis.some((e) => e.id === whole.body.NetworkInterfaceId)).toBe(true);
    expect(secondaryEnis(emu)).toBe(before + 1);
  });

  it('refuses answer-fault rules that cannot apply, naming the field', async () => {
    emu = await emulator();
    const put = async (rule: object) => {
      const r = await fetch(`${emu!.url}/_emulator/faults`, { method: 'PUT', body: JSON.stringify({ rules: [rule] }) });
      return { status: r.status, error: ((await r.json()) as any).error as string };
    };
    expect(await put({ kind: 'repeat-next-token', rate: 1 })).toEqual({
      status: 400,
      error:
        'faults.rules[0].action: repeat-next-token needs an action that pages by NextToken: ' +
        'DescribeNetworkInterfaces, DescribeInstances, DescribeSecurityGroups, DescribeInstanceTypes',
    });
    expect(await put({ kind: 'http-no-code', status: 200, rate: 1 })).toMatchObject({
      status: 400,
      error: expect.stringMatching(/^faults\.rules\[0\]\.status: /),
    });
    expect(await put({ kind: 'empty-answer', status: 503, rate: 1 })).toEqual({
      status: 400,
      error: 'faults.rules[0].status: only an http-no-code rule takes a status',
    });
    expect(await put({ kind: 'wrong-field', field: 'TotalCount', rate: 1 })).toEqual({
      status: 400,
      error: 'faults.rules[0]: a wrong-field rule needs a field and a value',
    });
    expect(await put({ kind: 'timeout', field: 'TotalCount', rate: 1 })).toEqual({
      status: 400,
      error: 'faults.rules[0].field: only missing-field and wrong-field rules take a field',
    });
    expect(
      await put({ action: 'DescribeVpcs', kind: 'wrong-field', field: 'TotalCount', value: 7, rate: 1 }),
    ).toMatchObject({ status: 200 });
  });
});
