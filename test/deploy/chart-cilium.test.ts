import { describe, expect, it } from '@jest/globals';
import { CREDENTIAL_FORMS, REQUIRED as BASE, template, type K8sObject } from '../helpers/helm.js';

const REQUIRED = [...BASE, ...CREDENTIAL_FORMS.ramRole!];

const rulesOf = (objects: K8sObject[]) =>
  objects
    .filter((o) => o.kind === 'ClusterRole' && (o.metadata as { name: string }).name.endsWith('-operator'))
    .flatMap(
      (o) => (o as unknown as { rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> }).rules,
    );

describe('chart, operator.poolApi', () => {
  it('ciliumnode: the operator serves CiliumNodes, may update them and their status, and no eni-ipam agent runs', async () => {
    const objects = await template([...REQUIRED, 'operator.poolApi=ciliumnode']);
    const operator = objects.find((o) => o.kind === 'Deployment')!;
    expect(JSON.stringify(operator)).toContain('--pool-api=ciliumnode');
    expect(objects.some((o) => o.kind === 'DaemonSet')).toBe(false);
    // Nor its service account and roles: least privilege.
    expect(objects.filter((o) => (o.metadata as { name: string }).name.endsWith('-agent'))).toEqual([]);
    const cilium = rulesOf(objects).filter((r) => r.apiGroups.includes('cilium.io'));
    expect(cilium).toEqual([
      { apiGroups: ['cilium.io'], resources: ['ciliumnodes'], verbs: ['get', 'list', 'watch', 'update'] },
      { apiGroups: ['cilium.io'], resources: ['ciliumnodes/status'], verbs: ['update'] },
    ]);
  });

  it('enipool (the default): no right on CiliumNodes, and the agent DaemonSet', async () => {
    const objects = await template([...REQUIRED]);
    expect(JSON.stringify(objects.find((o) => o.kind === 'Deployment'))).toContain('--pool-api=enipool');
    expect(rulesOf(objects).some((r) => r.apiGroups.includes('cilium.io'))).toBe(false);
    expect(objects.filter((o) => o.kind === 'DaemonSet')).toHaveLength(1);
  });

  it('refuses an unknown pool API', async () => {
    await expect(template([...REQUIRED, 'operator.poolApi=crd'])).rejects.toThrow(/poolApi/);
  });
});
