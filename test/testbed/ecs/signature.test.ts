import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { percentEncode, signRpc, stringToSign } from '../../../testbed/ecs/signature.js';
import { pop } from '../../helpers/ecs.js';

describe('RPC signature (V2, HMAC-SHA1)', () => {
  it('reproduces the documented test vector', () => {
    const params = {
      AccessKeyId: 'testid',
      Action: 'DescribeRegions',
      Format: 'XML',
      SignatureMethod: 'HMAC-SHA1',
      SignatureNonce: '3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf',
      SignatureVersion: '1.0',
      Timestamp: '2016-02-23T12:46:24Z',
      Version: '2014-05-26',
    };
    expect(signRpc('GET', params, 'testsecret')).toBe('OLeaidS1JvxuMvnyHOwuJ+uX5qY=');
    expect(stringToSign('GET', params)).toMatch(/^GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeRegions/);
  });

  it('encodes as RFC 3986 with the API quirks', () => {
    expect(percentEncode("a b*c~d!'()")).toBe('a%20b%2Ac~d%21%27%28%29');
  });

  describe('matches what pop-core signs', () => {
    const seen: Array<{ method: string; params: Record<string, string> }> = [];
    let url = '';
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const u = new URL(req.url!, 'http://x');
        const params: Record<string, string> = Object.fromEntries(u.searchParams);
        for (const [k, v] of new URLSearchParams(Buffer.concat(chunks).toString())) params[k] = v;
        seen.push({ method: req.method!, params });
        res.end('{"RequestId":"x"}');
      });
    });
    beforeAll(async () => {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    it.each(['GET', 'POST'])('%s with lists, tags and reserved characters', async (method) => {
      const c = pop(url, 'ecs', { accessKeyId: 'k', accessKeySecret: 's3cret' });
      await c.request(
        'DescribeNetworkInterfaces',
        { RegionId: 'r', NetworkInterfaceId: ['eni-1', 'eni-2'], Tag: [{ Key: 'k', Value: "space*(!)'~" }] },
        { method },
      );
      const { params } = seen.pop()!;
      expect(params['NetworkInterfaceId.2']).toBe('eni-2');
      expect(params['Tag.1.Value']).toBe("space*(!)'~");
      expect(signRpc(method, params, 's3cret')).toBe(params.Signature);
    });
  });
});
