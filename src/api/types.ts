import { s, type Infer } from './schema-builder.js';

/** The API group and version of every eni-ipam kind. */
export const GROUP = 'eniipam.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

const labelSelector = s.object(
  {
    matchLabels: s.map(s.string()),
    matchExpressions: s.array(
      s.object(
        {
          key: s.string({ minLength: 1 }),
          operator: s.enum(['In', 'NotIn', 'Exists', 'DoesNotExist'] as const),
          values: s.array(s.string()),
        },
        { required: ['key', 'operator'] },
      ),
    ),
  },
  { description: 'A standard label selector on Node labels; empty selects every node.' },
);

const condition = s.object(
  {
    type: s.string({ minLength: 1 }),
    status: s.enum(['True', 'False', 'Unknown'] as const),
    reason: s.string(),
    message: s.string(),
    lastTransitionTime: s.string({ format: 'date-time' }),
    observedGeneration: s.int({ minimum: 0 }),
  },
  { required: ['type', 'status'] },
);

/** Where ENIs go and how big each node's pool is: shared by classes and (resolved) by pools. */
const placementAndSizing = {
  vSwitchIDs: s.array(s.string({ minLength: 1 }), {
    description: 'vSwitches for secondary ENIs; those in the node\u2019s zone are used.',
  }),
  vSwitchTags: s.map(s.string(), {
    description: 'vSwitches with all of these tags are used (with vSwitchIDs, either may match).',
  }),
  vSwitchSelection: s.enum(['MostFreeIPs', 'Ordered'] as const, {
    default: 'MostFreeIPs',
    description: 'MostFreeIPs picks the vSwitch with the most free addresses; Ordered the first listed with room.',
  }),
  securityGroupIDs: s.array(s.string({ minLength: 1 }), {
    maxItems: 5,
    description: 'Security groups of created ENIs.',
  }),
  securityGroupTags: s.map(s.string(), {
    description: 'Security groups of the VPC with all of these tags join created ENIs.',
  }),
  eniTags: s.map(s.string(), { description: 'Extra tags on created ENIs (the ownership tags are always added).' }),
  minAllocate: s.int({ minimum: 0, default: 0, description: 'IPs a node keeps at least.' }),
  preAllocate: s.int({ minimum: 0, default: 8, description: 'Free IPs kept ready above use.' }),
  maxAboveWatermark: s.int({
    minimum: 0,
    default: 0,
    description: 'IPs that may be allocated beyond the need in one step, and kept.',
  }),
  maxBatch: s.int({
    minimum: 0,
    default: 16,
    description:
      'IPs a growth step may add beyond the need: the node\u2019s growth per minute times the release delay (at least a minute), in calls made anyway; 0 turns this off.',
  }),
  maxAllocate: s.int({
    minimum: 0,
    default: 0,
    description: 'IPs a node has at most; 0 means the instance type\u2019s limit.',
  }),
  releaseExcessIPs: s.bool({
    default: true,
    description: 'Release IPs that stay above the need for releaseDelaySeconds.',
  }),
  releaseDelaySeconds: s.int({
    minimum: 0,
    default: 180,
    description: 'How long an IP must stay excess before its release is requested.',
  }),
  deleteEmptyENIs: s.bool({ default: false, description: 'Detach and delete secondary ENIs left with no IP in use.' }),
  ipv4Mode: s.enum(['SecondaryIP', 'Prefix'] as const, {
    default: 'SecondaryIP',
    description:
      'What an ENI\u2019s IPv4 slot holds: one secondary IP, or an aligned /28 prefix (16 pod IPs per slot, 10 prefixes per call). An ENI keeps the mode it was given: a change affects new ENIs only.',
  }),
  prefixFallback: s.bool({
    default: true,
    description:
      'In Prefix mode, where a vSwitch has free addresses but no aligned /28 left (fragmented), new ENIs there take single secondary IPs; false: the pool waits and says why.',
  }),
  ipFamilies: s.array(s.enum(['IPv4', 'IPv6'] as const), {
    maxItems: 2,
    description:
      'The address families of each pod: [IPv4] (the default), [IPv4, IPv6] (dual-stack: one IPv6 address per IPv4 address on the same ENI), or [IPv6] (IPv6 pod addresses only); with IPv6, only vSwitches with an IPv6 CIDR, within the instance type\u2019s IPv6 addresses per ENI.',
  }),
  ipv6Mode: s.enum(['SecondaryIP', 'Prefix'] as const, {
    default: 'SecondaryIP',
    description:
      'An ENI\u2019s IPv6 addresses one by one, or from one /80 prefix: dual-stack, one /80 per ENI, given at its creation, from which every pod of the ENI takes its IPv6 address; IPv6-only, one /80 for the node (on the primary ENI with usePrimaryENI, else on one ENI made for it), from which every pod takes its address. No IPv6 call as the pool grows. An ENI keeps the mode it was given: a change affects new ENIs only.',
  }),
  eniMode: s.enum(['Shared', 'Exclusive'] as const, {
    default: 'Shared',
    description:
      'Shared: pods take secondary addresses of the node\u2019s ENIs (many pods per ENI). Exclusive: each pod that requests the extended resource eniipam.io/eni gets a whole secondary ENI moved into its network namespace (its primary address is the pod\u2019s): few pods per node, as many as the instance type has secondary ENIs; minAllocate, preAllocate and maxAllocate count ENIs. Exclusive takes IPv4 secondary-IP pools only (no usePrimaryENI, no prefixes, no IPv6).',
  }),
  usePrimaryENI: s.bool({
    default: false,
    description:
      'Also give pods secondary addresses of the instance\u2019s primary ENI, before any ENI is created (no create, no attach); those pods share the node\u2019s vSwitch and security groups. With IPv6, the node\u2019s vSwitch needs an IPv6 CIDR (else the primary ENI serves no pod).',
  }),
};

