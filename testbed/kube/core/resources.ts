/* eslint-disable @typescript-eslint/no-explicit-any */
import type { StatusCause } from './errors.js';
import { structuralErrors } from './schema.js';
import type { KubeObject, ResourceType } from './types.js';

function builtin(
  group: string,
  version: string,
  resource: string,
  kind: string,
  o: Partial<ResourceType> = {},
): ResourceType {
  return {
    group,
    versions: [version],
    resource,
    kind,
    listKind: `${kind}List`,
    singular: kind.toLowerCase(),
    namespaced: true,
    shortNames: [],
    categories: [],
    statusSubresource: false,
    fieldSelectors: {},
    builtin: true,
    generation: false,
    ...o,
  };
}

const REPLICAS = { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas' };

/**
 * The built-in kinds the product needs; RBAC is stored, workloads run when a cluster's controllers
 * do (testbed/cluster).
 */
export function builtinTypes(): ResourceType[] {
  const cluster = { namespaced: false };
  return [
    builtin('', 'v1', 'namespaces', 'Namespace', {
      ...cluster,
      shortNames: ['ns'],
      statusSubresource: true,
      fieldSelectors: { 'status.phase': (o) => o.status?.phase },
    }),
    builtin('', 'v1', 'nodes', 'Node', {
      ...cluster,
      shortNames: ['no'],
      statusSubresource: true,
      fieldSelectors: { 'spec.unschedulable': (o) => String(Boolean(o.spec?.unschedulable)) },
    }),
    builtin('', 'v1', 'pods', 'Pod', {
      shortNames: ['po'],
      categories: ['all'],
      statusSubresource: true,
      generation: true,
      fieldSelectors: {
        'spec.nodeName': (o) => o.spec?.nodeName ?? '',
        'status.phase': (o) => o.status?.phase ?? '',
        'status.podIP': (o) => o.status?.podIP ?? '',
      },
    }),
    builtin('', 'v1', 'configmaps', 'ConfigMap', { shortNames: ['cm'] }),
    builtin('', 'v1', 'secrets', 'Secret', { fieldSelectors: { type: (o) => o.type ?? '' } }),
    builtin('', 'v1', 'serviceaccounts', 'ServiceAccount', { shortNames: ['sa'] }),
    builtin('', 'v1', 'services', 'Service', { shortNames: ['svc'], categories: ['all'], statusSubresource: true }),
    builtin('', 'v1', 'events', 'Event', {
      shortNames: ['ev'],
      fieldSelectors: Object.fromEntries(
        ['kind', 'namespace', 'name', 'uid', 'apiVersion', 'resourceVersion', 'fieldPath'].map((f) => [
          `involvedObject.${f}`,
          (o: KubeObject) => o.involvedObject?.[f] ?? '',
        ]),
      ) as ResourceType['fieldSelectors'],
    }),
    builtin('coordination.k8s.io', 'v1', 'leases', 'Lease'),
    builtin('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', 'CustomResourceDefinition', {
      ...cluster,
      shortNames: ['crd', 'crds'],
      statusSubresource: true,
      generation: true,
    }),
    builtin('rbac.authorization.k8s.io', 'v1', 'roles', 'Role'),
    builtin('rbac.authorization.k8s.io', 'v1', 'rolebindings', 'RoleBinding'),
    builtin('rbac.authorization.k8s.io', 'v1', 'clusterroles', 'ClusterRole', cluster),
    builtin('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', 'ClusterRoleBinding', cluster),
    builtin('apps', 'v1', 'deployments', 'Deployment', {
      shortNames: ['deploy'],
      categories: ['all'],
      statusSubresource: true,
      generation: true,
      scale: REPLICAS,
    }),
    builtin('apps', 'v1', 'replicasets', 'ReplicaSet', {
      shortNames: ['rs'],
      categories: ['all'],
      statusSubresource: true,
      generation: true,
      scale: REPLICAS,
    }),
    builtin('apps', 'v1', 'daemonsets', 'DaemonSet', {
      shortNames: ['ds'],
      categories: ['all'],
      statusSubresource: true,
      generation: true,
    }),
    builtin('policy', 'v1', 'poddisruptionbudgets', 'PodDisruptionBudget', {
      shortNames: ['pdb'],
      statusSubresource: true,
      generation: true,
    }),
  ];
}

/** Checks a CRD and returns what is wrong with it, as 422 causes. */
export function crdErrors(crd: KubeObject): StatusCause[] {
  const s = crd.spec ?? {};
  const out: StatusCause[] = [];
  const req = (field: string, v: unknown) => {
    if (v === undefined || v === '' || (Array.isArray(v) && v.length === 0))
      out.push({ reason: 'FieldValueRequired', field, message: `${field}: Required value` });
  };
  req('spec.group', s.group);
  req('spec.names.plural', s.names?.plural);
  req('spec.names.kind', s.names?.kind);
  req('spec.versions', s.versions);
  if (s.scope !== 'Namespaced' && s.scope !== 'Cluster') {
    out.push({
      reason: 'FieldValueNotSupported',
      field: 'spec.scope',
      message: `spec.scope: Unsupported value: "${s.scope ?? ''}": supported values: "Cluster", "Namespaced"`,
    });
  }
  if (s.group && s.names?.plural && crd.metadata.name !== `${s.names.plural}.${s.group}`) {
    out.push({
      reason: 'FieldValueInvalid',
      field: 'metadata.name',
      message: `metadata.name: Invalid value: "${crd.metadata.name}": must be spec.names.plural+"."+spec.group`,
    });
  }
  const versions: any[] = s.versions ?? [];
  if (versions.length && versions.filter((v) => v.storage).length !== 1) {
    out.push({
      reason: 'FieldValueInvalid',
      field: 'spec.versions',
      message: 'spec.versions: Invalid value: must have exactly one version marked as storage version',
    });
  }
  versions.forEach((v, i) => {
    out.push(...structuralErrors(v.schema?.openAPIV3Schema, `spec.versions[${i}].schema.openAPIV3Schema`));
  });
  return out;
}

/** The served resource a (valid) CRD defines. */
export function crdType(crd: KubeObject): ResourceType {
  const s = crd.spec;
  const versions: any[] = (s.versions as any[]).filter((v) => v.served !== false);
  const storage = versions.find((v) => v.storage) ?? versions[0];
  const ordered = [storage, ...versions.filter((v) => v !== storage)];
  const sub = storage.subresources ?? {};
  return {
    group: s.group,
    versions: ordered.map((v) => v.name),
    resource: s.names.plural,
    kind: s.names.kind,
    listKind: s.names.listKind ?? `${s.names.kind}List`,
    singular: s.names.singular ?? s.names.kind.toLowerCase(),
    namespaced: s.scope === 'Namespaced',
    shortNames: s.names.shortNames ?? [],
    categories: s.names.categories ?? [],
    statusSubresource: Boolean(sub.status),
    scale: sub.scale,
    schemas: Object.fromEntries(ordered.map((v) => [v.name, v.schema?.openAPIV3Schema])),
    printerColumns: Object.fromEntries(ordered.map((v) => [v.name, v.additionalPrinterColumns ?? []])),
    fieldSelectors: Object.fromEntries(
      ((storage.selectableFields ?? []) as Array<{ jsonPath: string }>).map((f) => [
        f.jsonPath.replace(/^\./, ''),
        (o: KubeObject) => {
          const v = f.jsonPath
            .replace(/^\./, '')
            .split('.')
            .reduce((x: any, k) => x?.[k], o);
          return v === undefined ? undefined : String(v);
        },
      ]),
    ),
    builtin: false,
    generation: true,
  };
}

/** Fills the CRD defaults and the status a real API server sets once the names are accepted. */
export function acceptCrd(crd: KubeObject, now: string): void {
  const n = crd.spec.names;
  n.singular ??= n.kind.toLowerCase();
  n.listKind ??= `${n.kind}List`;
  crd.spec.conversion ??= { strategy: 'None' };
  crd.status = {
    conditions: [
      {
        type: 'NamesAccepted',
        status: 'True',
        lastTransitionTime: now,
        reason: 'NoConflicts',
        message: 'no conflicts found',
      },
      {
        type: 'Established',
        status: 'True',
        lastTransitionTime: now,
        reason: 'InitialNamesAccepted',
        message: 'the initial names have been accepted',
      },
    ],
    acceptedNames: { ...n },
    storedVersions: (crd.spec.versions as any[]).filter((v) => v.storage).map((v) => v.name),
  };
}
