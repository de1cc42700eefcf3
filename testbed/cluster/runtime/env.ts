/* eslint-disable @typescript-eslint/no-explicit-any */
import type { KubeObject } from '../../kube/core/types.js';
import type { KubeletObjects } from './node-api.js';
import type { ImageConfig } from './container.js';
import { fieldValue } from './volumes.js';

/**
 * A container the kubelet cannot configure (a missing Secret key, runAsNonRoot as root):
 * CreateContainerConfigError.
 */
export class ConfigError extends Error {}

/** `$(VAR)` references to earlier variables, as Kubernetes expands them in env, command and args (`$$` escapes). */
export function expand(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (m, name: string | undefined) =>
    m === '$$' ? '$' : name !== undefined && name in vars ? vars[name]! : m,
  );
}

const quantityBytes = (q: string): string => {
  const m = /^(\d+)(Ki|Mi|Gi|Ti|K|M|G|T)?$/.exec(q);
  if (!m) return q;
  const mult: Record<string, number> = {
    Ki: 1024,
    Mi: 1024 ** 2,
    Gi: 1024 ** 3,
    Ti: 1024 ** 4,
    K: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return String(Number(m[1]) * (m[2] ? mult[m[2]]! : 1));
};

export interface EnvContext {
  objects: KubeletObjects;
  pod: KubeObject;
  hostIP: string;
  podIP: string;
  /** The API server as in-cluster clients find it. */
  apiHost: string;
  apiPort: number;
  image: ImageConfig;
}

function keyOf(ctx: EnvContext, kind: 'secrets' | 'configmaps', ref: any): string | undefined {
  const o = ctx.objects.get(kind, ctx.pod.metadata.namespace, ref.name);
  const what = kind === 'secrets' ? 'secret' : 'configmap';
  if (!o) {
    if (ref.optional) return undefined;
    throw new ConfigError(`${what} "${ref.name}" not found`);
  }
  const raw = kind === 'secrets' ? o.data?.[ref.key] : o.data?.[ref.key];
  if (raw === undefined) {
    if (ref.optional) return undefined;
    throw new ConfigError(
      `couldn't find key ${ref.key} in ${kind === 'secrets' ? 'Secret' : 'ConfigMap'} ` +
        `${ctx.pod.metadata.namespace}/${ref.name}`,
    );
  }
  return kind === 'secrets' ? Buffer.from(String(raw), 'base64').toString('utf8') : String(raw);
}

/**
 * A container's environment as the kubelet builds it: the image's, the service links the
 * API server's in-cluster clients read (KUBERNETES_SERVICE_HOST/PORT), HOSTNAME, envFrom,
 * then env with $(VAR) expansion and valueFrom (fieldRef, secretKeyRef, configMapKeyRef,
 * resourceFieldRef).
 */
export function containerEnv(ctx: EnvContext, container: any, uid: number): Record<string, string> {
  const env: Record<string, string> = {
    ...ctx.image.env,
    // The container's hostname: its node's in the host network.
    HOSTNAME: ctx.pod.spec?.hostNetwork ? ctx.pod.spec.nodeName : ctx.pod.metadata.name!,
    HOME: uid === 0 ? '/root' : '/',
    KUBERNETES_SERVICE_HOST: ctx.apiHost,
    KUBERNETES_SERVICE_PORT: String(ctx.apiPort),
    KUBERNETES_SERVICE_PORT_HTTPS: String(ctx.apiPort),
    KUBERNETES_PORT: `tcp://${ctx.apiHost}:${ctx.apiPort}`,
  };
  for (const from of container.envFrom ?? []) {
    const kind = from.secretRef ? 'secrets' : 'configmaps';
    const ref = from.secretRef ?? from.configMapRef;
    const o = ctx.objects.get(kind, ctx.pod.metadata.namespace, ref.name);
    if (!o) {
      if (ref.optional) continue;
      throw new ConfigError(`${kind === 'secrets' ? 'secret' : 'configmap'} "${ref.name}" not found`);
    }
    for (const [k, v] of Object.entries(o.data ?? {}))
      env[`${from.prefix ?? ''}${k}`] =
        kind === 'secrets' ? Buffer.from(String(v), 'base64').toString('utf8') : String(v);
  }
  for (const e of container.env ?? []) {
    let v: string | undefined;
    if (e.valueFrom?.fieldRef) v = fieldValue(ctx, e.valueFrom.fieldRef.fieldPath);
    else if (e.valueFrom?.secretKeyRef) v = keyOf(ctx, 'secrets', e.valueFrom.secretKeyRef);
    else if (e.valueFrom?.configMapKeyRef) v = keyOf(ctx, 'configmaps', e.valueFrom.configMapKeyRef);
    else if (e.valueFrom?.resourceFieldRef) {
      const [section, res] = String(e.valueFrom.resourceFieldRef.resource).split('.');
      const q = container.resources?.[section!]?.[res!];
      v = q === undefined ? '0' : res === 'memory' ? quantityBytes(String(q)) : String(q);
    } else v = expand(String(e.value ?? ''), env);
    if (v !== undefined) env[e.name] = v;
  }
  return env;
}
