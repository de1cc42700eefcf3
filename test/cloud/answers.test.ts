import { describe, expect, it } from '@jest/globals';
import { answerProblem, bodyExcerpt } from '../../src/cloud/answers.js';
import { NumberedListing, TokenListing } from '../../src/cloud/paging.js';

const RID = { RequestId: '473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E' };
const eni = {
  NetworkInterfaceId: 'eni-bp17pdijfczax1huji****',
  Status: 'Available',
  VSwitchId: 'vsw-bp16usj2p27htro3****',
  MacAddress: '00:16:3e:12:**:**',
  PrivateIpAddress: '172.17.**.**',
  PrivateIpSets: { PrivateIpSet: [{ PrivateIpAddress: '172.17.**.**', Primary: true }] },
};

describe('what a good answer holds', () => {
  it('passes the shapes the API documents, empty lists and left-out optional lists included', () => {
    expect(
      answerProblem(
        'DescribeNetworkInterfaces',
        200,
        { ...RID, NetworkInterfaceSets: { NetworkInterfaceSet: [] } },
        {},
      ),
    ).toBeUndefined();
    // An ENI without tags, IPv6 or prefixes may leave those lists out.
    expect(
      answerProblem(
        'DescribeNetworkInterfaces',
        200,
        { ...RID, NextToken: '', NetworkInterfaceSets: { NetworkInterfaceSet: [eni] } },
        {},
      ),
    ).toBeUndefined();
    expect(answerProblem('DeleteNetworkInterface', 200, RID, {})).toBeUndefined();
    expect(answerProblem('CreateNetworkInterface', 200, { ...RID, NetworkInterfaceId: 'eni-1' }, {})).toBeUndefined();
    expect(
      answerProblem(
        'DescribeVSwitches',
        200,
        { ...RID, TotalCount: 0, PageNumber: 1, PageSize: 50, VSwitches: { VSwitch: [] } },
        {},
      ),
    ).toBeUndefined();
  });

  it('names what is wrong: the status, a field left out, a field of the wrong type, a count not kept', () => {
    expect(answerProblem('DescribeVpcs', 503, { ...RID, Message: 'busy' }, {})).toBe(
      "HTTP 503 without an error Code (a gateway's answer, not the API's)",
    );
    expect(answerProblem('AttachNetworkInterface', 200, {}, {})).toBe('RequestId is missing');
    expect(answerProblem('DescribeVpcs', 200, 'ok', {})).toBe('the body is not a JSON object');
    expect(answerProblem('CreateNetworkInterface', 200, { ...RID, NetworkInterfaceId: '' }, {})).toBe(
      'NetworkInterfaceId must NOT have fewer than 1 characters',
    );
    expect(
      answerProblem(
        'DescribeNetworkInterfaces',
        200,
        { ...RID, NetworkInterfaceSets: { NetworkInterfaceSet: [{ ...eni, PrivateIpSets: {} }] } },
        {},
      ),
    ).toBe('NetworkInterfaceSets.NetworkInterfaceSet[0].PrivateIpSets.PrivateIpSet is missing');
    const assigned = { ...RID, AssignedPrivateIpAddressesSet: { PrivateIpSet: { PrivateIpAddress: ['10.0.0.2'] } } };
    expect(
      answerProblem('AssignPrivateIpAddresses', 200, assigned, { SecondaryPrivateIpAddressCount: 1 }),
    ).toBeUndefined();
    expect(answerProblem('AssignPrivateIpAddresses', 200, assigned, { SecondaryPrivateIpAddressCount: 3 })).toBe(
      'it lists 1 assigned addresses; 3 were asked for',
    );
    expect(
      answerProblem('AssignPrivateIpAddresses', 200, assigned, { PrivateIpAddress: ['10.0.0.2', '10.0.0.3'] }),
    ).toBe('it lists 1 assigned addresses; 2 were asked for');
  });

  it('holds an IPv6 prefix assign to exactly the /80s asked for', () => {
    const asked = { RegionId: 'r', NetworkInterfaceId: 'eni-1', Ipv6PrefixCount: 1 };
    const answer = (prefixes: unknown) => ({ RequestId: 'r', Ipv6PrefixSets: { Ipv6Prefix: prefixes } });
    expect(answerProblem('AssignIpv6Addresses', 200, answer(['2408:4005:3c0:a100:1::/80']), asked)).toBeUndefined();
    for (const bad of [[], ['bogus'], ['10.0.0.0/28'], ['2408:4005:3c0:a100::/64'], ['a::/80', 'b::/80']])
      expect(answerProblem('AssignIpv6Addresses', 200, answer(bad), asked)).toBeDefined();
    expect(answerProblem('AssignIpv6Addresses', 200, { RequestId: 'r' }, asked)).toBeDefined();
    // Addresses asked for are held to theirs, whatever prefixes the answer lists.
    expect(
      answerProblem('AssignIpv6Addresses', 200, answer(['a::/80']), { RegionId: 'r', Ipv6AddressCount: 2 }),
    ).toBeDefined();
  });

  it('keeps credentials and signed URLs out of a body excerpt, and keeps it short', () => {
    const body = {
      Message: 'denied: https://ecs.aliyuncs.com/?AccessKeyId=LTAI5t&Signature=abc%3D',
      Credentials: { AccessKeyId: 'STS.NUg', AccessKeySecret: 'shh-secret', SecurityToken: 'CAIS-token' },
      Pad: 'x'.repeat(500),
    };
    const excerpt = bodyExcerpt(body);
    expect(excerpt.length).toBe(200);
    expect(excerpt).not.toMatch(/LTAI5t|abc%3D|STS\.NUg|shh-secret|CAIS-token/);
    expect(excerpt).toContain('"AccessKeySecret":"<redacted>"');
  });
});

describe('listings end', () => {
  it('refuses a NextToken answered before, and a listing longer than the cap', () => {
    const listing = new TokenListing(3);
    expect(listing.problem('t1')).toBeUndefined();
    expect(listing.next('t1')).toBe('t1');
    expect(listing.problem('t1')).toBe('NextToken "t1" came back on page 2; following it would page forever');
    expect(listing.problem('t2')).toBeUndefined();
    expect(listing.next('t2')).toBe('t2');
    // A third page that would lead to a fourth.
    expect(listing.problem('t3')).toBe('still a NextToken after 3 pages, more than a listing reads');
    expect(listing.problem('')).toBeUndefined();
    expect(listing.next('')).toBeUndefined();
  });

  it('holds each numbered page to its TotalCount, and ends on the page that completes it', () => {
    const listing = new NumberedListing(50);
    expect(listing.problem(50, 120)).toBeUndefined();
    expect(listing.next(120)).toBe(false);
    expect(listing.problem(49, 120)).toBe(
      'page 2 lists 49 items where its TotalCount 120 promises 50: the listing would be incomplete',
    );
    expect(listing.problem(50, 120)).toBeUndefined();
    expect(listing.next(120)).toBe(false);
    expect(listing.problem(21, 120)).toBe(
      'page 3 lists 21 items where its TotalCount 120 promises 20: more than it counts',
    );
    expect(listing.problem(20, 120)).toBeUndefined();
    expect(listing.next(120)).toBe(true);
    const capped = new NumberedListing(10, 2);
    capped.next(1000);
    expect(capped.problem(10, 1000)).toBe('TotalCount 1000 needs more than 2 pages of 10, more than a listing reads');
  });
});
