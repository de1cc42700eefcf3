/* eslint-disable @typescript-eslint/no-explicit-any -- RBAC objects are stored JSON */
import { StatusError } from '../core/errors.js';
import type { Store } from '../core/store.js';
import type { Identity } from './tokens.js';
import type { KubeObject } from '../core/types.js';

/** What a request asks to do, as the API server's RequestInfo describes it. */
export type Attributes =
  | {
      resourceRequest: true;
      verb: string;
      apiGroup: string;
      resource: string;
      subresource?: string;
      name?: string;
      namespace?: string;
    }
  | { resourceRequest: false; verb: string; path: string };

export interface PolicyRule {
  verbs?: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

const RBAC = 'rbac.authorization.k8s.io';
const list = (store: Store, resource: string, namespace?: string): KubeObject[] => {
  const t = store.types.get(`${resource}.${RBAC}`);
  return t ? store.list(t, namespace) : [];
};

function matchesSubject(user: Identity, subject: any, bindingNamespace: string | undefined): boolean {
  switch (subject?.kind) {
    case 'User':
      return subject.name === user.name;
    case 'Group':
      return user.groups.includes(subject.name);
    case 'ServiceAccount':
      return user.name === `system:serviceaccount:${subject.namespace ?? bindingNamespace}:${subject.name}`;
    default:
      return false;
  }
}

const labelsMatch = (selector: any, labels: Record<string, string> = {}): boolean =>
  Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v) &&
  ((selector?.matchExpressions ?? []) as any[]).every((e) => {
    const has = e.key in labels;
    if (e.operator === 'In') return has && e.values.includes(labels[e.key]);
    if (e.operator === 'NotIn') return !has || !e.values.includes(labels[e.key]);
    if (e.operator === 'Exists') return has;
    return !has;
  });

/** A ClusterRole's rules, with those of the roles its aggregationRule selects. */
function clusterRoleRules(store: Store, role: KubeObject): PolicyRule[] {
  const selectors: any[] = role.aggregationRule?.clusterRoleSelectors ?? [];
  if (!selectors.length) return role.rules ?? [];
  const picked = list(store, 'clusterroles').filter(
    (r) => r !== role && selectors.some((s) => labelsMatch(s, r.metadata.labels)),
  );
  return [...(role.rules ?? []), ...picked.flatMap((r) => r.rules ?? [])];
}

function ruleAllows(rule: PolicyRule, a: Attributes): boolean {
  const has = (xs: string[] | undefined, v: string) => (xs ?? []).includes('*') || (xs ?? []).includes(v);
  if (!has(rule.verbs, a.verb)) return false;
  if (!a.resourceRequest) {
    return (rule.nonResourceURLs ?? []).some(
      (u) => u === '*' || u === a.path || (u.endsWith('*') && a.path.startsWith(u.slice(0, -1))),
    );
  }
  if (!has(rule.apiGroups, a.apiGroup)) return false;
  const combined = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const resources = rule.resources ?? [];
  const resourceOk =
    resources.includes('*') ||
    resources.includes(combined) ||
    (a.subresource !== undefined && resources.includes(`*/${a.subresource}`));
  if (!resourceOk) return false;
  return !rule.resourceNames?.length || (a.name !== undefined && rule.resourceNames.includes(a.name));
}

/** The rules the user's bindings grant: every ClusterRoleBinding's, plus the RoleBindings' of `namespace`. */
export function rulesFor(store: Store, user: Identity, namespace: string | undefined): PolicyRule[] {
  const roleRules = (ref: any, bindingNamespace: string | undefined): PolicyRule[] => {
    if (ref?.kind === 'ClusterRole') {
      const role = list(store, 'clusterroles').find((r) => r.metadata.name === ref.name);
      return role ? clusterRoleRules(store, role) : [];
    }
    const role = list(store, 'roles', bindingNamespace).find((r) => r.metadata.name === ref?.name);
    return role?.rules ?? [];
  };
  const granted = (bindings: KubeObject[], ns: string | undefined) =>
    bindings
      .filter((b) => (b.subjects ?? []).some((s: any) => matchesSubject(user, s, ns)))
      .flatMap((b) => roleRules(b.roleRef, ns));
  return [
    ...granted(list(store, 'clusterrolebindings'), undefined),
    ...(namespace ? granted(list(store, 'rolebindings', namespace), namespace) : []),
  ];
}

