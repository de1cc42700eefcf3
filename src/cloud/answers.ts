import { Ajv, type ErrorObject } from 'ajv';
import { scrub } from './errors.js';
import type { RpcParams } from './rpc.js';

/*
 * What a good answer to each action holds (reference/ecs-openapi.md B1), checked before the client
 * reads it: a wrong answer read as right is worse than an error, since a missing list reads as
 * "nothing there" and a missing id as an ENI without one. Required is only what the API always
 * returns; other fields the client reads are checked for their type when present. An empty list
 * comes as its wrapper around an empty array (`{"NetworkInterfaceSet": []}`), which passes.
 */

const id = { type: 'string', minLength: 1 } as const;
const text = { type: 'string' } as const;
const count = { type: 'integer', minimum: 0 } as const;
/** An IPv6 /80 prefix, as the API writes one (ipv6Mode Prefix): anything else is a bad answer. */
const ipv6Prefix = { type: 'string', pattern: '^[0-9A-Fa-f:]*:[0-9A-Fa-f:]*/80$' } as const;

/** A list the API always returns, wrapped in an object named after its XML element: `{Inner: [...]}`. */
const wrapped = (inner: string, items: object) =>
  ({ type: 'object', required: [inner], properties: { [inner]: { type: 'array', items } } }) as const;
/** A wrapped list that may be left out; a list when it is there. */
const wrappedIfThere = (inner: string, items: object) =>
  ({ type: 'object', properties: { [inner]: { type: 'array', items } } }) as const;

const eniProperties = {
  NetworkInterfaceId: id,
  Status: id,
  Type: text,
  VpcId: text,
  VSwitchId: id,
  ZoneId: text,
  InstanceId: text,
  MacAddress: id,
  PrivateIpAddress: id,
  CreationTime: text,
  Attachment: { type: 'object', properties: { InstanceId: text, DeviceIndex: count } },
  PrivateIpSets: wrapped('PrivateIpSet', {
    type: 'object',
    required: ['PrivateIpAddress'],
    properties: { PrivateIpAddress: id, Primary: { type: 'boolean' } },
  }),
  Ipv4PrefixSets: wrappedIfThere('Ipv4PrefixSet', {
    type: 'object',
    required: ['Ipv4Prefix'],
    properties: { Ipv4Prefix: id },
  }),
  Ipv6Sets: wrappedIfThere('Ipv6Set', { type: 'object', required: ['Ipv6Address'], properties: { Ipv6Address: id } }),
  Ipv6PrefixSets: wrappedIfThere('Ipv6PrefixSet', {
    type: 'object',
    required: ['Ipv6Prefix'],
    properties: { Ipv6Prefix: ipv6Prefix },
  }),
  SecurityGroupIds: wrappedIfThere('SecurityGroupId', id),
  Tags: wrappedIfThere('Tag', { type: 'object', required: ['TagKey'], properties: { TagKey: text, TagValue: text } }),
} as const;

/** An ENI as a describe lists it: every ENI has an id, a status, a vSwitch, a MAC and its primary address. */
const listedEni = {
  type: 'object',
  required: ['NetworkInterfaceId', 'Status', 'VSwitchId', 'MacAddress', 'PrivateIpAddress', 'PrivateIpSets'],
  properties: eniProperties,
} as const;

const vpcTags = wrappedIfThere('Tag', { type: 'object', required: ['Key'], properties: { Key: text, Value: text } });

/** An answer: always a RequestId, then the action's own fields. */
const answer = (required: string[] = [], properties: Record<string, object> = {}) => ({
  type: 'object',
  required: ['RequestId', ...required],
  properties: { RequestId: id, ...properties },
});

const NEXT_TOKEN = { NextToken: text, TotalCount: count } as const;
const PAGE_NUMBERS = { TotalCount: count, PageNumber: count, PageSize: count } as const;

/** The number of addresses a call asked for: the named ones, else the count. */
function asked(params: RpcParams, listName: string, countName: string): number | undefined {
  const named = params[listName];
  if (Array.isArray(named) && named.length) return named.length;
  const n = params[countName];
  return typeof n === 'number' ? n : undefined;
}

