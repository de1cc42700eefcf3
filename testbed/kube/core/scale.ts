/* eslint-disable @typescript-eslint/no-explicit-any */
import { invalid, notFound, unsupportedMediaType } from './errors.js';
import { parseBody, type Request, type Result, type Writer } from './handlers.js';
import { jsonPatch, mergePatch } from './patch.js';
import type { Store } from './store.js';
import type { KubeObject, ResourceType } from './types.js';

const pathParts = (jsonPath: string): string[] => jsonPath.replace(/^\./, '').split('.');
const readPath = (o: any, jsonPath: string): unknown =>
  pathParts(jsonPath).reduce((v, k) => (v == null ? undefined : v[k]), o);

/** The autoscaling/v1 Scale view of an object with a scale subresource. */
export function toScale(t: ResourceType, o: KubeObject) {
  const s = t.scale!;
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: {
      name: o.metadata.name,
      namespace: o.metadata.namespace,
      uid: o.metadata.uid,
      resourceVersion: o.metadata.resourceVersion,
      creationTimestamp: o.metadata.creationTimestamp,
    },
    spec: { replicas: (readPath(o, s.specReplicasPath) as number | undefined) ?? 0 },
    status: {
      replicas: (readPath(o, s.statusReplicasPath) as number | undefined) ?? 0,
      selector: s.labelSelectorPath ? readPath(o, s.labelSelectorPath) : undefined,
    },
  };
}

/** GET, PUT and PATCH on `/scale`: they read and write the spec's replica count only. */
export function scaleRequest(store: Store, writer: Writer, req: Request, method: string): Result {
  const t = req.t;
  const o = store.get(t, req.namespace, req.name!);
  if (!o) throw notFound(t, req.name!);
  if (method === 'GET') return { status: 200, body: toScale(t, o) };
  const current = toScale(t, o);
  let scale: any;
  const body = parseBody(req);
  const type = req.contentType.split(';')[0]!.trim();
  if (method === 'PUT') scale = body;
  else if (type === 'application/merge-patch+json') scale = mergePatch(current, body);
  else if (type === 'application/json-patch+json') scale = jsonPatch(current, body);
  else throw unsupportedMediaType(type);
  const replicas = scale?.spec?.replicas;
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw invalid(t, req.name!, [
      {
        reason: 'FieldValueInvalid',
        field: 'spec.replicas',
        message: `spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
      },
    ]);
  }
  const next = structuredClone(o);
  const parts = pathParts(t.scale!.specReplicasPath);
  let node: any = next;
  for (const k of parts.slice(0, -1)) node = node[k] ??= {};
  node[parts[parts.length - 1]!] = replicas;
  next.metadata.resourceVersion = scale.metadata?.resourceVersion;
  const result = writer.updateFromSubresource({ ...req, subresource: undefined }, next);
  return { ...result, body: toScale(t, result.body as KubeObject) };
}
