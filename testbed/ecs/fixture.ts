import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import YAML from 'yaml';
import { cidrContains, parseCidr4 } from './addresses.js';
import { parseFaultSpec, type FaultSpec } from './faults.js';
import type { OidcRole } from './sts.js';
import { describeSchemaError } from '../harness/schema-errors.js';

/** The emulated world: one region with its VPCs, vSwitches, instances, quotas and credentials. */
export interface Fixture {
  region: string;
  credentials: Array<{ accessKeyId: string; accessKeySecret: string }>;
  /** ECS RAM roles whose temporary credentials the metadata path hands out. */
  ramRoles?: Array<{ name: string; credentialTtlSeconds?: number }>;
  /** RAM roles that STS AssumeRoleWithOIDC hands out for a service-account token (RRSA). */
  oidcRoles?: OidcRole[];
  vpcs: Array<{ id: string; cidr: string; name?: string }>;
  vSwitches: Array<{
    id: string;
    vpcId: string;
    zoneId: string;
    cidr: string;
    ipv6Cidr?: string;
    name?: string;
    tags?: Record<string, string>;
    /** Addresses held by resources outside the emulation. */
    foreignUsedIps?: number;
  }>;
  securityGroups: Array<{ id: string; vpcId: string; name?: string; tags?: Record<string, string> }>;
  instanceTypes: Array<{
    id: string;
    family?: string;
    cpuCores: number;
    memoryGiB: number;
    /** ENIs attachable, the primary included. */
    eniQuantity: number;
    /** Private IPv4 addresses per ENI, the ENI's primary included. */
    eniPrivateIpAddressQuantity: number;
    eniIpv6AddressQuantity: number;
    /**
     * The MTU its ENIs carry in the emulated VPC: 1500 (the default), or 8500 for a type with
     * jumbo frames. The ECS API does not report it; the VPC in network namespaces (testbed/vpc) uses it.
     */
    mtu?: 1500 | 8500;
  }>;
  instances: Array<{
    id: string;
    instanceType: string;
    vSwitchId: string;
    securityGroupIds: string[];
    status?: 'Running' | 'Stopped' | 'Pending' | 'Starting' | 'Stopping';
    hostName?: string;
    primaryIp?: string;
  }>;
  quotas?: {
    /** Secondary ENIs the account may hold in the region. */
    enisPerRegion?: number;
    /** Per-action call quotas, in calls per minute with a burst (default: the per-minute figure). */
    api?: Record<string, { perMinute: number; burst?: number }>;
    /** HTTP status of a Throttling.User answer (ECS's is undocumented; 400 by default). */
    throttlingStatus?: number;
  };
  limits?: {
    /** SecondaryPrivateIpAddressCount on CreateNetworkInterface (ECS: 1-49). */
    createSecondaryIpsMax?: number;
    /** IPs per AssignPrivateIpAddresses call on an ENI that is not attached. */
    assignPerCallWhenAvailable?: number;
  };
  /** How long the asynchronous transitions take, in (scaled) milliseconds. */
  delays?: { attachMs?: number; detachMs?: number; deleteMs?: number };
  /** Run quotas and delays this many times faster than real time. */
  timeScale?: number;
  faults?: FaultSpec;
}

const str = { type: 'string', minLength: 1 } as const;
const tags = { type: 'object', additionalProperties: { type: 'string' } } as const;
const cidr4 = { type: 'string', pattern: '^\\d{1,3}(\\.\\d{1,3}){3}/\\d{1,2}$' } as const;
const posInt = { type: 'integer', minimum: 1 } as const;