/** An assign is all or nothing: a good answer lists exactly the addresses asked for. */
const assignedAll =
  (listName: string, countName: string, assigned: (a: Answer) => unknown[]) =>
  (a: Answer, params: RpcParams): string | undefined => {
    const want = asked(params, listName, countName);
    const got = assigned(a).length;
    return want === undefined || got === want
      ? undefined
      : `it lists ${got} assigned addresses; ${want} were asked for`;
  };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- an answer is checked here, then read
type Answer = any;

interface AnswerRule {
  schema: object;
  /** A promise that depends on what was asked. */
  promise?: (a: Answer, params: RpcParams) => string | undefined;
}

/** Per action the client calls (ecs.ts), what its good answer holds. */
const ANSWER_RULES: Readonly<Record<string, AnswerRule>> = {
  CreateNetworkInterface: {
    // "If NetworkInterfaceId is empty in the response, no ENI is created" (the doc), or it was and the answer lost it.
    schema: answer(['NetworkInterfaceId'], { ...eniProperties, PrivateIpSets: wrappedIfThere('PrivateIpSet', {}) }),
  },
  AttachNetworkInterface: { schema: answer() },
  DetachNetworkInterface: { schema: answer() },
  DeleteNetworkInterface: { schema: answer() },
  AssignPrivateIpAddresses: {
    // One call asks for addresses or for /28 prefixes, never both: the answer lists what was asked.
    schema: answer(['AssignedPrivateIpAddressesSet'], {
      AssignedPrivateIpAddressesSet: {
        type: 'object',
        properties: {
          NetworkInterfaceId: text,
          PrivateIpSet: wrapped('PrivateIpAddress', id),
          Ipv4PrefixSet: wrapped('Ipv4Prefixes', id),
        },
      },
    }),
    promise: (a, params) =>
      asked(params, 'Ipv4Prefix', 'Ipv4PrefixCount') !== undefined
        ? assignedAll(
            'Ipv4Prefix',
            'Ipv4PrefixCount',
            (x) => x.AssignedPrivateIpAddressesSet.Ipv4PrefixSet?.Ipv4Prefixes ?? [],
          )(a, params)
        : assignedAll(
            'PrivateIpAddress',
            'SecondaryPrivateIpAddressCount',
            (x) => x.AssignedPrivateIpAddressesSet.PrivateIpSet?.PrivateIpAddress ?? [],
          )(a, params),
  },
  UnassignPrivateIpAddresses: { schema: answer() },
  AssignIpv6Addresses: {
    // As for IPv4: one call asks for addresses or for /80 prefixes, and the answer lists what was asked.
    schema: answer([], {
      NetworkInterfaceId: text,
      Ipv6Sets: wrapped('Ipv6Address', id),
      Ipv6PrefixSets: wrapped('Ipv6Prefix', ipv6Prefix),
    }),
    promise: (a, params) =>
      asked(params, 'Ipv6Prefix', 'Ipv6PrefixCount') !== undefined
        ? assignedAll('Ipv6Prefix', 'Ipv6PrefixCount', (x) => x.Ipv6PrefixSets?.Ipv6Prefix ?? [])(a, params)
        : assignedAll('Ipv6Address', 'Ipv6AddressCount', (x) => x.Ipv6Sets?.Ipv6Address ?? [])(a, params),
  },
  UnassignIpv6Addresses: { schema: answer() },
  DescribeNetworkInterfaces: {
    schema: answer(['NetworkInterfaceSets'], {
      ...NEXT_TOKEN,
      NetworkInterfaceSets: wrapped('NetworkInterfaceSet', listedEni),
    }),
  },
  DescribeNetworkInterfaceAttribute: {
    schema: {
      ...listedEni,
      required: ['RequestId', ...listedEni.required],
      properties: { RequestId: id, ...eniProperties },
    },
  },
  DescribeInstanceTypes: {
    schema: answer(['InstanceTypes'], {
      NextToken: text,
      InstanceTypes: wrapped('InstanceType', {
        type: 'object',
        required: ['InstanceTypeId', 'EniQuantity', 'EniPrivateIpAddressQuantity'],
        properties: {
          InstanceTypeId: id,
          EniQuantity: count,
          EniPrivateIpAddressQuantity: count,
          EniIpv6AddressQuantity: count,
        },
      }),
    }),
  },
  DescribeInstances: {
    schema: answer(['Instances'], {
      ...NEXT_TOKEN,
      Instances: wrapped('Instance', {
        type: 'object',
        required: ['InstanceId', 'InstanceType', 'ZoneId', 'Status'],
        properties: {
          InstanceId: id,
          InstanceType: id,
          ZoneId: id,
          Status: id,
          VpcAttributes: {
            type: 'object',
            properties: { VpcId: text, VSwitchId: text, PrivateIpAddress: wrappedIfThere('IpAddress', text) },
          },
          SecurityGroupIds: wrappedIfThere('SecurityGroupId', id),
        },
      }),
    }),
  },
  DescribeSecurityGroups: {
    schema: answer(['SecurityGroups'], {
      ...NEXT_TOKEN,
      SecurityGroups: wrapped('SecurityGroup', {
        type: 'object',
        required: ['SecurityGroupId'],
        properties: {
          SecurityGroupId: id,
          VpcId: text,
          SecurityGroupName: text,
          Tags: eniProperties.Tags,
        },
      }),
    }),
  },
  // Page-number listings: without TotalCount a client cannot tell the last page from a short one.
  DescribeVSwitches: {
    schema: answer(['VSwitches', 'TotalCount'], {
      ...PAGE_NUMBERS,
      VSwitches: wrapped('VSwitch', {
        type: 'object',
        required: ['VSwitchId', 'VpcId', 'ZoneId', 'CidrBlock', 'AvailableIpAddressCount'],
        properties: {
          VSwitchId: id,
          VpcId: id,
          ZoneId: id,
          CidrBlock: id,
          Ipv6CidrBlock: text,
          AvailableIpAddressCount: count,
          VSwitchName: text,
          Tags: vpcTags,
        },
      }),
    }),
  },
  DescribeVpcs: {
    schema: answer(['Vpcs', 'TotalCount'], {
      ...PAGE_NUMBERS,
      Vpcs: wrapped('Vpc', {
        type: 'object',
        required: ['VpcId', 'CidrBlock'],
        properties: { VpcId: id, CidrBlock: id, VpcName: text, VSwitchIds: wrappedIfThere('VSwitchId', id) },
      }),
    }),
  },
};

