import RPCClient from '@alicloud/pop-core';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { signRpc, type EcsEmulator } from '../../../testbed/ecs/index.js';
import { DEMO_KEY, REGION, emulator, failure, pop } from '../../helpers/ecs.js';

let emu: EcsEmulator;
beforeAll(async () => {
  emu = await emulator();
});
afterAll(() => emu.close());

/** A request signed by hand, for the cases pop-core cannot produce (reused nonce, old timestamp). */
async function signedCall(extra: Record<string, string>, opts: { secret?: string; method?: string } = {}) {
  const params: Record<string, string> = {
    Action: 'DescribeVpcs',
    Version: '2016-04-28',
    Format: 'JSON',
    AccessKeyId: DEMO_KEY.accessKeyId,
    SignatureMethod: 'HMAC-SHA1',
    SignatureVersion: '1.0',
    SignatureNonce: `n-${Math.random()}`,
    Timestamp: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    RegionId: REGION,
    ...extra,
  };
  const method = opts.method ?? 'GET';
  params.Signature = signRpc(method, params, opts.secret ?? DEMO_KEY.accessKeySecret);
  const res = await fetch(`${emu.url}/?${new URLSearchParams(params)}`, { method });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

describe('common parameters and authentication', () => {
  it('answers a signed GET and a signed POST from pop-core', async () => {
    const vpc = pop(emu.url, 'vpc');
    const get = (await vpc.request('DescribeVpcs', { RegionId: REGION })) as {
      Vpcs: { Vpc: Array<{ VpcId: string }> };
      RequestId: string;
    };
    const post = (await vpc.request('DescribeVpcs', { RegionId: REGION }, { method: 'POST' })) as typeof get;
    expect(get.Vpcs.Vpc.map((v) => v.VpcId)).toEqual(['vpc-demo']);
    expect(post.Vpcs.Vpc).toHaveLength(1);
    expect(get.RequestId).toMatch(/^[0-9A-F-]{36}$/);
  });

  it('rejects a wrong secret with SignatureDoesNotMatch and the server string to sign', async () => {
    const f = await failure(
      pop(emu.url, 'ecs', { accessKeyId: 'demo', accessKeySecret: 'wrong' }).request('DescribeInstances', {
        RegionId: REGION,
      }),
    );
    expect(f.code).toBe('SignatureDoesNotMatch');
    expect(f.status).toBe(400);
    expect(f.data.Message).toContain('server string to sign is:GET&%2F&');
    expect(Object.keys(f.data).sort()).toEqual(['Code', 'HostId', 'Message', 'Recommend', 'RequestId']);
    expect(f.data.HostId).toBe('ecs.cn-hangzhou.aliyuncs.com');
  });

  it('rejects an unknown AccessKeyId', async () => {
    const f = await failure(
      pop(emu.url, 'ecs', { accessKeyId: 'nobody', accessKeySecret: 'x' }).request('DescribeInstances', {
        RegionId: REGION,
      }),
    );
    expect(f.code).toBe('InvalidAccessKeyId.NotFound');
  });

  it('rejects a reused nonce with SignatureNonceUsed', async () => {
    const first = await signedCall({ SignatureNonce: 'fixed-nonce-1' });
    expect(first.status).toBe(200);
    const again = await signedCall({ SignatureNonce: 'fixed-nonce-1' });
    expect(again).toMatchObject({ status: 400, body: { Code: 'SignatureNonceUsed' } });
  });

  it('rejects a timestamp more than 15 minutes off, and a malformed one', async () => {
    const old = new Date(Date.now() - 20 * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    expect(await signedCall({ Timestamp: old })).toMatchObject({ status: 400, body: { Code: 'IllegalTimestamp' } });
    expect(await signedCall({ Timestamp: 'yesterday' })).toMatchObject({
      status: 400,
      body: { Code: 'IllegalTimestamp' },
    });
  });

  it('names a missing common parameter', async () => {
    const r = await signedCall({ SignatureNonce: '' });
    expect(r.body.Code).toBe('MissingParameter');
    expect(r.body.Message).toContain('SignatureNonce');
  });

  it('answers an unknown action, an action of the other product and an unknown version', async () => {
    const ecs = pop(emu.url, 'ecs');
    expect(await failure(ecs.request('DescribeUnicorns', { RegionId: REGION }))).toMatchObject({
      code: 'InvalidAction.NotFound',
      status: 404,
    });
    expect((await failure(ecs.request('DescribeVSwitches', { RegionId: REGION }))).code).toBe('InvalidAction.NotFound');
    const f = await failure(
      new RPCClient({ endpoint: emu.url, apiVersion: '2099-01-01', ...DEMO_KEY }).request('DescribeInstances', {}),
    );
    expect(f).toMatchObject({ code: 'InvalidParameter', status: 400 });
  });

  it('requires RegionId on regional actions and knows only its region', async () => {
    const ecs = pop(emu.url, 'ecs');
    const f = await failure(ecs.request('DescribeInstances', {}));
    expect(f.code).toBe('MissingParameter');
    expect(f.data.Message).toContain('RegionId');
    expect((await failure(ecs.request('DescribeInstances', { RegionId: 'us-west-1' }))).code).toBe(
      'InvalidRegionId.NotFound',
    );
    // DescribeInstanceTypes takes no RegionId.
    await expect(ecs.request('DescribeInstanceTypes', {})).resolves.toBeDefined();
  });

  it('refuses other HTTP methods', async () => {
    const res = await fetch(`${emu.url}/?Action=DescribeVpcs`, { method: 'PUT' });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { Code: string }).Code).toBe('UnsupportedHTTPMethod');
  });

  it('answers invalid parameter values with InvalidParameter naming the parameter', async () => {
    const f = await failure(pop(emu.url).request('DescribeNetworkInterfaces', { RegionId: REGION, PageSize: 'many' }));
    expect(f).toMatchObject({ code: 'InvalidParameter', status: 400 });
    expect(f.data.Message).toContain('PageSize');
  });
});