const schema = {
  type: 'object',
  additionalProperties: false,
  required: ['region', 'credentials', 'vpcs', 'vSwitches', 'securityGroups', 'instanceTypes', 'instances'],
  properties: {
    region: str,
    credentials: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['accessKeyId', 'accessKeySecret'],
        properties: { accessKeyId: str, accessKeySecret: str },
      },
    },
    oidcRoles: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['roleArn', 'oidcProviderArn', 'token'],
        properties: {
          roleArn: str,
          oidcProviderArn: str,
          token: str,
          credentialTtlSeconds: { type: 'integer', minimum: 60 },
        },
      },
    },
    ramRoles: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name'],
        properties: { name: str, credentialTtlSeconds: { type: 'integer', minimum: 60 } },
      },
    },
    vpcs: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'cidr'],
        properties: { id: str, cidr: cidr4, name: str },
      },
    },
    vSwitches: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'vpcId', 'zoneId', 'cidr'],
        properties: {
          id: str,
          vpcId: str,
          zoneId: str,
          cidr: cidr4,
          ipv6Cidr: { type: 'string', pattern: '^[0-9a-fA-F:]+/64$' },
          name: str,
          tags,
          foreignUsedIps: { type: 'integer', minimum: 0 },
        },
      },
    },
    securityGroups: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'vpcId'],
        properties: { id: str, vpcId: str, name: str, tags },
      },
    },
    instanceTypes: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        additionalProperties: false,
        required: [
          'id',
          'cpuCores',
          'memoryGiB',
          'eniQuantity',
          'eniPrivateIpAddressQuantity',
          'eniIpv6AddressQuantity',
        ],
        properties: {
          id: str,
          family: str,
          cpuCores: posInt,
          memoryGiB: { type: 'number', exclusiveMinimum: 0 },
          eniQuantity: posInt,
          eniPrivateIpAddressQuantity: posInt,
          eniIpv6AddressQuantity: { type: 'integer', minimum: 0 },
          mtu: { enum: [1500, 8500] },
        },
      },
    },
    instances: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'instanceType', 'vSwitchId', 'securityGroupIds'],
        properties: {
          id: str,
          instanceType: str,
          vSwitchId: str,
          securityGroupIds: { type: 'array', minItems: 1, maxItems: 5, items: str },
          status: { enum: ['Running', 'Stopped', 'Pending', 'Starting', 'Stopping'] },
          hostName: str,
          primaryIp: { type: 'string', pattern: '^\\d{1,3}(\\.\\d{1,3}){3}$' },
        },
      },
    },
    quotas: {
      type: 'object',
      additionalProperties: false,
      properties: {
        enisPerRegion: { type: 'integer', minimum: 0 },
        api: {
          type: 'object',
          additionalProperties: {
            type: 'object',
            additionalProperties: false,
            required: ['perMinute'],
            properties: { perMinute: { type: 'number', exclusiveMinimum: 0 }, burst: posInt },
          },
        },
        throttlingStatus: { type: 'integer', minimum: 400, maximum: 599 },
      },
    },
    limits: {
      type: 'object',
      additionalProperties: false,
      properties: {
        createSecondaryIpsMax: { type: 'integer', minimum: 1, maximum: 49 },
        assignPerCallWhenAvailable: { type: 'integer', minimum: 1, maximum: 50 },
      },
    },
    delays: {
      type: 'object',
      additionalProperties: false,
      properties: {
        attachMs: { type: 'number', minimum: 0 },
        detachMs: { type: 'number', minimum: 0 },
        deleteMs: { type: 'number', minimum: 0 },
      },
    },
    timeScale: { type: 'number', exclusiveMinimum: 0 },
    faults: { type: 'object' },
  },
} as const;

export class FixtureError extends Error {}

const ajv = new Ajv({ allErrors: false, strict: true, verbose: true });
const validateShape = ajv.compile(schema);

