/* eslint-disable @typescript-eslint/no-explicit-any -- schemas are free-form JSON */
import protobuf from 'protobufjs';
import YAML from 'yaml';
import type { Store } from '../core/store.js';
import type { ResourceType } from '../core/types.js';

/**
 * `/openapi/v2`: the Swagger 2.0 document kubectl reads for client-side validation (the items of a
 * `kind: List` are checked against it; single objects are validated by the server through
 * fieldValidation). kubectl asks only for the gnostic protobuf form
 * (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), so the document is served in that
 * encoding too. Built-in kinds are published as open objects (the server validates them); CRD versions
 * with their structural schema, converted as the API server does for v2.
 */
export const OPENAPI_V2_PROTOBUF = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';

// Messages of gnostic's OpenAPIv2.proto (package openapi.v2) that a schema-only document uses.
const GNOSTIC_PROTO = `
syntax = "proto3";
package openapi.v2;
message Any { string yaml = 2; }
message NamedAny { string name = 1; Any value = 2; }
message Info { string title = 1; string version = 2; }
message Paths { repeated NamedAny vendor_extension = 1; }
message TypeItem { repeated string value = 1; }
message ItemsItem { repeated Schema schema = 1; }
message NamedSchema { string name = 1; Schema value = 2; }
message Properties { repeated NamedSchema additional_properties = 1; }
message AdditionalPropertiesItem { oneof oneof { Schema schema = 1; bool boolean = 2; } }
message Definitions { repeated NamedSchema additional_properties = 1; }
message Schema {
  string _ref = 1; string format = 2; string title = 3; string description = 4;
  double maximum = 7; double minimum = 9; int64 max_length = 11; int64 min_length = 12; string pattern = 13;
  int64 max_items = 14; int64 min_items = 15; repeated string required = 19; repeated Any enum = 20;
  AdditionalPropertiesItem additional_properties = 21; TypeItem type = 22; ItemsItem items = 23;
  Properties properties = 25; repeated NamedAny vendor_extension = 31;
}
message Document { string swagger = 1; Info info = 2; Paths paths = 8; Definitions definitions = 9; }
`;
const DOCUMENT = protobuf.parse(GNOSTIC_PROTO, { keepCase: true }).root.lookupType('openapi.v2.Document');

const reverseGroup = (group: string) => group.split('.').reverse().join('.');
export const definitionName = (t: ResourceType, version: string): string =>
  t.builtin
    ? `io.k8s.api.${t.group.split('.')[0] || 'core'}.${version}.${t.kind}`
    : `${reverseGroup(t.group)}.${version}.${t.kind}`;

/** A structural v3 schema as the API server publishes it in v2 (no nullable types, int-or-string open). */
function toV2(s: any): any {
  if (!s || typeof s !== 'object') return {};
  // Fields the server keeps unknown content in, or that v2 cannot type, are published untyped.
  if (
    s['x-kubernetes-int-or-string'] ||
    s.nullable ||
    s['x-kubernetes-preserve-unknown-fields'] ||
    s.anyOf ||
    s.oneOf
  ) {
    return s.description ? { description: s.description } : {};
  }
  const out: any = {};
  for (const k of [
    'type',
    'format',
    'description',
    'required',
    'enum',
    'maximum',
    'minimum',
    'maxLength',
    'minLength',
    'pattern',
    'maxItems',
    'minItems',
  ]) {
    if (s[k] !== undefined) out[k] = s[k];
  }
  if (s.properties) out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, toV2(v)]));
  if (s.items) out.items = toV2(s.items);
  if (s.additionalProperties !== undefined)
    out.additionalProperties =
      typeof s.additionalProperties === 'object' ? toV2(s.additionalProperties) : s.additionalProperties;
  if (out.type === 'object' && !out.properties && out.additionalProperties === undefined) out.additionalProperties = {};
  return out;
}

function kindSchema(t: ResourceType, version: string): any {
  const gvk = [{ group: t.group, version, kind: t.kind }];
  const custom = t.schemas?.[version];
  if (!custom || custom['x-kubernetes-preserve-unknown-fields']) {
    return {
      type: 'object',
      description: `${t.kind} (validated by the server)`,
      additionalProperties: {},
      'x-kubernetes-group-version-kind': gvk,
    };
  }
  const schema = toV2(custom);
  schema.type = 'object';
  schema.properties = {
    ...schema.properties,
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { $ref: '#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' },
  };
  return { ...schema, 'x-kubernetes-group-version-kind': gvk };
}

/** The Swagger 2.0 document for every served kind and version. */
export function openApiV2(store: Store) {
  const definitions: Record<string, any> = {
    'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta': {
      type: 'object',
      description: 'standard object metadata',
      additionalProperties: {},
    },
  };
  for (const t of store.types.values())
    for (const v of t.versions) definitions[definitionName(t, v)] = kindSchema(t, v);
  return { swagger: '2.0', info: { title: 'Kubernetes', version: 'v1.32.4' }, paths: {}, definitions };
}

/** A JSON schema in gnostic's message form. */
function gnosticSchema(s: any): any {
  const out: any = {};
  if (s.$ref) out._ref = s.$ref;
  for (const k of ['format', 'description', 'required', 'maximum', 'minimum', 'pattern'])
    if (s[k] !== undefined) out[k] = s[k];
  for (const [k, g] of [
    ['maxLength', 'max_length'],
    ['minLength', 'min_length'],
    ['maxItems', 'max_items'],
    ['minItems', 'min_items'],
  ] as const) {
    if (s[k] !== undefined) out[g] = s[k];
  }
  if (s.type) out.type = { value: [s.type] };
  if (s.enum) out.enum = s.enum.map((e: unknown) => ({ yaml: YAML.stringify(e).trimEnd() }));
  if (s.items) out.items = { schema: [gnosticSchema(s.items)] };
  if (s.properties)
    out.properties = {
      additional_properties: Object.entries(s.properties).map(([name, v]) => ({ name, value: gnosticSchema(v) })),
    };
  if (s.additionalProperties !== undefined) {
    out.additional_properties =
      typeof s.additionalProperties === 'boolean'
        ? { boolean: s.additionalProperties }
        : { schema: gnosticSchema(s.additionalProperties) };
  }
  const ext = Object.entries(s).filter(([k]) => k.startsWith('x-'));
  if (ext.length) out.vendor_extension = ext.map(([name, v]) => ({ name, value: { yaml: YAML.stringify(v) } }));
  return out;
}

/** The document in gnostic's OpenAPIv2 protobuf encoding. */
export function openApiV2Protobuf(doc: ReturnType<typeof openApiV2>): Uint8Array {
  const message = {
    swagger: doc.swagger,
    info: doc.info,
    paths: {},
    definitions: {
      additional_properties: Object.entries(doc.definitions).map(([name, s]) => ({ name, value: gnosticSchema(s) })),
    },
  };
  return DOCUMENT.encode(DOCUMENT.fromObject(message)).finish();
}