/**
 * RBAC as kube-apiserver evaluates it, with `system:masters` always allowed. RoleBindings never
 * grant non-resource URLs.
 */
export function authorize(store: Store, user: Identity, a: Attributes): boolean {
  if (user.groups.includes('system:masters')) return true;
  return rulesFor(store, user, a.resourceRequest ? a.namespace : undefined).some((r) => ruleAllows(r, a));
}

/** The 403 the API server answers with (k8s.io/apiserver responsewriters.forbiddenMessage). */
export function forbidden(user: Identity, a: Attributes): StatusError {
  if (!a.resourceRequest)
    return new StatusError(403, 'Forbidden', `forbidden: User "${user.name}" cannot ${a.verb} path "${a.path}"`, {});
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  const where = a.namespace ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  const reason = `User "${user.name}" cannot ${a.verb} resource "${resource}" in API group "${a.apiGroup}" ${where}`;
  const qualified = a.apiGroup ? `${a.resource}.${a.apiGroup}` : a.resource;
  const message = a.name ? `${qualified} "${a.name}" is forbidden: ${reason}` : `${qualified} is forbidden: ${reason}`;
  return new StatusError(403, 'Forbidden', message, { name: a.name, group: a.apiGroup, kind: a.resource });
}

const clusterRole = (name: string, rules: PolicyRule[]): KubeObject => ({
  apiVersion: `${RBAC}/v1`,
  kind: 'ClusterRole',
  metadata: {
    name,
    labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' },
    annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' },
  },
  rules,
});
const clusterRoleBinding = (name: string, groups: string[]): KubeObject => ({
  apiVersion: `${RBAC}/v1`,
  kind: 'ClusterRoleBinding',
  metadata: {
    name,
    labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' },
    annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' },
  },
  roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name },
  subjects: groups.map((g) => ({ apiGroup: RBAC, kind: 'Group', name: g })),
});

/** The bootstrap roles every API server creates that clients rely on (discovery, can-i, whoami, issuer discovery). */
export function bootstrapPolicy(): KubeObject[] {
  const health = ['/healthz', '/healthz/*', '/livez', '/livez/*', '/readyz', '/readyz/*', '/version', '/version/'];
  return [
    clusterRole('cluster-admin', [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
      { nonResourceURLs: ['*'], verbs: ['*'] },
    ]),
    clusterRoleBinding('cluster-admin', ['system:masters']),
    clusterRole('system:discovery', [
      { nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*', '/openapi', '/openapi/*', ...health], verbs: ['get'] },
    ]),
    clusterRoleBinding('system:discovery', ['system:authenticated']),
    clusterRole('system:public-info-viewer', [{ nonResourceURLs: health, verbs: ['get'] }]),
    clusterRoleBinding('system:public-info-viewer', ['system:authenticated', 'system:unauthenticated']),
    clusterRole('system:basic-user', [
      {
        apiGroups: ['authorization.k8s.io'],
        resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'],
        verbs: ['create'],
      },
      { apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'], verbs: ['create'] },
    ]),
    clusterRoleBinding('system:basic-user', ['system:authenticated']),
    clusterRole('system:service-account-issuer-discovery', [
      {
        nonResourceURLs: [
          '/.well-known/openid-configuration',
          '/.well-known/openid-configuration/',
          '/openid/v1/jwks',
          '/openid/v1/jwks/',
        ],
        verbs: ['get'],
      },
    ]),
    clusterRoleBinding('system:service-account-issuer-discovery', ['system:serviceaccounts']),
  ];
}
