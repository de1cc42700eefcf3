/* eslint-disable @typescript-eslint/no-explicit-any -- pods are stored JSON */
import type { KubeObject } from '../../kube/core/types.js';

/** A pod whose sandbox cannot be configured as asked (a bandwidth annotation that is not a quantity). */
export class PodNetworkArgsError extends Error {}

const SUFFIXES: Record<string, number> = {
  '': 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity (`4M`, `1.5Gi`, `100k`, `2e6`) as a number, rounded up as Quantity.Value() does. */
export function quantityValue(text: string): number | undefined {
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/.exec(text.trim());
  if (!m) return undefined;
  const value = Number(m[1]) * (m[3] !== undefined ? 10 ** Number(m[3]) : SUFFIXES[m[2] ?? '']!);
  return Math.ceil(value);
}

/** The bounds kubelet's ExtractPodBandwidthResources puts on a bandwidth annotation. */
const MIN_BANDWIDTH = 1e3;
const MAX_BANDWIDTH = 1e15;
/** containerd gives every limited direction this burst (bits): a limit, not a shaping of short bursts. */
const CONTAINERD_BURST = 2 ** 32 - 1;

function bandwidthAnnotation(pod: KubeObject, key: string): number | undefined {
  const text = pod.metadata.annotations?.[key];
  if (text === undefined) return undefined;
  const bits = quantityValue(text);
  if (bits === undefined)
    throw new PodNetworkArgsError(
      `reading pod bandwidth annotations: annotation ${key}: "${text}" is not a quantity (say "10M" for 10 Mbit/s)`,
    );
  if (bits < MIN_BANDWIDTH)
    throw new PodNetworkArgsError(
      `reading pod bandwidth annotations: ${key}: resource is unreasonably small (< 1kbit)`,
    );
  if (bits > MAX_BANDWIDTH)
    throw new PodNetworkArgsError(
      `reading pod bandwidth annotations: ${key}: resource is unreasonably large (> 1Pbit)`,
    );
  return bits;
}

/**
 * The capability arguments containerd gives the pod's network (libcni passes each to the plugins
 * that declare it): `bandwidth` from the annotations kubernetes.io/ingress-bandwidth and
 * egress-bandwidth (bits per second), `portMappings` from the containers' host ports, and the
 * pod's annotations as `io.kubernetes.cri.pod-annotations`.
 */
export function podCapabilityArgs(pod: KubeObject): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  const ingress = bandwidthAnnotation(pod, 'kubernetes.io/ingress-bandwidth');
  const egress = bandwidthAnnotation(pod, 'kubernetes.io/egress-bandwidth');
  if (ingress !== undefined || egress !== undefined)
    args.bandwidth = {
      ...(ingress !== undefined ? { ingressRate: ingress, ingressBurst: CONTAINERD_BURST } : {}),
      ...(egress !== undefined ? { egressRate: egress, egressBurst: CONTAINERD_BURST } : {}),
    };
  const ports = (pod.spec?.containers ?? []).flatMap((c: any) =>
    (c.ports ?? [])
      .filter((p: any) => p.hostPort > 0)
      .map((p: any) => ({
        hostPort: p.hostPort,
        containerPort: p.containerPort,
        protocol: String(p.protocol ?? 'TCP').toLowerCase(),
        ...(p.hostIP ? { hostIP: p.hostIP } : {}),
      })),
  );
  if (ports.length) args.portMappings = ports;
  args['io.kubernetes.cri.pod-annotations'] = pod.metadata.annotations ?? {};
  return args;
}

/** CNI_ARGS as containerd sets them for a pod's sandbox. */
export function podCniArgs(pod: KubeObject, sandboxId: string): Array<[string, string]> {
  return [
    ['IgnoreUnknown', '1'],
    ['K8S_POD_NAMESPACE', pod.metadata.namespace ?? 'default'],
    ['K8S_POD_NAME', pod.metadata.name!],
    ['K8S_POD_INFRA_CONTAINER_ID', sandboxId],
    ['K8S_POD_UID', pod.metadata.uid!],
  ];
}
