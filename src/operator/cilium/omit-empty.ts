import { sameJson } from '../../kube/same-json.js';

/**
 * A CiliumNode part as the agent writes it back: Cilium's Go types tag nearly every field
 * `omitempty`, so a false, zero, empty string, empty list or empty map the operator sends comes
 * back absent after the agent's next update. Compared raw, such a field would look changed
 * after every agent write and be written again.
 */
export function omitEmpty<T>(value: T): T {
  if (Array.isArray(value)) return value.map(omitEmpty) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) {
    const kept = omitEmpty(field);
    if (!isEmpty(kept)) out[key] = kept;
  }
  return out as T;
}

const isEmpty = (v: unknown): boolean =>
  v === undefined ||
  v === false ||
  v === 0 ||
  v === '' ||
  (Array.isArray(v) && v.length === 0) ||
  (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0);

/** Whether two CiliumNode parts say the same to the agent (Go's omitempty applied to both). */
export const sameForAgent = (a: unknown, b: unknown): boolean => sameJson(omitEmpty(a ?? {}), omitEmpty(b ?? {}));
