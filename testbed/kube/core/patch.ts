/* eslint-disable @typescript-eslint/no-explicit-any */
import jsonpatch from 'fast-json-patch';
import { StatusError, badRequest } from './errors.js';

const isObject = (v: unknown): v is Record<string, any> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** RFC 7396 JSON merge patch: objects merge, null deletes, everything else replaces. */
export function mergePatch(target: any, patch: any): any {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, any> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** RFC 6902 JSON patch; a failed `test` or a bad path is a 422 like the API server's. */
export function jsonPatch(target: any, ops: unknown): any {
  if (!Array.isArray(ops)) throw badRequest('the JSON patch is not an array of operations');
  try {
    return jsonpatch.applyPatch(structuredClone(target), ops as jsonpatch.Operation[], true, false).newDocument;
  } catch (e) {
    const err = e as { name?: string; message: string };
    const what = err.name === 'TEST_OPERATION_FAILED' ? 'the test operation failed' : err.message.split('\n')[0];
    throw new StatusError(422, 'Invalid', `the server rejected our request due to an error in our request: ${what}`);
  }
}

/**
 * Strategic merge patch, as far as kubectl uses it on built-in kinds: a merge patch in which
 * lists of objects that carry a `name` merge by name, `$patch: delete` removes an entry,
 * `$setElementOrder`/`$retainKeys` directives are accepted, and `$deleteFromPrimitiveList`
 * removes values from a list of strings.
 */
export function strategicMergePatch(target: any, patch: any): any {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, any> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith('$setElementOrder/') || k === '$retainKeys' || k === '$patch') continue;
    if (k.startsWith('$deleteFromPrimitiveList/')) {
      const field = k.slice('$deleteFromPrimitiveList/'.length);
      if (Array.isArray(out[field])) out[field] = out[field].filter((x: unknown) => !(v as unknown[]).includes(x));
      continue;
    }
    if (v === null) delete out[k];
    else if (Array.isArray(v) && Array.isArray(out[k]) && v.every((e) => isObject(e) && typeof e.name === 'string')) {
      const merged = [...out[k]];
      for (const item of v) {
        const i = merged.findIndex((e) => isObject(e) && e.name === item.name);
        if (item.$patch === 'delete') {
          if (i >= 0) merged.splice(i, 1);
        } else if (i >= 0) merged[i] = strategicMergePatch(merged[i], item);
        else merged.push(strategicMergePatch({}, item));
      }
      out[k] = merged;
    } else out[k] = isObject(v) ? strategicMergePatch(out[k], v) : structuredClone(v);
  }
  return out;
}
