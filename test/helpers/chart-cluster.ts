/* eslint-disable @typescript-eslint/no-explicit-any -- tests read JSON answers freely */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chartValues, createAccessKeySecret, startCluster, type EmulatedCluster } from '../../testbed/cluster/index.js';
import { CHART, run, setArgs, tool } from './helm.js';
import { kubectlFor, type Kubectl } from './kube.js';

export type Helm = (args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>;

/**
 * A local cluster for the chart's end-to-end tests, as a user has one: a real control plane (TLS,
 * certificates and service-account tokens, the Node authorizer and RBAC), the AccessKey Secret the chart's values name, and real kubectl and Helm
 * pointed at it (Helm in kube-system, where the chart goes).
 */
export async function chartCluster(o: {
  nodes: number;
  backoffBaseMs: number;
  /** The work directory's prefix in the temporary folder. */
  name: string;
}): Promise<{ cluster: EmulatedCluster; kubectl: Kubectl; helm: Helm }> {
  const cluster = await startCluster({
    nodes: o.nodes,
    workDir: mkdtempSync(join(tmpdir(), `${o.name}-`)),
    backoffBaseMs: o.backoffBaseMs,
  });
  const kubectl = kubectlFor(cluster.kube);
  const helmBin = tool('helm');
  const helm: Helm = (args) =>
    run(helmBin, [...args, '--kubeconfig', cluster.kubeconfigPath, '--namespace', 'kube-system']);
  await createAccessKeySecret(cluster);
  return { cluster, kubectl, helm };
}

/** `helm install eni-ipam --wait` of the chart with the cluster's values and `extra` ones, as a user installs it. */
export const installChart = (helm: Helm, cluster: EmulatedCluster, extra: string[] = []) =>
  helm(['install', 'eni-ipam', CHART, '--wait', '--timeout', '90s', ...setArgs([...chartValues(cluster), ...extra])]);

/** `kubectl <args> -o json`, parsed; throws with the command and kubectl's error. */
export const kubectlJson = (kubectl: () => Kubectl) => async (args: string[]) => {
  const r = await kubectl()([...args, '-o', 'json']);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
};

/** Whether an object's Ready condition is True. */
export const isReady = (o: any): boolean =>
  !!o?.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True');

/** Whether each node of the cluster has its ENIPool, Ready. */
export const allPoolsReady = async (json: (args: string[]) => Promise<any>, cluster: EmulatedCluster) => {
  const pools = (await json(['get', 'enipools'])).items as any[];
  return pools.length === cluster.nodes.length && pools.every(isReady);
};
