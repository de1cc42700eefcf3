import { describe, expect, it } from '@jest/globals';
import { nodeInfo, selectorMatches, winningClass } from '../../src/operator/class/node-info.js';

describe('node info and class selection', () => {
  it('reads the instance from providerID and labels', () => {
    const info = nodeInfo({
      metadata: {
        name: 'n1',
        labels: { 'node.kubernetes.io/instance-type': 'ecs.g7.large', 'topology.kubernetes.io/zone': 'cn-hangzhou-h' },
      },
      spec: { providerID: 'alicloud://cn-hangzhou.i-bp1abc' },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.0.5' }] },
    });
    expect(info).toMatchObject({
      instanceId: 'i-bp1abc',
      instanceType: 'ecs.g7.large',
      zoneId: 'cn-hangzhou-h',
      internalIp: '192.168.0.5',
    });
    expect(nodeInfo({ metadata: { name: 'n2' }, spec: { providerID: 'cn-hangzhou.i-demo-01' } }).instanceId).toBe(
      'i-demo-01',
    );
    expect(nodeInfo({ metadata: { name: 'n3' } }).instanceId).toBeUndefined();
  });

  it('matches label selectors and picks the highest-priority class, ties by name', () => {
    expect(
      selectorMatches(
        {
          matchLabels: { a: '1' },
          matchExpressions: [
            { key: 'b', operator: 'NotIn', values: ['x'] },
            { key: 'c', operator: 'DoesNotExist' },
          ],
        },
        { a: '1', b: 'y' },
      ),
    ).toBe(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'b', operator: 'In', values: ['x'] }] }, { b: 'y' })).toBe(
      false,
    );
    const classes = [
      { metadata: { name: 'zeta' }, spec: { priority: 5 } },
      { metadata: { name: 'alpha' }, spec: { priority: 5 } },
      { metadata: { name: 'gpu' }, spec: { priority: 9, nodeSelector: { matchLabels: { gpu: 'true' } } } },
    ];
    expect(winningClass(classes, {})?.metadata.name).toBe('alpha');
    expect(winningClass(classes, { gpu: 'true' })?.metadata.name).toBe('gpu');
    expect(winningClass([], {})).toBeUndefined();
  });
});
