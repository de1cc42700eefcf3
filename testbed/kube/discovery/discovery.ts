import { createHash } from 'node:crypto';
import { AUTH_RESOURCES } from '../auth/auth-endpoints.js';
import type { Store } from '../core/store.js';
import { groupVersion, type ResourceType } from '../core/types.js';

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

function groups(store: Store, withAuth = false): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (group: string, versions: string[]) => {
    const g = out.get(group) ?? new Set<string>();
    versions.forEach((v) => g.add(v));
    out.set(group, g);
  };
  for (const t of store.types.values()) add(t.group, t.versions);
  if (withAuth) for (const r of AUTH_RESOURCES) add(r.group, [r.version]);
  return out;
}

export const versionInfo = () => ({
  major: '1',
  minor: '32',
  gitVersion: 'v1.32.4',
  gitCommit: '59526cd4867447956156ae3a602fcbac10a2c335',
  gitTreeState: 'clean',
  buildDate: '2025-04-22T16:00:00Z',
  goVersion: 'go1.23.6',
  compiler: 'gc',
  platform: 'linux/amd64',
});

export const apiVersions = (host: string) => ({
  kind: 'APIVersions',
  versions: ['v1'],
  serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: host }],
});

function apiGroup(name: string, versions: string[]) {
  const vs = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
  return { name, versions: vs, preferredVersion: vs[0] };
}

export function apiGroupList(store: Store) {
  const list = [...groups(store, true)].filter(([g]) => g !== '').map(([g, v]) => apiGroup(g, [...v]));
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: list };
}

export function apiGroupDoc(store: Store, group: string) {
  const v = groups(store, true).get(group);
  return v ? { kind: 'APIGroup', apiVersion: 'v1', ...apiGroup(group, [...v]) } : undefined;
}

export function typesIn(store: Store, group: string, version: string): ResourceType[] {
  return [...store.types.values()].filter((t) => t.group === group && t.versions.includes(version));
}

export function apiResourceList(store: Store, group: string, version: string) {
  const types = typesIn(store, group, version);
  const auth = AUTH_RESOURCES.filter((r) => r.group === group && r.version === version).map((r) => ({
    name: r.name,
    singularName: r.subresourceOf ? '' : r.kind.toLowerCase(),
    namespaced: r.namespaced,
    ...(r.subresourceOf ? { group: r.subresourceOf.group, version: 'v1' } : {}),
    kind: r.kind,
    verbs: ['create'],
  }));
  if (!types.length && !auth.length) return undefined;
  const resources: Array<Record<string, unknown>> = types.flatMap((t) => [
    {
      name: t.resource,
      singularName: t.singular,
      namespaced: t.namespaced,
      kind: t.kind,
      verbs: VERBS,
      shortNames: t.shortNames.length ? t.shortNames : undefined,
      categories: t.categories.length ? t.categories : undefined,
    },
    ...(t.statusSubresource
      ? [
          {
            name: `${t.resource}/status`,
            singularName: '',
            namespaced: t.namespaced,
            kind: t.kind,
            verbs: ['get', 'patch', 'update'],
          },
        ]
      : []),
    ...(t.scale
      ? [
          {
            name: `${t.resource}/scale`,
            singularName: '',
            namespaced: t.namespaced,
            group: 'autoscaling',
            version: 'v1',
            kind: 'Scale',
            verbs: ['get', 'patch', 'update'],
          },
        ]
      : []),
  ]);
  resources.push(...auth);
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: groupVersion(group, version), resources };
}

const gvPath = (group: string, version: string) => (group ? `apis/${group}/${version}` : `api/${version}`);

/** The OpenAPI v3 index: one document per group-version. */
export function openApiIndex(store: Store) {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const [g, versions] of groups(store)) {
    for (const v of versions) {
      const p = gvPath(g, v);
      const hash = createHash('sha256')
        .update(JSON.stringify(openApiDoc(store, g, v)))
        .digest('hex')
        .slice(0, 32)
        .toUpperCase();
      paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=${hash}` };
    }
  }
  return { paths };
}

/**
 * A minimal OpenAPI v3 document for a group-version: a patch operation per kind with its
 * group-version-kind, the fieldValidation parameter and the patch media types it accepts
 * (strategic merge only for built-in kinds), which is what kubectl reads.
 */
export function openApiDoc(store: Store, group: string, version: string) {
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = {};
  for (const t of typesIn(store, group, version)) {
    const gvk = { group: t.group, version, kind: t.kind };
    const media = [
      'application/json-patch+json',
      'application/merge-patch+json',
      'application/apply-patch+yaml',
      ...(t.builtin ? ['application/strategic-merge-patch+json'] : []),
    ];
    const schemaName = `${t.group || 'core'}.${version}.${t.kind}`;
    const ref = { $ref: `#/components/schemas/${schemaName}` };
    const base = `/${gvPath(group, version)}${t.namespaced ? '/namespaces/{namespace}' : ''}/${t.resource}/{name}`;
    paths[base] = {
      patch: {
        operationId: `patch${t.kind}`,
        'x-kubernetes-action': 'patch',
        'x-kubernetes-group-version-kind': gvk,
        parameters: [
          { name: 'dryRun', in: 'query', schema: { type: 'string' } },
          { name: 'fieldManager', in: 'query', schema: { type: 'string' } },
          { name: 'fieldValidation', in: 'query', schema: { type: 'string' } },
          { name: 'force', in: 'query', schema: { type: 'boolean' } },
        ],
        requestBody: {
          content: Object.fromEntries(media.map((m) => [m, { schema: { type: 'object' } }])),
          required: true,
        },
        responses: { '200': { description: 'OK', content: { 'application/json': { schema: ref } } } },
      },
    };
    const custom = t.schemas?.[version];
    schemas[schemaName] = {
      ...(custom ? structuredClone(custom) : { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }),
      'x-kubernetes-group-version-kind': [gvk],
    };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.32.4' }, paths, components: { schemas } };
}