const ajv = new Ajv({ strict: true, allErrors: false });
const validators = new Map(Object.entries(ANSWER_RULES).map(([action, r]) => [action, ajv.compile(r.schema)]));
/** An action not in the table (none today): its answer must at least be an answer. */
const anyAnswer = ajv.compile(answer());

/** A JSON pointer as a field path: `/Vpcs/Vpc/0/VpcId` -> `Vpcs.Vpc[0].VpcId`. */
function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .filter(Boolean)
    .map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`))
    .join('');
}

function describe(e: ErrorObject): string {
  const at = fieldPath(e.instancePath);
  if (e.keyword === 'required') {
    const missing = (e.params as { missingProperty: string }).missingProperty;
    return `${at ? `${at}.` : ''}${missing} is missing`;
  }
  return `${at || 'the body'} ${e.message ?? 'is malformed'}`;
}

/**
 * What is wrong with an answer pop-core returned (it throws only for a body with a Code), or
 * undefined for a good one. `params` are the call's, for promises that depend on what was asked.
 */
export function answerProblem(action: string, httpStatus: number | undefined, body: unknown, params: RpcParams) {
  if (httpStatus !== undefined && (httpStatus < 200 || httpStatus > 299))
    return `HTTP ${httpStatus} without an error Code (a gateway's answer, not the API's)`;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return 'the body is not a JSON object';
  const validate = validators.get(action) ?? anyAnswer;
  if (!validate(body)) return describe(validate.errors![0]!);
  return ANSWER_RULES[action]?.promise?.(body, params);
}

/** The start of a body for a log line, with anything that could carry a credential removed. */
export function bodyExcerpt(body: unknown, max = 200): string {
  let raw: string;
  try {
    raw = typeof body === 'string' ? body : (JSON.stringify(body) ?? String(body));
  } catch {
    raw = String(body);
  }
  // JSON has no spaces to end a URL at, so URLs end at a quote here; then the keys that hold credentials.
  const unkeyed = raw
    .replace(/https?:\/\/[^\s"]*/g, '<url>')
    .replace(
      /"(AccessKeySecret|AccessKeyId|SecurityToken|Signature|SignatureNonce)"\s*:\s*"[^"]*"/gi,
      '"$1":"<redacted>"',
    );
  return scrub(unkeyed).slice(0, max);
}
