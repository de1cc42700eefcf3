/* eslint-disable @typescript-eslint/no-explicit-any */
import { StatusError } from './errors.js';
import type { KubeObject, ManagedFieldsEntry } from './types.js';

/**
 * Server-side apply, simplified: each manager owns leaf fields (lists are atomic); applying a
 * value another manager owns with a different value is a conflict unless forced; fields a
 * manager applied before and no longer applies are removed. Ownership is kept in
 * `metadata.managedFields` in the FieldsV1 format, so kubectl shows it as usual.
 */

type Path = string[];
const key = (p: Path): string => JSON.stringify(p);
const isObject = (v: unknown): v is Record<string, any> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Leaf paths of a configuration; apiVersion, kind and identity metadata are not owned. */
export function leafPaths(obj: any): Path[] {
  const out: Path[] = [];
  const walk = (v: any, at: Path) => {
    if (isObject(v) && Object.keys(v).length > 0) {
      for (const [k, sub] of Object.entries(v)) walk(sub, [...at, k]);
    } else out.push(at);
  };
  for (const [k, v] of Object.entries(obj ?? {})) {
    if (k === 'apiVersion' || k === 'kind' || k === 'status') continue;
    if (k === 'metadata') {
      for (const mk of ['labels', 'annotations', 'finalizers', 'ownerReferences'])
        if ((v as any)?.[mk] !== undefined) walk((v as any)[mk], ['metadata', mk]);
      continue;
    }
    walk(v, [k]);
  }
  return out;
}

const getAt = (o: any, p: Path): any => p.reduce((v, k) => (v === undefined || v === null ? undefined : v[k]), o);

function deleteAt(o: any, p: Path): void {
  const parent = getAt(o, p.slice(0, -1));
  if (isObject(parent)) delete parent[p[p.length - 1]!];
}

function toFieldsV1(paths: Path[]): Record<string, unknown> {
  const root: Record<string, any> = {};
  for (const p of paths) {
    let node = root;
    for (const k of p) node = node[`f:${k}`] ??= {};
  }
  return root;
}

function fromFieldsV1(f: Record<string, any>, at: Path = []): Path[] {
  const children = Object.keys(f).filter((k) => k.startsWith('f:'));
  if (children.length === 0) return at.length ? [at] : [];
  return children.flatMap((k) => fromFieldsV1(f[k], [...at, k.slice(2)]));
}

type Ownership = Map<
  string,
  { operation: 'Apply' | 'Update'; apiVersion: string; time: string; paths: Map<string, Path> }
>;

function readOwnership(obj: KubeObject | undefined): Ownership {
  const own: Ownership = new Map();
  for (const e of obj?.metadata.managedFields ?? []) {
    const id = `${e.manager}/${e.operation}`;
    const paths = new Map(fromFieldsV1(e.fieldsV1 ?? {}).map((p) => [key(p), p] as const));
    own.set(id, { operation: e.operation, apiVersion: e.apiVersion, time: e.time, paths });
  }
  return own;
}

function writeOwnership(obj: KubeObject, own: Ownership): void {
  const entries: ManagedFieldsEntry[] = [];
  for (const [id, o] of own) {
    if (o.paths.size === 0) continue;
    entries.push({
      manager: id.slice(0, id.lastIndexOf('/')),
      operation: o.operation,
      apiVersion: o.apiVersion,
      time: o.time,
      fieldsType: 'FieldsV1',
      fieldsV1: toFieldsV1([...o.paths.values()]),
    });
  }
  if (entries.length) obj.metadata.managedFields = entries;
  else delete obj.metadata.managedFields;
}

/** Deep merge for apply: objects merge, everything else (lists included) replaces. */
function applyMerge(target: any, config: any): any {
  if (!isObject(config)) return structuredClone(config);
  const out: Record<string, any> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(config)) out[k] = applyMerge(out[k], v);
  return out;
}

const display = (p: Path): string => `.${p.join('.')}`;
const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

export function serverSideApply(
  current: KubeObject | undefined,
  config: KubeObject,
  manager: string,
  force: boolean,
  apiVersion: string,
): KubeObject {
  const own = readOwnership(current);
  const id = `${manager}/Apply`;
  const applied = leafPaths(config);
  const conflicts: Array<{ manager: string; path: Path }> = [];
  for (const [otherId, o] of own) {
    if (otherId === id) continue;
    for (const p of applied) {
      if (!o.paths.has(key(p))) continue;
      if (JSON.stringify(getAt(current, p)) === JSON.stringify(getAt(config, p))) continue;
      conflicts.push({ manager: otherId.slice(0, otherId.lastIndexOf('/')), path: p });
    }
  }
  if (conflicts.length && !force) {
    const lines = conflicts.map((c) => `conflict with "${c.manager}": ${display(c.path)}`);
    throw new StatusError(
      409,
      'Conflict',
      `Apply failed with ${conflicts.length} conflict${conflicts.length > 1 ? 's' : ''}: ${lines.join('\n')}`,
      {
        causes: conflicts.map((c) => ({
          reason: 'FieldManagerConflict',
          message: `conflict with "${c.manager}"`,
          field: display(c.path),
        })),
      },
    );
  }
  // Forced or shared with the same value: those fields now belong to this manager too; a force takes them away.
  if (force) for (const c of conflicts) for (const [, o] of own) o.paths.delete(key(c.path));
  const previous = own.get(id)?.paths ?? new Map<string, Path>();
  const appliedKeys = new Set(applied.map(key));
  let result: KubeObject = applyMerge(current ?? {}, config);
  for (const [k, p] of previous) {
    if (appliedKeys.has(k)) continue;
    const ownedByOthers = [...own].some(([oid, o]) => oid !== id && o.paths.has(k));
    if (!ownedByOthers) deleteAt(result, p);
  }
  result = result as KubeObject;
  own.set(id, {
    operation: 'Apply',
    apiVersion,
    time: now(),
    paths: new Map(applied.map((p) => [key(p), p] as const)),
  });
  writeOwnership(result, own);
  return result;
}

/** Records what a non-apply write changed as owned by its field manager. */
export function recordUpdate(
  before: KubeObject | undefined,
  after: KubeObject,
  manager: string | undefined,
  apiVersion: string,
): void {
  if (!manager) {
    if (before?.metadata.managedFields) after.metadata.managedFields = before.metadata.managedFields;
    return;
  }
  const own = readOwnership(before);
  const id = `${manager}/Update`;
  const changed = leafPaths(after).filter((p) => JSON.stringify(getAt(before, p)) !== JSON.stringify(getAt(after, p)));
  const gone = leafPaths(before)
    .filter((p) => getAt(after, p) === undefined)
    .map(key);
  for (const [, o] of own) {
    for (const p of changed) o.paths.delete(key(p));
    for (const k of gone) o.paths.delete(k);
  }
  const mine = own.get(id) ?? { operation: 'Update' as const, apiVersion, time: now(), paths: new Map<string, Path>() };
  for (const p of changed) mine.paths.set(key(p), p);
  mine.time = now();
  own.set(id, mine);
  writeOwnership(after, own);
}
