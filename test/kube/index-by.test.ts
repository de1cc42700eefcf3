import { describe, expect, it } from '@jest/globals';
import { IndexBy } from '../../src/kube/index-by.js';

type Pod = { metadata: { name: string; namespace?: string }; spec?: { nodeName?: string } };
const pod = (name: string, nodeName?: string, namespace = 'default'): Pod => ({
  metadata: { name, namespace },
  spec: { nodeName },
});

describe('an index of an informer cache', () => {
  it('follows adds, moves and deletes; objects without the value are not indexed', () => {
    const byNode = new IndexBy<Pod>((p) => p.spec?.nodeName);
    byNode.onChange('add', pod('a', 'n1'));
    byNode.onChange('add', pod('b', 'n1'));
    byNode.onChange('add', pod('c'));
    byNode.onChange('add', pod('a', 'n2', 'other')); // same name, another namespace
    expect(byNode.get('n1').map((p) => p.metadata.name)).toEqual(['a', 'b']);
    byNode.onChange('update', pod('b', 'n2'));
    expect(byNode.get('n1').map((p) => p.metadata.name)).toEqual(['a']);
    expect(byNode.get('n2').map((p) => `${p.metadata.namespace}/${p.metadata.name}`)).toEqual(['other/a', 'default/b']);
    byNode.onChange('delete', pod('a', 'n1'));
    expect(byNode.get('n1')).toEqual([]);
    byNode.onChange('update', pod('c', 'n1'));
    expect(byNode.get('n1').map((p) => p.metadata.name)).toEqual(['c']);
    // The newest object is what the index answers.
    byNode.onChange('update', { ...pod('c', 'n1'), spec: { nodeName: 'n1' }, extra: 1 } as Pod);
    expect(byNode.get('n1')[0]).toHaveProperty('extra', 1);
  });
});
