/* eslint-disable @typescript-eslint/no-explicit-any */
import { randomUUID } from 'node:crypto';
import YAML from 'yaml';
import { recordUpdate, serverSideApply } from './apply.js';
import {
  StatusError,
  alreadyExists,
  badRequest,
  conflict,
  invalid,
  notFound,
  unsupportedMediaType,
  type StatusCause,
} from './errors.js';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.js';
import { acceptCrd, crdErrors, crdType } from './resources.js';
import { applyBuiltinDefaults } from './defaults.js';
import { applyDefaults, prune, validate } from './schema.js';
import { parseFieldSelector, parseLabelSelector, matchesFields, matchesLabels } from './selectors.js';
import type { Store } from './store.js';
import { groupVersion, typeKey, type KubeObject, type ResourceType } from './types.js';

export interface Request {
  t: ResourceType;
  version: string;
  namespace?: string;
  name?: string;
  subresource?: string;
  query: URLSearchParams;
  body?: string;
  contentType: string;
}

export interface Result {
  status: number;
  body: unknown;
  warnings?: string[];
}

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const CRD_KEY = 'customresourcedefinitions.apiextensions.k8s.io';

export function parseBody(req: Request): any {
  if (!req.body) throw badRequest('the request has no body');
  try {
    return req.contentType.includes('yaml') ? YAML.parse(req.body) : JSON.parse(req.body);
  } catch (e) {
    throw badRequest(
      `the body of the request is not valid ${req.contentType.includes('yaml') ? 'YAML' : 'JSON'}: ` +
        `${(e as Error).message.split('\n')[0]}`,
    );
  }
}

/** What the stored object looks like through the version a client asked for. */
export const served = (o: KubeObject, t: ResourceType, version: string): KubeObject => ({
  ...o,
  apiVersion: groupVersion(t.group, version),
  kind: t.kind,
});

/** Integer fields of built-in kinds: the API server's decoder refuses anything else (400), before validation. */
const INT32_FIELDS: Record<string, Array<[string, string]>> = {
  Lease: [
    ['leaseDurationSeconds', 'LeaseSpec.spec.leaseDurationSeconds'],
    ['leaseTransitions', 'LeaseSpec.spec.leaseTransitions'],
  ],
};

function decodeBuiltin(t: ResourceType, version: string, o: KubeObject): void {
  for (const [field, goPath] of INT32_FIELDS[t.kind] ?? []) {
    const v = (o.spec as Record<string, unknown> | undefined)?.[field];
    if (v === undefined || v === null || (Number.isInteger(v) && Math.abs(v as number) < 2 ** 31)) continue;
    const what = typeof v === 'number' ? `number ${v}` : typeof v === 'string' ? 'string' : typeof v;
    throw badRequest(
      `${t.kind} in version "${version}" cannot be handled as a ${t.kind}: ` +
        `json: cannot unmarshal ${what} into Go struct field ${goPath} of type int32`,
    );
  }
}

function checkMetadata(t: ResourceType, o: KubeObject): StatusCause[] {
  const out: StatusCause[] = [];
  const name = o.metadata.name ?? '';
  if (name && (!NAME.test(name) || name.length > 253)) {
    out.push({
      reason: 'FieldValueInvalid',
      field: 'metadata.name',
      message:
        `metadata.name: Invalid value: "${name}": ` +
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " +
        'and must start and end with an alphanumeric character',
    });
  }
  for (const [k, v] of Object.entries(o.metadata.labels ?? {})) {
    if (typeof v !== 'string' || v.length > 63 || !/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v)) {
      out.push({
        reason: 'FieldValueInvalid',
        field: `metadata.labels`,
        message:
          `metadata.labels: Invalid value: "${v}": ` +
          "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', " +
          'and must start and end with an alphanumeric character',
      });
    }
    if (!/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(k)) {
      out.push({
        reason: 'FieldValueInvalid',
        field: 'metadata.labels',
        message:
          `metadata.labels: Invalid value: "${k}": ` +
          "name part must consist of alphanumeric characters, '-', '_' or '.'",
      });
    }
  }
  if (t.kind === 'CustomResourceDefinition') out.push(...crdErrors(o));
  if (t.kind === 'Lease') {
    // MicroTime: the API server parses these with six fractional digits.
    for (const f of ['acquireTime', 'renewTime'] as const) {
      const v = o.spec?.[f];
      if (v !== undefined && v !== null && !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(String(v))) {
        out.push({
          reason: 'FieldValueInvalid',
          field: `spec.${f}`,
          message: `spec.${f}: Invalid value: "${String(v)}": must be a MicroTime (2006-01-02T15:04:05.000000Z07:00)`,
        });
      }
    }
  }
  return out;
}

