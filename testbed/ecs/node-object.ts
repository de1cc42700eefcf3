import type { World } from './world.js';

/**
 * The Kubernetes Node of an emulated instance, as a cloud provider registers it: the
 * providerID `<region>.<instance id>`, the instance-type and zone labels, the primary IP as
 * InternalIP, Ready.
 */
export function nodeObject(world: World, instanceId: string, labels: Record<string, string> = {}) {
  const i = world.instances.get(instanceId);
  if (!i) throw new Error(`no emulated instance ${instanceId}`);
  const ip = world.enis.get(i.primaryEniId)!.primaryIp;
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: i.hostName,
      labels: {
        'node.kubernetes.io/instance-type': i.instanceType,
        'topology.kubernetes.io/zone': i.zoneId,
        ...labels,
      },
    },
    spec: { providerID: `${world.region}.${i.id}` },
    status: { addresses: [{ type: 'InternalIP', address: ip }], conditions: [{ type: 'Ready', status: 'True' }] },
  };
}