/** Checks the shape and the cross-references of a fixture; throws FixtureError naming the field. */
export function validateFixture(data: unknown): Fixture {
  if (!validateShape(data)) throw new FixtureError(describeSchemaError(validateShape.errors![0]!));
  const f = data as Fixture;
  const fail = (field: string, why: string): never => {
    throw new FixtureError(`${field}: ${why}`);
  };
  const unique = (items: Array<{ id: string }>, field: string): Set<string> => {
    const seen = new Set<string>();
    items.forEach((it, i) => {
      if (seen.has(it.id)) fail(`${field}[${i}].id`, `duplicate id "${it.id}"`);
      seen.add(it.id);
    });
    return seen;
  };
  const checkCidr = (c: string, field: string): void => {
    try {
      parseCidr4(c);
    } catch {
      fail(field, `"${c}" is not a valid IPv4 CIDR`);
    }
  };
  const vpcs = unique(f.vpcs, 'vpcs');
  f.vpcs.forEach((v, i) => checkCidr(v.cidr, `vpcs[${i}].cidr`));
  unique(f.vSwitches, 'vSwitches');
  f.vSwitches.forEach((s, i) => {
    const at = `vSwitches[${i}]`;
    if (!vpcs.has(s.vpcId)) fail(`${at}.vpcId`, `VPC "${s.vpcId}" is not in vpcs`);
    checkCidr(s.cidr, `${at}.cidr`);
    const vpc = f.vpcs.find((v) => v.id === s.vpcId)!;
    if (!cidrContains(vpc.cidr, s.cidr)) fail(`${at}.cidr`, `${s.cidr} is outside VPC ${vpc.id} (${vpc.cidr})`);
    const bits = parseCidr4(s.cidr).bits;
    if (bits < 16 || bits > 29) fail(`${at}.cidr`, `a vSwitch mask must be /16 to /29, got /${bits}`);
    f.vSwitches.slice(0, i).forEach((o, j) => {
      if (o.vpcId === s.vpcId && (cidrContains(o.cidr, s.cidr) || cidrContains(s.cidr, o.cidr))) {
        fail(`${at}.cidr`, `${s.cidr} overlaps vSwitches[${j}] (${o.cidr})`);
      }
    });
    if ((s.foreignUsedIps ?? 0) > 2 ** (32 - bits) - 4) fail(`${at}.foreignUsedIps`, 'exceeds the vSwitch capacity');
  });
  unique(f.securityGroups, 'securityGroups');
  f.securityGroups.forEach((g, i) => {
    if (!vpcs.has(g.vpcId)) fail(`securityGroups[${i}].vpcId`, `VPC "${g.vpcId}" is not in vpcs`);
  });
  const types = unique(f.instanceTypes, 'instanceTypes');
  unique(f.instances, 'instances');
  f.instances.forEach((inst, i) => {
    const at = `instances[${i}]`;
    if (!types.has(inst.instanceType)) fail(`${at}.instanceType`, `"${inst.instanceType}" is not in instanceTypes`);
    const vsw = f.vSwitches.find((s) => s.id === inst.vSwitchId);
    if (!vsw) return fail(`${at}.vSwitchId`, `"${inst.vSwitchId}" is not in vSwitches`);
    inst.securityGroupIds.forEach((sg, j) => {
      const g = f.securityGroups.find((x) => x.id === sg);
      if (!g) fail(`${at}.securityGroupIds[${j}]`, `"${sg}" is not in securityGroups`);
      else if (g.vpcId !== vsw.vpcId)
        fail(`${at}.securityGroupIds[${j}]`, `"${sg}" is in another VPC than ${inst.vSwitchId}`);
    });
  });
  if (f.faults) {
    try {
      parseFaultSpec(f.faults);
    } catch (e) {
      throw new FixtureError((e as Error).message);
    }
  }
  for (const action of Object.keys(f.quotas?.api ?? {})) {
    if (!/^[A-Z][A-Za-z0-9]+$/.test(action)) fail(`quotas.api.${action}`, 'is not an action name');
  }
  return f;
}

/** Reads a YAML or JSON fixture file. */
export function loadFixtureFile(path: string): Fixture {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new FixtureError(`cannot read fixture ${path}: ${(e as Error).message}`);
  }
  let data: unknown;
  try {
    data = YAML.parse(text);
  } catch (e) {
    throw new FixtureError(`fixture ${path} is not valid YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  try {
    return validateFixture(data);
  } catch (e) {
    throw new FixtureError(`fixture ${path}: ${(e as Error).message}`);
  }
}