/** Prunes, defaults and validates a custom object; unknown fields follow fieldValidation. */
function admitCustom(
  t: ResourceType,
  version: string,
  o: KubeObject,
  fieldValidation: string,
  warnings: string[],
): StatusCause[] {
  const schema = t.schemas?.[version];
  if (!schema) return [];
  const unknown = prune(o, schema);
  if (unknown.length && fieldValidation === 'Strict') {
    throw badRequest(
      `${t.kind} in version "${version}" cannot be handled as a ${t.kind}: ` +
        `strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`,
    );
  }
  if (unknown.length && fieldValidation === 'Warn') warnings.push(...unknown.map((f) => `unknown field "${f}"`));
  applyDefaults(o, schema);
  return validate(o, schema);
}

const sameContent = (a: KubeObject, b: KubeObject): boolean => {
  const strip = (o: KubeObject) =>
    JSON.stringify({ ...o, metadata: { ...o.metadata, resourceVersion: undefined, managedFields: undefined } });
  return strip(a) === strip(b);
};

const outsideMetadata = (o: KubeObject, withStatus: boolean) =>
  JSON.stringify(
    Object.fromEntries(
      Object.entries(o).filter(
        ([k]) => k !== 'metadata' && k !== 'apiVersion' && k !== 'kind' && (withStatus || k !== 'status'),
      ),
    ),
  );

/** Handles the kinds' write verbs with the API server's semantics. */
export class Writer {
  constructor(private readonly store: Store) {}

  /** Absent, it is Warn, as on a real API server (v1.23+); kubectl asks for Strict itself. */
  private fieldValidation(req: Request): string {
    const v = req.query.get('fieldValidation') ?? 'Warn';
    if (!['Strict', 'Warn', 'Ignore'].includes(v))
      throw badRequest(`fieldValidation must be one of Strict, Warn or Ignore, not "${v}"`);
    return v;
  }

  private dryRun(req: Request): boolean {
    const d = req.query.get('dryRun');
    if (d && d !== 'All') throw badRequest(`dryRun must be "All", not "${d}"`);
    return d === 'All';
  }