/** IPv6 /80 prefixes serve pools with IPv6 (refused with this rule's message otherwise). */
const IPV6_MODE_RULE = {
  rule:
    "!has(self.ipv6Mode) || self.ipv6Mode == 'SecondaryIP' || " +
    "(has(self.ipFamilies) && self.ipFamilies.exists(f, f == 'IPv6'))",
  message: 'ipv6Mode Prefix needs ipFamilies [IPv4, IPv6] or [IPv6]',
};

/**
 * The families eni-ipam serves: [IPv4], [IPv4, IPv6] or [IPv6]. With IPv6, /28 prefixes serve
 * only dual-stack pools whose IPv6 comes from a /80 per ENI (refused with this rule's message
 * otherwise).
 */
const FAMILY_RULE = {
  rule:
    "!has(self.ipFamilies) || (size(self.ipFamilies) == 1 && self.ipFamilies[0] == 'IPv4') || " +
    "(size(self.ipFamilies) == 1 && self.ipFamilies[0] == 'IPv6' && " +
    "(!has(self.ipv4Mode) || self.ipv4Mode == 'SecondaryIP')) || " +
    "(size(self.ipFamilies) == 2 && self.ipFamilies[0] == 'IPv4' && self.ipFamilies[1] == 'IPv6' && " +
    "(!has(self.ipv4Mode) || self.ipv4Mode == 'SecondaryIP' || (has(self.ipv6Mode) && self.ipv6Mode == 'Prefix')))",
  message:
    'ipFamilies must be [IPv4], [IPv4, IPv6] or [IPv6]; ipv4Mode Prefix with IPv6 needs ipFamilies [IPv4, IPv6] ' +
    'and ipv6Mode Prefix (a /28 serves 16 pods per slot: single IPv6 addresses cannot pair them)',
};

/** Exclusive ENIs are IPv4 ENIs of their own (refused with this rule's message otherwise). */
const ENI_MODE_RULE = {
  rule:
    "!has(self.eniMode) || self.eniMode == 'Shared' || " +
    "((!has(self.usePrimaryENI) || !self.usePrimaryENI) && (!has(self.ipv4Mode) || self.ipv4Mode == 'SecondaryIP') && " +
    "(!has(self.ipFamilies) || (size(self.ipFamilies) == 1 && self.ipFamilies[0] == 'IPv4')))",
  message:
    'eniMode Exclusive gives each pod a whole secondary ENI: it takes no usePrimaryENI, no ipv4Mode Prefix and ' +
    'ipFamilies [IPv4] only',
};

/** The policy fields a class sets and its nodes' pools carry, resolved (every one of them). */
export const POLICY_FIELDS = Object.keys(placementAndSizing) as Array<keyof typeof placementAndSizing>;

