import type { ENIPoolClass } from '../api/types.js';
import type { ActionLimit } from '../cloud/limits.js';
import type { WhatIf, WhatIfInput } from './plan.js';
import { fields, table } from './table.js';

/** What the user asks of `plan`. */
export interface PlanRequest {
  nodes: number;
  podsPerNode: number;
  instanceType?: string;
  zone?: string;
}

/** Why a what-if cannot be made from what the cluster publishes or what was asked (a message naming the way out). */
export class PlanInputError extends Error {}

/**
 * The what-if's input from what the cluster publishes: the class's spec, its vSwitches with their
 * free addresses and its nodes' instance types with their limits (the class's status), and the
 * operator's quotas. The instance type is the one asked for, else the class's most common; the
 * zone the one asked for, else the one where the class's vSwitches have the most room.
 */
export function planInput(
  cls: ENIPoolClass,
  classes: ENIPoolClass[],
  request: PlanRequest,
  quotas: Record<string, Required<ActionLimit>>,
): WhatIfInput {
  const name = cls.metadata.name;
  const vSwitches = cls.status?.vSwitches ?? [];
  if (!vSwitches.length)
    throw new PlanInputError(
      `class ${name} publishes no vSwitches yet (status.vSwitches): is it Valid, and is the operator running? ` +
        `(kubectl describe enipoolclass ${name})`,
    );
  const known = [cls, ...classes].flatMap((c) => c.status?.instanceTypes ?? []);
  const mine = [...(cls.status?.instanceTypes ?? [])].sort((a, b) => b.nodes - a.nodes);
  const typeName = request.instanceType ?? mine[0]?.name;
  if (!typeName)
    throw new PlanInputError(
      `class ${name} governs no node yet, so no instance type is known: pass --instance-type ` +
        `(one of ${[...new Set(known.map((t) => t.name))].join(', ') || 'the types of nodes some class governs'})`,
    );
  const type = known.find((t) => t.name === typeName);
  if (!type)
    throw new PlanInputError(
      `the ENI limits of instance type ${typeName} are not known here: no class governs a node of that type ` +
        `(known: ${[...new Set(known.map((t) => t.name))].join(', ') || 'none'})`,
    );
  const zones = new Map<string, number>();
  for (const v of vSwitches) zones.set(v.zoneID, (zones.get(v.zoneID) ?? 0) + v.freeIPs);
  const zone = request.zone ?? [...zones].sort((a, b) => b[1] - a[1])[0]![0];
  if (!zones.has(zone))
    throw new PlanInputError(
      `class ${name} has no vSwitch in zone ${zone} (its zones: ${[...zones.keys()].sort().join(', ')})`,
    );
  // The class's vSwitches as it resolved them: named by ID, in the order it has them (Ordered selection).
  const vpcId = 'vpc';
  return {
    className: name,
    // Which security groups an ENI joins changes no call or address: one stands for them.
    spec: {
      ...cls.spec,
      vSwitchIDs: vSwitches.map((v) => v.id),
      vSwitchTags: undefined,
      securityGroupIDs: ['sg-what-if'],
      securityGroupTags: undefined,
    },
    nodes: request.nodes,
    instanceType: typeName,
    limits: { eniQuantity: type.enis, ipv4PerEni: type.ipv4PerENI, ipv6PerEni: type.ipv6PerENI ?? 0 },
    podsPerNode: request.podsPerNode,
    zone,
    vpcId,
    vSwitches: vSwitches.map((v) => ({
      id: v.id,
      zoneId: v.zoneID,
      vpcId,
      ...(v.cidr ? { cidr: v.cidr } : {}),
      ...(v.ipv6CIDR ? { ipv6Cidr: v.ipv6CIDR } : {}),
      free: v.freeIPs,
      tags: {},
    })),
    quotas,
  };
}

export type PlanView = WhatIf & {
  class: string;
  instanceType: string;
  zone: string;
  nodes: number;
  podsPerNode: number;
  quotas: string;
};

const seconds = (s: number) => (s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`);

/** The what-if as a user reads it. */
export function planText(v: PlanView): string {
  const n = v.perNode;
  const parts = [
    fields([
      ['Class', v.class],
      ['Nodes', `${v.nodes} × ${v.instanceType} in ${v.zone}, ${v.podsPerNode} pods each`],
      [
        v.nodesReady === v.nodes ? 'Per node' : 'First node',
        `${n.enis} ENIs, ${n.ips} pod IPs${n.ipv6 ? `, ${n.ipv6} IPv6` : ''}${n.prefixes ? ` (${n.prefixes} /28 prefixes)` : ''}` +
          (n.ready ? ', Ready' : `, not Ready: ${n.shortfall ?? 'short'}`),
      ],
      ['Pools Ready', `${v.nodesReady} of ${v.nodes}`],
      v.nodesReady === v.nodes
        ? [
            'All Ready in',
            `${seconds(v.predictedSeconds)} at the quotas (the floor for these pools: ${seconds(v.boundSeconds)}); quotas: ${v.quotas}`,
          ]
        : [
            'Not all Ready',
            `${v.nodes - v.nodesReady} pools would stay short (see the warnings); the calls below take ` +
              `${seconds(v.predictedSeconds)} at the quotas; quotas: ${v.quotas}`,
          ],
    ]),
    Object.keys(v.calls).length
      ? table(
          ['ACTION', 'CALLS', 'FEWEST'],
          Object.entries(v.calls)
            .sort(([a], [b]) => (a < b ? -1 : 1))
            .map(([action, calls]) => [action, calls, v.boundCalls[action] ?? 0]),
        )
      : 'No mutating call would be made.',
    table(
      ['VSWITCH', 'ZONE', 'FREE NOW', 'FREE AFTER'],
      v.vSwitches.map((s) => [s.id, s.zoneId, s.freeBefore, s.freeAfter]),
    ),
  ];
  if (v.warnings.length) parts.push(['Warnings:', ...v.warnings.map((w) => `  ${w}`)].join('\n'));
  return `${parts.join('\n\n')}\n`;
}