  private checkIdentity(req: Request, o: any): KubeObject {
    if (!o || typeof o !== 'object' || Array.isArray(o)) throw badRequest('the body is not a Kubernetes object');
    const t = req.t;
    if (o.kind !== undefined && o.kind !== t.kind)
      throw badRequest(`the kind of the object (${o.kind}) does not match ${t.kind}`);
    if (o.apiVersion !== undefined && o.apiVersion !== groupVersion(t.group, req.version)) {
      throw badRequest(
        `the API version in the data (${o.apiVersion}) does not match ` +
          `the expected API version (${groupVersion(t.group, req.version)})`,
      );
    }
    o.metadata ??= {};
    if (t.namespaced) {
      if (o.metadata.namespace && req.namespace && o.metadata.namespace !== req.namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      o.metadata.namespace = req.namespace ?? o.metadata.namespace;
    } else delete o.metadata.namespace;
    return o as KubeObject;
  }

  private requireNamespace(t: ResourceType, ns: string | undefined): void {
    if (!t.namespaced) return;
    const nsType = this.store.types.get('namespaces')!;
    if (!ns || !this.store.get(nsType, undefined, ns))
      throw new StatusError(404, 'NotFound', `namespaces "${ns ?? ''}" not found`, { name: ns, kind: 'namespaces' });
  }

  create(req: Request, fromApply = false): Result {
    const t = req.t;
    const o = this.checkIdentity(req, parseBody(req));
    this.requireNamespace(t, o.metadata.namespace);
    if (!o.metadata.name && o.metadata.generateName)
      o.metadata.name = `${o.metadata.generateName}${randomUUID().replace(/-/g, '').slice(0, 5)}`;
    if (!o.metadata.name)
      throw invalid(t, '', [
        {
          reason: 'FieldValueRequired',
          field: 'metadata.name',
          message: 'metadata.name: Required value: name or generateName is required',
        },
      ]);
    if (req.name && req.name !== o.metadata.name)
      throw badRequest(`the name of the object (${o.metadata.name}) does not match the name on the URL (${req.name})`);
    if (this.store.get(t, o.metadata.namespace, o.metadata.name)) throw alreadyExists(t, o.metadata.name);
    if (!t.builtin && t.statusSubresource) delete o.status;
    if (t.builtin) decodeBuiltin(t, req.version, o);
    applyBuiltinDefaults(this.store, t, o);
    const warnings: string[] = [];
    const causes = [
      ...checkMetadata(t, o),
      ...(t.builtin ? [] : admitCustom(t, req.version, o, this.fieldValidation(req), warnings)),
    ];
    if (causes.length) throw invalid(t, o.metadata.name, causes);
    Object.assign(o.metadata, {
      uid: randomUUID(),
      creationTimestamp: now(),
      generation: t.generation ? 1 : undefined,
    });
    delete o.metadata.deletionTimestamp;
    if (!t.generation) delete o.metadata.generation;
    Object.assign(o, { apiVersion: groupVersion(t.group, t.versions[0]!), kind: t.kind });
    if (typeKey(t) === CRD_KEY) acceptCrd(o, now());
    if (!fromApply) recordUpdate(undefined, o, req.query.get('fieldManager') ?? undefined, o.apiVersion!);
    if (this.dryRun(req)) return { status: 201, body: served(o, t, req.version), warnings };
    o.metadata.resourceVersion = this.store.nextRv();
    const stored = this.store.put(t, o);
    if (typeKey(t) === CRD_KEY) this.store.register(crdType(o));
    return { status: 201, body: served(stored, t, req.version), warnings };
  }

  /** The common end of update, patch and apply: everything but how `next` was computed. */
  private commit(
    req: Request,
    old: KubeObject,
    proposed: KubeObject,
    manager: string | undefined,
    recordManagers = true,
  ): Result {
    const t = req.t;
    const next = structuredClone(proposed);
    next.metadata ??= {};
    const preconditionRv = next.metadata.resourceVersion;
    if (preconditionRv && preconditionRv !== old.metadata.resourceVersion) throw conflict(t, old.metadata.name!);
    if (next.metadata.name !== undefined && next.metadata.name !== old.metadata.name) {
      throw badRequest(
        `the name of the object (${next.metadata.name}) does not match the name on the URL (${old.metadata.name})`,
      );
    }
    // Identity and server-owned metadata stay as they are.
    for (const k of [
      'name',
      'namespace',
      'uid',
      'creationTimestamp',
      'deletionTimestamp',
      'deletionGracePeriodSeconds',
      'generation',
    ] as const) {
      if (old.metadata[k] === undefined) delete next.metadata[k];
      else next.metadata[k] = old.metadata[k] as never;
    }
    Object.assign(next, { apiVersion: old.apiVersion, kind: old.kind });
    if (req.subresource === 'status') {
      const onlyStatus = structuredClone(old);
      if (next.status === undefined) delete onlyStatus.status;
      else onlyStatus.status = next.status;
      onlyStatus.metadata.managedFields = next.metadata.managedFields;
      Object.keys(next).forEach((k) => delete (next as any)[k]);
      Object.assign(next, onlyStatus);
    } else if (t.statusSubresource) {
      if (old.status === undefined) delete next.status;
      else next.status = structuredClone(old.status);
    }
    if (t.builtin) decodeBuiltin(t, req.version, next);
    const warnings: string[] = [];
    const causes = [
      ...checkMetadata(t, next),
      ...(t.builtin ? [] : admitCustom(t, req.version, next, this.fieldValidation(req), warnings)),
    ];
    if (causes.length) throw invalid(t, old.metadata.name!, causes);
    if (old.metadata.deletionTimestamp) {
      const added = (next.metadata.finalizers ?? []).filter((f) => !(old.metadata.finalizers ?? []).includes(f));
      if (added.length) {
        throw invalid(t, old.metadata.name!, [
          {
            reason: 'FieldValueForbidden',
            field: 'metadata.finalizers',
            message: 'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted',
          },
        ]);
      }
    }
    if (t.generation && outsideMetadata(old, !t.statusSubresource) !== outsideMetadata(next, !t.statusSubresource))
      next.metadata.generation = (old.metadata.generation ?? 1) + 1;
    if (recordManagers) recordUpdate(old, next, manager, next.apiVersion!);
    if (!next.metadata.finalizers?.length) delete next.metadata.finalizers;
    if (this.dryRun(req)) return { status: 200, body: served(next, t, req.version), warnings };
    if (sameContent(old, next)) return { status: 200, body: served(old, t, req.version), warnings };
    next.metadata.resourceVersion = this.store.nextRv();
    // As the API server's shouldDeleteDuringUpdate: an update deletes only an object being finalized
    // (its last finalizer removed, no grace period left), never a pod still terminating gracefully.
    if (
      next.metadata.deletionTimestamp &&
      !next.metadata.finalizers?.length &&
      old.metadata.finalizers?.length &&
      !old.metadata.deletionGracePeriodSeconds
    ) {
      this.store.remove(t, next);
      this.afterDelete(t, next);
      return { status: 200, body: served(next, t, req.version), warnings };
    }
    const stored = this.store.put(t, next, old);
    // A changed CRD changes its kind at once: versions, schema, printer columns.
    if (typeKey(t) === CRD_KEY) this.store.register(crdType(next));
    return { status: 200, body: served(stored, t, req.version), warnings };
  }

  private existing(req: Request): KubeObject {
    const o = this.store.get(req.t, req.namespace, req.name!);
    if (!o) throw notFound(req.t, req.name!);
    return o;
  }

  /** Writes an object a subresource handler computed (preconditions as in an update). */
  updateFromSubresource(req: Request, next: KubeObject): Result {
    return this.commit(req, this.existing(req), next, req.query.get('fieldManager') ?? undefined);
  }

  update(req: Request): Result {
    const old = this.existing(req);
    const o = this.checkIdentity(req, parseBody(req));
    if (!req.t.builtin && !o.metadata.resourceVersion) {
      throw invalid(req.t, req.name!, [
        {
          reason: 'FieldValueInvalid',
          field: 'metadata.resourceVersion',
          message: 'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update',
        },
      ]);
    }
    return this.commit(req, old, o, req.query.get('fieldManager') ?? undefined);
  }

  patch(req: Request): Result {
    const type = req.contentType.split(';')[0]!.trim();
    const manager = req.query.get('fieldManager') ?? undefined;
    const force = req.query.get('force');
    if (type === 'application/apply-patch+yaml' || type === 'application/apply-patch+cbor') {
      if (!manager) {
        throw new StatusError(
          422,
          'Invalid',
          'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
          {
            causes: [
              {
                reason: 'FieldValueRequired',
                field: 'fieldManager',
                message: 'Required value: is required for apply patch',
              },
            ],
          },
        );
      }
      const config = this.checkIdentity(req, parseBody(req));
      const old = this.store.get(req.t, req.namespace, req.name!);
      if (!old) {
        config.metadata.name ??= req.name;
        const applied = serverSideApply(undefined, config, manager, true, groupVersion(req.t.group, req.version));
        return this.create(
          { ...req, body: JSON.stringify(applied), contentType: 'application/json', query: withoutForce(req.query) },
          true,
        );
      }
      const base = structuredClone(old);
      if (req.subresource === 'status') delete config.spec;
      const applied = serverSideApply(base, config, manager, force === 'true', groupVersion(req.t.group, req.version));
      return this.commit(
        req,
        old,
        { ...applied, metadata: { ...applied.metadata, resourceVersion: config.metadata.resourceVersion } },
        manager,
        false,
      );
    }
    if (force !== null) {
      throw new StatusError(
        422,
        'Invalid',
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch',
        {
          causes: [
            {
              reason: 'FieldValueForbidden',
              field: 'force',
              message: 'Forbidden: may not be specified for non-apply patch',
            },
          ],
        },
      );
    }
    const old = this.existing(req);
    const body = parseBody(req);
    let next: KubeObject;
    if (type === 'application/merge-patch+json') next = mergePatch(old, body);
    else if (type === 'application/json-patch+json') next = jsonPatch(old, body);
    else if (type === 'application/strategic-merge-patch+json') {
      if (!req.t.builtin) throw unsupportedMediaType(type);
      next = strategicMergePatch(old, body);
    } else throw unsupportedMediaType(type);
    // A resourceVersion in the patch is a precondition; the stored one is not.
    const rvInPatch = type === 'application/json-patch+json' ? undefined : body?.metadata?.resourceVersion;
    next.metadata = { ...next.metadata, resourceVersion: rvInPatch };
    if (
      type === 'application/json-patch+json' &&
      (body as any[]).some((op) => op?.path === '/metadata/resourceVersion' && op.op !== 'test')
    ) {
      next.metadata.resourceVersion = (body as any[]).find((op) => op?.path === '/metadata/resourceVersion').value;
    }
    return this.commit(req, old, next, manager);
  }

  delete(req: Request): Result {
    const t = req.t;
    const old = this.existing(req);
    let opts: any = {};
    if (req.body) {
      try {
        opts = JSON.parse(req.body);
      } catch {
        throw badRequest('the DeleteOptions body is not valid JSON');
      }
    }
    const pre = opts.preconditions ?? {};
    if (
      (pre.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion) ||
      (pre.uid && pre.uid !== old.metadata.uid)
    ) {
      throw conflict(t, old.metadata.name!);
    }
    const dry = this.dryRun(req);
    const grace = gracePeriod(this.store, t, old, opts);
    if (grace > 0) {
      // A pod on a node with a kubelet terminates first: the kubelet stops its containers and deletes it.
      const shorter = !old.metadata.deletionTimestamp || grace < (old.metadata.deletionGracePeriodSeconds ?? Infinity);
      if (!shorter) return { status: 200, body: served(old, t, req.version) };
      const next = structuredClone(old);
      next.metadata.deletionTimestamp = new Date(Date.now() + grace * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      next.metadata.deletionGracePeriodSeconds = grace;
      if (t.generation) next.metadata.generation = (old.metadata.generation ?? 1) + 1;
      if (dry) return { status: 200, body: served(next, t, req.version) };
      next.metadata.resourceVersion = this.store.nextRv();
      return { status: 200, body: served(this.store.put(t, next, old), t, req.version) };
    }
    if (old.metadata.finalizers?.length) {
      if (old.metadata.deletionTimestamp) return { status: 200, body: served(old, t, req.version) };
      const next = structuredClone(old);
      next.metadata.deletionTimestamp = now();
      next.metadata.deletionGracePeriodSeconds = 0;
      if (t.generation) next.metadata.generation = (old.metadata.generation ?? 1) + 1;
      if (dry) return { status: 200, body: served(next, t, req.version) };
      next.metadata.resourceVersion = this.store.nextRv();
      return { status: 200, body: served(this.store.put(t, next, old), t, req.version) };
    }
    const last = structuredClone(old);
    if (dry) return { status: 200, body: served(last, t, req.version) };
    last.metadata.resourceVersion = this.store.nextRv();
    this.store.remove(t, last);
    this.afterDelete(t, last);
    return { status: 200, body: served(last, t, req.version) };
  }

  deleteCollection(req: Request): Result {
    const labels = parseLabelSelector(req.query.get('labelSelector') ?? undefined);
    const fields = parseFieldSelector(req.query.get('fieldSelector') ?? undefined, req.t);
    const items = this.store
      .list(req.t, req.namespace)
      .filter((o) => matchesLabels(labels, o.metadata.labels) && matchesFields(fields, o));
    const deleted = items.map(
      (o) => this.delete({ ...req, name: o.metadata.name, namespace: o.metadata.namespace, body: undefined }).body,
    );
    return {
      status: 200,
      body: {
        kind: req.t.listKind,
        apiVersion: groupVersion(req.t.group, req.version),
        metadata: { resourceVersion: String(this.store.rv) },
        items: deleted,
      },
    };
  }

  /** What goes with an object: a CRD takes its objects and kind; a namespace its contents. */
  private afterDelete(t: ResourceType, last: KubeObject): void {
    if (typeKey(t) === CRD_KEY) {
      const ct = this.store.types.get(`${last.spec.names.plural}.${last.spec.group}`);
      if (ct) {
        for (const o of this.store.list(ct))
          this.store.remove(ct, { ...o, metadata: { ...o.metadata, resourceVersion: this.store.nextRv() } });
        this.store.unregister(ct);
      }
    }
    if (t.resource === 'namespaces' && !t.group) {
      for (const nt of this.store.types.values()) {
        if (!nt.namespaced) continue;
        for (const o of this.store.list(nt, last.metadata.name))
          this.store.remove(nt, { ...o, metadata: { ...o.metadata, resourceVersion: this.store.nextRv() } });
      }
    }
  }
}

/**
 * Seconds a deleted object has to terminate: only pods whose node runs a kubelet get one
 * (DeleteOptions, else the pod's terminationGracePeriodSeconds, else 30).
 */
function gracePeriod(store: Store, t: ResourceType, o: KubeObject, opts: any): number {
  if (t.resource !== 'pods' || t.group || !o.spec?.nodeName || !store.hooks.kubeletRuns?.(o.spec.nodeName)) return 0;
  if (['Succeeded', 'Failed'].includes(o.status?.phase)) return 0;
  const g = opts.gracePeriodSeconds ?? o.spec.terminationGracePeriodSeconds ?? 30;
  return Math.max(0, Number(g));
}

function withoutForce(q: URLSearchParams): URLSearchParams {
  const out = new URLSearchParams(q);
  out.delete('force');
  return out;
}