/** A node cannot keep more IPs than it may have (maxAllocate 0 means the instance type's limit). */
const SIZING_RULE = {
  rule:
    '!has(self.maxAllocate) || self.maxAllocate == 0 || ' +
    '!has(self.minAllocate) || self.minAllocate <= self.maxAllocate',
  message: 'minAllocate must not exceed maxAllocate (0 means the instance type\u2019s limit)',
};

export const eniPoolClassSpec = s.object(
  {
    nodeSelector: labelSelector,
    priority: s.int({
      default: 0,
      description: 'When several classes select a node, the highest priority wins (ties: the first name).',
    }),
    ...placementAndSizing,
  },
  {
    description: 'Pool policy for the nodes its selector matches.',
    validations: [SIZING_RULE, FAMILY_RULE, IPV6_MODE_RULE, ENI_MODE_RULE],
  },
);

export const eniPoolClassStatus = s.object({
  matchedNodes: s.int({ minimum: 0 }),
  vSwitches: s.array(
    s.object(
      {
        id: s.string(),
        zoneID: s.string(),
        cidr: s.string(),
        ipv6CIDR: s.string(),
        freeIPs: s.int({ minimum: 0, description: 'Free addresses in the vSwitch, as last described.' }),
      },
      { required: ['id', 'zoneID', 'freeIPs'] },
    ),
    {
      listType: 'map',
      listMapKeys: ['id'],
      description:
        'The vSwitches the class uses, with their free addresses as the operator last described them ' +
        '(what `kubectl eni-ipam status` and `plan` read).',
    },
  ),
  instanceTypes: s.array(
    s.object(
      {
        name: s.string(),
        nodes: s.int({ minimum: 0, description: 'Nodes of this type the class governs.' }),
        enis: s.int({ minimum: 0, description: 'ENIs per instance, the primary included.' }),
        ipv4PerENI: s.int({ minimum: 0, description: 'Private IPv4 addresses per ENI, its own primary included.' }),
        ipv6PerENI: s.int({ minimum: 0 }),
      },
      { required: ['name', 'nodes', 'enis', 'ipv4PerENI'] },
    ),
    {
      listType: 'map',
      listMapKeys: ['name'],
      description: 'The instance types of the nodes the class governs, with their ENI limits (DescribeInstanceTypes).',
    },
  ),
  conditions: s.array(condition, { listType: 'map', listMapKeys: ['type'] }),
  observedGeneration: s.int({ minimum: 0 }),
});

export const eniPoolSpec = s.object(
  {
    nodeName: s.string({ minLength: 1 }),
    instanceID: s.string(),
    instanceType: s.string(),
    zoneID: s.string(),
    vpcID: s.string(),
    className: s.string(),
    ...placementAndSizing,
  },
  {
    required: ['nodeName'],
    description: 'One node\u2019s pool: its instance and the resolved policy of its class.',
    validations: [SIZING_RULE, FAMILY_RULE, IPV6_MODE_RULE, ENI_MODE_RULE],
  },
);

const eni = s.object(
  {
    id: s.string(),
    mac: s.string(),
    vSwitchID: s.string(),
    vSwitchCIDR: s.string(),
    gatewayIP: s.string(),
    primaryIP: s.string(),
    securityGroupIDs: s.array(s.string()),
    state: s.enum(['Available', 'Attaching', 'InUse', 'Detaching', 'Deleting'] as const),
    deviceIndex: s.int({ minimum: 0 }),
    ips: s.array(s.string(), {
      description:
        "The ENI's addresses usable by pods: its secondary addresses and every address of its prefixes (its own primary address is the node's).",
    }),
    prefixes: s.array(s.string(), {
      description: "The ENI's IPv4 /28 prefixes (ipv4Mode Prefix); released only whole.",
    }),
    ipv6s: s.array(s.string(), {
      description: "The ENI's IPv6 addresses (dual-stack): each pod takes one beside its IPv4 address on this ENI.",
    }),
    ipv6Prefixes: s.array(s.string(), {
      description:
        "The ENI's IPv6 /80 prefixes (ipv6Mode Prefix): each pod of the ENI takes an IPv6 address of one; released only whole.",
    }),
    vSwitchIPv6CIDR: s.string({ description: "The IPv6 /64 of the ENI's vSwitch (dual-stack)." }),
    gatewayIPv6: s.string({
      description: "The IPv6 gateway of the ENI's vSwitch, which the node routes through (dual-stack).",
    }),
  },
  { required: ['id', 'state'] },
);

