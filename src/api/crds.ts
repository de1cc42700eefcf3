import { GROUP, VERSION, eniPoolClassSpec, eniPoolClassStatus, eniPoolSpec, eniPoolStatus } from './types.js';
import type { JsonSchema } from './schema-builder.js';

interface CrdInput {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  spec: JsonSchema;
  status: JsonSchema;
  columns: Array<{ name: string; type: string; jsonPath: string; description?: string; priority?: number }>;
}

function crd(i: CrdInput) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${i.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Cluster',
      names: {
        kind: i.kind,
        listKind: `${i.kind}List`,
        plural: i.plural,
        singular: i.singular,
        shortNames: i.shortNames,
        categories: ['eni-ipam'],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: i.columns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: i.spec,
                status: i.status,
              },
              required: ['spec'],
            },
          },
        },
      ],
    },
  };
}

/** The CRDs, generated from the types in types.ts (`npm run gen:crds` writes them to crds/). */
export const CRDS = {
  enipoolclasses: crd({
    kind: 'ENIPoolClass',
    plural: 'enipoolclasses',
    singular: 'enipoolclass',
    shortNames: ['enipc'],
    spec: { ...eniPoolClassSpec.schema, default: {} },
    status: eniPoolClassStatus.schema,
    columns: [
      { name: 'Priority', type: 'integer', jsonPath: '.spec.priority' },
      { name: 'Nodes', type: 'integer', jsonPath: '.status.matchedNodes', description: 'Nodes this class selects.' },
      { name: 'Valid', type: 'string', jsonPath: '.status.conditions[?(@.type=="Valid")].status' },
      { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Valid")].reason', priority: 1 },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
    ],
  }),
  enipools: crd({
    kind: 'ENIPool',
    plural: 'enipools',
    singular: 'enipool',
    shortNames: ['enip'],
    spec: eniPoolSpec.schema,
    status: eniPoolStatus.schema,
    columns: [
      { name: 'Instance-Type', type: 'string', jsonPath: '.spec.instanceType' },
      { name: 'ENIs', type: 'integer', jsonPath: '.status.summary.enis' },
      {
        name: 'Available',
        type: 'integer',
        jsonPath: '.status.summary.available',
        description: 'IPs on attached ENIs (eniMode Exclusive: attached ENIs for pods; Used: those pods hold).',
      },
      { name: 'Used', type: 'integer', jsonPath: '.status.summary.used' },
      { name: 'Needed', type: 'integer', jsonPath: '.status.summary.needed' },
      {
        name: 'Batch',
        type: 'integer',
        jsonPath: '.status.summary.batch',
        description: 'IPs a growth step carries beyond the need, learned from the node\u2019s demand.',
        priority: 1,
      },
      {
        name: 'Prefixes',
        type: 'integer',
        jsonPath: '.status.summary.prefixes',
        description: 'IPv4 /28 prefixes on attached ENIs (ipv4Mode Prefix).',
        priority: 1,
      },
      {
        name: 'IPv6',
        type: 'integer',
        jsonPath: '.status.summary.availableIPv6',
        description: 'IPv6 addresses on attached ENIs (dual-stack); Available and Used count IPv4.',
        priority: 1,
      },
      { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
      { name: 'Mode', type: 'string', jsonPath: '.spec.ipv4Mode', priority: 1 },
      { name: 'ENI-Mode', type: 'string', jsonPath: '.spec.eniMode', priority: 1 },
      { name: 'Families', type: 'string', jsonPath: '.spec.ipFamilies', priority: 1 },
      { name: 'Zone', type: 'string', jsonPath: '.spec.zoneID', priority: 1 },
      { name: 'Class', type: 'string', jsonPath: '.spec.className', priority: 1 },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
    ],
  }),
};
