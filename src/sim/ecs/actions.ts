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
}

const def = (handler: ActionDef['handler'], o: Partial<Omit<ActionDef, 'handler'>> = {}): ActionDef => ({
  handler,
  regional: o.regional ?? true,
  idempotent: o.idempotent ?? false,
  mutating: o.mutating ?? false,
});

/** The actions served, per API version. */
export const ACTIONS: Record<string, Record<string, ActionDef>> = {
  [ECS_VERSION]: {
    CreateNetworkInterface: def(e.createNetworkInterface, { idempotent: true, mutating: true }),
    AttachNetworkInterface: def(e.attachNetworkInterface, { mutating: true }),
    DetachNetworkInterface: def(e.detachNetworkInterface, { mutating: true }),
    DeleteNetworkInterface: def(e.deleteNetworkInterface, { mutating: true }),
    AssignPrivateIpAddresses: def(e.assignPrivateIpAddresses, { idempotent: true, mutating: true }),
    UnassignPrivateIpAddresses: def(e.unassignPrivateIpAddresses, { mutating: true }),
    AssignIpv6Addresses: def(e.assignIpv6Addresses, { idempotent: true, mutating: true }),
    UnassignIpv6Addresses: def(e.unassignIpv6Addresses, { mutating: true }),
    DescribeNetworkInterfaces: def(d.describeNetworkInterfaces),
    DescribeNetworkInterfaceAttribute: def(d.describeNetworkInterfaceAttribute),
    DescribeInstanceTypes: def(d.describeInstanceTypes, { regional: false }),
    DescribeInstances: def(d.describeInstances),
    DescribeSecurityGroups: def(d.describeSecurityGroups),
  },
  [VPC_VERSION]: {
    DescribeVSwitches: def(d.describeVSwitches, { regional: false }),
    DescribeVpcs: def(d.describeVpcs),
  },
};
