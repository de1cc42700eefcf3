import * as d from './describe-actions.js';
import * as e from './eni-actions.js';
import type { ActionContext } from './eni-actions.js';

export const ECS_VERSION = '2014-05-26';
export const VPC_VERSION = '2016-04-28';

export interface ActionDef {
  handler: (ctx: ActionContext) => object;
  /** Whether RegionId is a required parameter (every ENI action; not DescribeInstanceTypes). */
  regional: boolean;
  /** Whether the action takes a ClientToken. */
  idempotent: boolean;
  /** Read-only actions never change the world. */
  mutating: boolean;
  /** The field its answer is for (a missing-field fault removes it); the RequestId when it answers nothing else. */
  mainField: string;
}

const def = (handler: ActionDef['handler'], o: Partial<Omit<ActionDef, 'handler'>> = {}): ActionDef => ({
  handler,
  regional: o.regional ?? true,
  idempotent: o.idempotent ?? false,
  mutating: o.mutating ?? false,
  mainField: o.mainField ?? 'RequestId',
});

/** The actions served, per API version. */
export const ACTIONS: Record<string, Record<string, ActionDef>> = {
  [ECS_VERSION]: {
    CreateNetworkInterface: def(e.createNetworkInterface, {
      idempotent: true,
      mutating: true,
      mainField: 'NetworkInterfaceId',
    }),
    AttachNetworkInterface: def(e.attachNetworkInterface, { mutating: true }),
    DetachNetworkInterface: def(e.detachNetworkInterface, { mutating: true }),
    DeleteNetworkInterface: def(e.deleteNetworkInterface, { mutating: true }),
    AssignPrivateIpAddresses: def(e.assignPrivateIpAddresses, {
      idempotent: true,
      mutating: true,
      mainField: 'AssignedPrivateIpAddressesSet',
    }),
    UnassignPrivateIpAddresses: def(e.unassignPrivateIpAddresses, { mutating: true }),
    AssignIpv6Addresses: def(e.assignIpv6Addresses, { idempotent: true, mutating: true, mainField: 'Ipv6Sets' }),
    UnassignIpv6Addresses: def(e.unassignIpv6Addresses, { mutating: true }),
    DescribeNetworkInterfaces: def(d.describeNetworkInterfaces, { mainField: 'NetworkInterfaceSets' }),
    DescribeNetworkInterfaceAttribute: def(d.describeNetworkInterfaceAttribute, { mainField: 'NetworkInterfaceId' }),
    DescribeInstanceTypes: def(d.describeInstanceTypes, { regional: false, mainField: 'InstanceTypes' }),
    DescribeInstances: def(d.describeInstances, { mainField: 'Instances' }),
    DescribeSecurityGroups: def(d.describeSecurityGroups, { mainField: 'SecurityGroups' }),
  },
  [VPC_VERSION]: {
    DescribeVSwitches: def(d.describeVSwitches, { regional: false, mainField: 'VSwitches' }),
    DescribeVpcs: def(d.describeVpcs, { mainField: 'Vpcs' }),
  },
};
