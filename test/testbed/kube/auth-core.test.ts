import { describe, expect, it } from '@jest/globals';
import { authorize, type Attributes } from '../../../testbed/kube/auth/rbac.js';
import { Store } from '../../../testbed/kube/core/store.js';
import { ServiceAccountTokens, TOKEN_ISSUER, type Identity } from '../../../testbed/kube/auth/tokens.js';
import type { KubeObject } from '../../../testbed/kube/core/types.js';

let rv = 0;
function put(
  store: Store,
  resource: string,
  o: Omit<KubeObject, 'metadata'> & { metadata: KubeObject['metadata'] },
): KubeObject {
  const t = store.types.get(resource)!;
  const obj = { ...o, metadata: { uid: `uid-${++rv}`, resourceVersion: String(rv), ...o.metadata } };
  store.put(t, obj);
  return obj;
}

describe('service-account tokens', () => {
  const setup = () => {
    let now = Date.parse('2026-11-30T12:00:00Z');
    const store = new Store(100);
    put(store, 'namespaces', { metadata: { name: 'team' } });
    const sa = put(store, 'serviceaccounts', { metadata: { name: 'robot', namespace: 'team' } });
    const tokens = new ServiceAccountTokens(store, () => now);
    return { store, tokens, sa, advance: (s: number) => (now += s * 1000) };
  };

  it('verifies its own tokens until they expire', () => {
    const { tokens, advance } = setup();
    const { token, expirationTimestamp } = tokens.issue({
      namespace: 'team',
      serviceAccount: 'robot',
      expirationSeconds: 600,
    });
    expect(expirationTimestamp).toBe('2026-11-30T12:10:00Z');
    expect(tokens.verify(token)?.name).toBe('system:serviceaccount:team:robot');
    advance(599);
    expect(tokens.verify(token)).toBeDefined();
    advance(2);
    expect(tokens.verify(token)).toBeUndefined();
  });

  it('refuses a tampered token, another audience, and a recreated service account', () => {
    const { store, tokens, sa } = setup();
    const { token } = tokens.issue({ namespace: 'team', serviceAccount: 'robot' });
    const [h, p, sig] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: 'system:serviceaccount:kube-system:admin' })).toString('base64url')}.${sig}`;
    expect(tokens.verify(forged)).toBeUndefined();
    const sts = tokens.issue({ namespace: 'team', serviceAccount: 'robot', audiences: ['sts.aliyuncs.com'] }).token;
    expect(tokens.verify(sts)).toBeUndefined();
    expect(tokens.verify(sts, ['sts.aliyuncs.com'])?.name).toBe('system:serviceaccount:team:robot');
    expect(tokens.verify(token, [TOKEN_ISSUER])).toBeDefined();
    store.remove(store.types.get('serviceaccounts')!, sa);
    put(store, 'serviceaccounts', { metadata: { name: 'robot', namespace: 'team' } });
    expect(tokens.verify(token)).toBeUndefined();
  });

  it('refuses to issue for a missing account, a short lifetime or a pod of another uid', () => {
    const { store, tokens } = setup();
    put(store, 'pods', { metadata: { name: 'p', namespace: 'team' }, spec: {} });
    expect(() => tokens.issue({ namespace: 'team', serviceAccount: 'ghost' })).toThrow(
      'serviceaccounts "ghost" not found',
    );
    expect(() => tokens.issue({ namespace: 'team', serviceAccount: 'robot', expirationSeconds: 60 })).toThrow(
      'may not specify a duration less than 10 minutes',
    );
    expect(() =>
      tokens.issue({
        namespace: 'team',
        serviceAccount: 'robot',
        boundObject: { kind: 'Pod', name: 'p', uid: 'other' },
      }),
    ).toThrow('does not match the UID in record');
  });
});

describe('RBAC evaluation', () => {
  const user: Identity = {
    name: 'system:serviceaccount:team:op',
    groups: ['system:serviceaccounts', 'system:serviceaccounts:team', 'system:authenticated'],
  };
  const setup = (rules: object[], binding: 'ClusterRoleBinding' | 'RoleBinding' = 'ClusterRoleBinding') => {
    const store = new Store(100);
    put(store, 'clusterroles.rbac.authorization.k8s.io', { metadata: { name: 'r' }, rules });
    const subject = { kind: 'ServiceAccount', name: 'op', namespace: 'team' };
    if (binding === 'ClusterRoleBinding')
      put(store, 'clusterrolebindings.rbac.authorization.k8s.io', {
        metadata: { name: 'b' },
        roleRef: { kind: 'ClusterRole', name: 'r' },
        subjects: [subject],
      });
    else
      put(store, 'rolebindings.rbac.authorization.k8s.io', {
        metadata: { name: 'b', namespace: 'team' },
        roleRef: { kind: 'ClusterRole', name: 'r' },
        subjects: [subject],
      });
    return (a: Attributes) => authorize(store, user, a);
  };
  type ResourceAttributes = Extract<Attributes, { resourceRequest: true }>;
  const res = (a: Partial<ResourceAttributes> & { verb: string }): Attributes => ({
    resourceRequest: true,
    apiGroup: '',
    resource: 'pods',
    ...a,
  });
  const path = (p: string): Attributes => ({ resourceRequest: false, verb: 'get', path: p });

  it('matches subresources exactly or through */subresource', () => {
    const can = setup([{ apiGroups: ['apps'], resources: ['*/scale'], verbs: ['update'] }]);
    expect(
      can(res({ verb: 'update', apiGroup: 'apps', resource: 'deployments', subresource: 'scale', namespace: 'x' })),
    ).toBe(true);
    expect(can(res({ verb: 'update', apiGroup: 'apps', resource: 'deployments', namespace: 'x' }))).toBe(false);
    expect(
      can(res({ verb: 'update', apiGroup: 'apps', resource: 'deployments', subresource: 'status', namespace: 'x' })),
    ).toBe(false);
  });

  it('matches non-resource URLs exactly or by a trailing *, and only through cluster bindings', () => {
    const rules = [{ nonResourceURLs: ['/metrics', '/debug/*'], verbs: ['get'] }];
    const cluster = setup(rules);
    expect(cluster(path('/metrics'))).toBe(true);
    expect(cluster(path('/debug/pprof/heap'))).toBe(true);
    expect(cluster(path('/metrics/extra'))).toBe(false);
    expect(setup(rules, 'RoleBinding')(path('/metrics'))).toBe(false);
  });

  it('limits a RoleBinding to its namespace even when it grants a ClusterRole', () => {
    const can = setup([{ apiGroups: [''], resources: ['pods'], verbs: ['*'] }], 'RoleBinding');
    expect(can(res({ verb: 'delete', name: 'p', namespace: 'team' }))).toBe(true);
    expect(can(res({ verb: 'delete', name: 'p', namespace: 'other' }))).toBe(false);
    expect(can(res({ verb: 'list' }))).toBe(false);
  });
});
