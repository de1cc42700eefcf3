/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { allReady, testCluster, type TestCluster } from '../helpers/cluster.js';
import { eventually } from '../helpers/ecs.js';

let c: TestCluster;
beforeAll(async () => {
  c = await testCluster((f) => {
    for (let i = 0; i < 6; i++)
      f.securityGroups.push({ id: `sg-extra-${i}`, vpcId: 'vpc-demo', name: `extra-${i}`, tags: { tier: 'many' } });
  });
  await c.startOperator();
});
afterAll(() => c.close());

const classCondition = async (name: string) => {
  const x = (await c.custom.getClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipoolclasses',
    name,
  })) as any;
  return x.status?.conditions?.find((k: any) => k.type === 'Valid');
};

describe('bad ENIPoolClass specs', () => {
  it('are refused by the CRD schema when minAllocate exceeds maxAllocate or a size is negative', async () => {
    const err = (await c
      .addClass('inverted', {
        vSwitchTags: { role: 'pods' },
        securityGroupIDs: ['sg-demo-pods'],
        minAllocate: 10,
        maxAllocate: 5,
      })
      .catch((e: unknown) => e)) as any;
    expect(err.code).toBe(422);
    expect(JSON.parse(err.body).message).toContain(
      'spec: Invalid value: "object": minAllocate must not exceed maxAllocate (0 means the instance type’s limit)',
    );
    const neg = (await c
      .addClass('negative', { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'], preAllocate: -1 })
      .catch((e: unknown) => e)) as any;
    expect(neg.code).toBe(422);
    expect(JSON.parse(neg.body).message).toContain(
      'spec.preAllocate: Invalid value: -1: spec.preAllocate in body should be greater than or equal to 0',
    );
    // maxAllocate 0 is the instance type's limit: any minAllocate goes.
    await c.addClass('unbounded', {
      vSwitchTags: { role: 'pods' },
      securityGroupIDs: ['sg-demo-pods'],
      minAllocate: 10,
      maxAllocate: 0,
      nodeSelector: { matchLabels: { never: 'x' } },
    });
  });

  it('get Valid=False with the reason, while every other node is served', async () => {
    const selector = (v: string) => ({ nodeSelector: { matchLabels: { pool: v } } });
    await c.addClass('too-many-groups', {
      vSwitchTags: { role: 'pods' },
      securityGroupTags: { tier: 'many' },
      ...selector('a'),
    });
    await c.addClass('too-many-tags', {
      vSwitchTags: { role: 'pods' },
      securityGroupIDs: ['sg-demo-pods'],
      eniTags: Object.fromEntries(Array.from({ length: 18 }, (_, i) => [`k${i}`, 'v'])),
      ...selector('b'),
    });
    await c.addClass('reserved-tag', {
      vSwitchTags: { role: 'pods' },
      securityGroupIDs: ['sg-demo-pods'],
      eniTags: { 'eni-ipam.io/node': 'spoof' },
      ...selector('c'),
    });
    await c.addClass('fine', { vSwitchTags: { role: 'pods' }, securityGroupIDs: ['sg-demo-pods'] });
    const node = await c.addNode('i-demo-04');
    expect(await eventually(() => classCondition('too-many-groups'))).toMatchObject({
      status: 'False',
      reason: 'TooManySecurityGroups',
      message:
        '6 security groups match (sg-extra-0, sg-extra-1, sg-extra-2, sg-extra-3, sg-extra-4, sg-extra-5); an ENI joins at most 5: narrow securityGroupTags or list fewer securityGroupIDs',
    });
    expect(await eventually(() => classCondition('too-many-tags'))).toMatchObject({
      status: 'False',
      reason: 'TooManyTags',
    });
    expect((await classCondition('too-many-tags')).message).toBe(
      'eniTags has 18 tags; with the 4 ownership tags an ENI would carry 22, more than the 20 ECS allows',
    );
    expect(await eventually(() => classCondition('reserved-tag'))).toMatchObject({
      status: 'False',
      reason: 'ReservedTag',
    });
    await allReady(c, [node]);
  });
});
