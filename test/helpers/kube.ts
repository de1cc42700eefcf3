import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import type { PodEventPolicy } from '../../src/agent/pod-events.js';
import { serveAgentApi } from '../../src/agent/api.js';
import { CRDS } from '../../src/api/crds.js';
import { createLogger, silentLogger } from '../../src/observability/logger.js';
import { eventually } from './ecs.js';
import { startControlPlane, type ControlPlane, type ControlPlaneOptions } from '../../testbed/control-plane/index.js';

export interface Kubectl {
  (args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }>;
  dir: string;
}

/** Real kubectl against the control plane, with a fresh HOME and discovery cache (see toolchain.md 5.4). */
export function kubectlFor(emu: Pick<ControlPlane, 'kubeconfig'>): Kubectl {
  const dir = mkdtempSync(join(tmpdir(), 'kubectl-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, emu.kubeconfig);
  const run = (args: string[], stdin?: string) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        'kubectl',
        ['--kubeconfig', kubeconfig, ...args],
        { env: { ...process.env, HOME: dir, KUBECACHEDIR: join(dir, 'cache') }, timeout: 30_000 },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      if (stdin !== undefined) child.stdin!.end(stdin);
    });
  return Object.assign(run, { dir });
}

/**
 * A real control plane (etcd, kube-apiserver, and the controllers that make ServiceAccounts and
 * delete namespaces; see testbed/control-plane) and an admin client of it.
 */
export async function kube(opts: ControlPlaneOptions = {}): Promise<{ emu: ControlPlane; kc: KubeConfig }> {
  const emu = await startControlPlane({ controllers: ['serviceaccount', 'namespace'], ...opts });
  const kc = new KubeConfig();
  kc.loadFromString(emu.kubeconfig);
  return { emu, kc };
}

/** Raw HTTP as the admin, through the control plane's front: for status codes and bodies. */
export function http(
  emu: Pick<ControlPlane, 'rest'>,
  method: string,
  path: string,
  body?: unknown,
  contentType?: string,
) {
  return emu.rest(method, path, body, contentType);
}

/** A CRD with a structural schema, printer columns and a status subresource. */
export const WIDGET_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'widgets.example.io' },
  spec: {
    group: 'example.io',
    scope: 'Namespaced',
    names: { plural: 'widgets', singular: 'widget', kind: 'Widget', shortNames: ['wd'] },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
          { name: 'Color', type: 'string', jsonPath: '.spec.color', priority: 1 },
          { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                required: ['size'],
                properties: {
                  size: { type: 'integer', minimum: 0, default: 1 },
                  color: { type: 'string', enum: ['red', 'blue'], default: 'red' },
                  tags: { type: 'object', additionalProperties: { type: 'string' } },
                  free: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                },
              },
              status: { type: 'object', properties: { phase: { type: 'string' }, count: { type: 'integer' } } },
            },
          },
        },
      },
    ],
  },
};

export const widget = (name: string, spec: Record<string, unknown> = { size: 1 }, labels?: Record<string, string>) => ({
  apiVersion: 'example.io/v1',
  kind: 'Widget',
  metadata: { name, namespace: 'default', ...(labels ? { labels } : {}) },
  spec,
});

export const WIDGETS = '/apis/example.io/v1/namespaces/default/widgets';

/** A control plane with the eni-ipam CRDs and one ENIPool whose single InUse ENI holds `ips`. */
export async function kubeWithPool(node: string, eni: { cidr: string; gateway: string; ips: string[]; mac?: string }) {
  const k = await kube();
  await k.emu.createCrds(Object.values(CRDS));
  const custom = k.kc.makeApiClient(CustomObjectsApi);
  await custom.createClusterCustomObject({
    group: 'eniipam.io',
    version: 'v1alpha1',
    plural: 'enipools',
    body: { apiVersion: 'eniipam.io/v1alpha1', kind: 'ENIPool', metadata: { name: node }, spec: { nodeName: node } },
  });
  await custom.patchClusterCustomObjectStatus(
    {
      group: 'eniipam.io',
      version: 'v1alpha1',
      plural: 'enipools',
      name: node,
      body: {
        status: {
          enis: [
            {
              id: 'eni-a',
              mac: eni.mac ?? '00:16:3e:00:00:01',
              state: 'InUse',
              vSwitchCIDR: eni.cidr,
              gatewayIP: eni.gateway,
              ips: eni.ips,
            },
          ],
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  return { ...k, custom };
}

/**
 * A node agent over `kubeWithPool`'s pool, serving its API on a socket in a fresh folder, ready
 * (it has seen its pool); `close` stops all three.
 */
export async function agentOnSocket(
  node: string,
  eni: Parameters<typeof kubeWithPool>[1],
  o: { cooldownMs: number; tmpPrefix: string; podEvents?: PodEventPolicy },
) {
  const k = await kubeWithPool(node, eni);
  const dir = mkdtempSync(join(tmpdir(), o.tmpPrefix));
  const socket = join(dir, 'agent.sock');
  const agent = new Agent({
    kc: k.kc,
    node,
    stateDir: dir,
    cooldownMs: o.cooldownMs,
    statusIntervalMs: 200,
    logger: process.env.DEBUG_AGENT ? createLogger({ level: process.env.DEBUG_AGENT }) : silentLogger(),
    registry: new Registry(),
    ...(o.podEvents ? { podEvents: o.podEvents } : {}),
  });
  await agent.start();
  const server = await serveAgentApi(agent, socket);
  await eventually(() => agent.ready);
  const close = async () => {
    server.close();
    await agent.stop();
    await k.emu.close();
  };
  return { emu: k.emu, kc: k.kc, agent, server, dir, socket, close };
}
