/** The CNI variables a container runtime sets for a pod's eth0 (its pod in the default namespace). */
export const cniVars = (command: string, container: string, pod = container): Record<string, string> => ({
  CNI_COMMAND: command,
  CNI_CONTAINERID: container,
  CNI_NETNS: `/var/run/netns/${container}`,
  CNI_IFNAME: 'eth0',
  CNI_ARGS: `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${pod}`,
  CNI_PATH: '/opt/cni/bin',
});

/** The network configuration eni-ipam-cni is given: the `pods` network, the agent's socket. */
export const ipamConf = (socket: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ cniVersion: '1.0.0', name: 'pods', ipam: { type: 'eni-ipam-cni', socket }, ...extra });
