/* eslint-disable @typescript-eslint/no-explicit-any */

/** A Kubernetes object as JSON. */
export type KubeObject = {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: any;
};

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  managedFields?: ManagedFieldsEntry[];
  ownerReferences?: unknown[];
  [key: string]: any;
}

export interface ManagedFieldsEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time: string;
  fieldsType: 'FieldsV1';
  fieldsV1: Record<string, unknown>;
  subresource?: string;
}

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  format?: string;
  priority?: number;
}

/** One served resource: a built-in kind or a CRD version. */
export interface ResourceType {
  group: string;
  /** Versions served; the first is the storage version. */
  versions: string[];
  resource: string;
  kind: string;
  listKind: string;
  singular: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  statusSubresource: boolean;
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
  /** The openAPIV3Schema per version (custom resources only). */
  schemas?: Record<string, any>;
  printerColumns?: Record<string, PrinterColumn[]>;
  /** Field selectors this kind supports beyond metadata.name and metadata.namespace. */
  fieldSelectors: Record<string, (o: KubeObject) => string | undefined>;
  /** Built-in kinds accept strategic merge patch; custom resources do not. */
  builtin: boolean;
  /** Whether writes set metadata.generation. */
  generation: boolean;
}

export const groupVersion = (group: string, version: string): string => (group ? `${group}/${version}` : version);
export const typeKey = (t: Pick<ResourceType, 'group' | 'resource'>): string =>
  t.group ? `${t.resource}.${t.group}` : t.resource;