const releaseAck = s.object(
  {
    answer: s.enum(['ready', 'do-not-release'] as const),
    requestedAt: s.string({
      format: 'date-time',
      description: 'The releaseRequests time of the request this answers.',
    }),
  },
  { required: ['answer', 'requestedAt'] },
);

export const eniPoolStatus = s.object({
  // Written by the operator.
  enis: s.array(eni, { listType: 'map', listMapKeys: ['id'] }),
  summary: s.object({
    enis: s.int({ minimum: 0 }),
    available: s.int({ minimum: 0 }),
    used: s.int({ minimum: 0 }),
    needed: s.int({ minimum: 0 }),
    releasing: s.int({ minimum: 0 }),
    batch: s.int({
      minimum: 0,
      description: 'IPs a growth step carries beyond the need now, learned from the node\u2019s demand (maxBatch).',
    }),
    prefixes: s.int({ minimum: 0, description: 'IPv4 /28 prefixes on attached ENIs (16 of the available IPs each).' }),
    availableIPv6: s.int({
      minimum: 0,
      description:
        'IPv6 addresses pods may take on attached ENIs (dual-stack); an ENI with a /80 prefix counts one per IPv4 pod address.',
    }),
    usedIPv6: s.int({ minimum: 0, description: 'IPv6 addresses pods hold (dual-stack).' }),
    ipv6Prefixes: s.int({ minimum: 0, description: 'IPv6 /80 prefixes on attached ENIs (ipv6Mode Prefix).' }),
    podENIs: s.int({
      minimum: 0,
      description:
        'eniMode Exclusive: the ENIs pods of the node may have at most (the instance type\u2019s secondary ENIs less those in other use, within maxAllocate); the agent advertises it as the extended resource eniipam.io/eni.',
    }),
  }),
  releaseRequests: s.map(s.string({ format: 'date-time' }), {
    description:
      'IP, or /28 or /80 prefix (all its addresses at once), or ENI id (eniMode Exclusive: the whole ENI), -> when its release was requested (operator); ' +
      'the time names the request, and an ack answers only the request it names.',
  }),
  conditions: s.array(condition, { listType: 'map', listMapKeys: ['type'] }),
  observedGeneration: s.int({ minimum: 0 }),
  // Written by the node agent.
  used: s.map(
    s.object({
      pod: s.string(),
      containerID: s.string(),
      ifName: s.string({ description: 'The pod interface holding it (CNI_IFNAME), when known.' }),
    }),
    { description: 'IP -> its owner (agent).' },
  ),
  releaseAcks: s.map(releaseAck, {
    description:
      'IP or prefix -> the agent\u2019s answer to one release request (agent); a prefix\u2019s covers all its addresses.',
  }),
  cooling: s.map(s.string({ format: 'date-time' }), {
    description: 'IP -> when its cool-down after a release ends; it is not free before (agent).',
  }),
  agentConditions: s.array(condition, {
    listType: 'map',
    listMapKeys: ['type'],
    description:
      'The node agent\u2019s own conditions (agent): StatusReported is False once its status writes have been ' +
      'refused for a while, and True again once they are taken.',
  }),
});

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
}

export type ENIPoolClassSpec = Infer<typeof eniPoolClassSpec>;
export type ENIPoolClassStatus = Infer<typeof eniPoolClassStatus>;
export type ENIPoolSpec = Infer<typeof eniPoolSpec>;
export type ENIPoolStatus = Infer<typeof eniPoolStatus>;
export type PoolENI = NonNullable<ENIPoolStatus['enis']>[number];
export type Condition = Infer<typeof condition>;
export type ReleaseAck = Infer<typeof releaseAck>;
export type LabelSelector = Infer<typeof labelSelector>;

export interface ENIPoolClass {
  apiVersion: typeof API_VERSION;
  kind: 'ENIPoolClass';
  metadata: ObjectMeta;
  spec: ENIPoolClassSpec;
  status?: ENIPoolClassStatus;
}

export interface ENIPool {
  apiVersion: typeof API_VERSION;
  kind: 'ENIPool';
  metadata: ObjectMeta;
  spec: ENIPoolSpec;
  status?: ENIPoolStatus;
}
