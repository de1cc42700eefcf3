import { evaluate as evaluateCel } from '@marcbachmann/cel-js';
/* eslint-disable @typescript-eslint/no-explicit-any */
import type { StatusCause } from './errors.js';

export type Schema = Record<string, any>;

const preserves = (s: Schema | undefined): boolean => Boolean(s?.['x-kubernetes-preserve-unknown-fields']);
const intOrString = (s: Schema | undefined): boolean => Boolean(s?.['x-kubernetes-int-or-string']);

/** Why a CRD schema is not structural (apiextensions' rules), as field causes. */
export function structuralErrors(schema: Schema | undefined, path: string): StatusCause[] {
  const out: StatusCause[] = [];
  const walk = (s: Schema, at: string, root: boolean) => {
    if (s.$ref !== undefined)
      out.push({
        reason: 'FieldValueForbidden',
        field: `${at}.$ref`,
        message: `${at}.$ref: Forbidden: $ref is not allowed in a structural schema`,
      });
    if (!s.type && !intOrString(s) && !preserves(s) && !(root && s.properties === undefined)) {
      out.push({
        reason: 'FieldValueRequired',
        field: `${at}.type`,
        message: `${at}.type: Required value: must not be empty for specified object fields`,
      });
    }
    if (s.type === 'array' && !s.items)
      out.push({
        reason: 'FieldValueRequired',
        field: `${at}.items`,
        message: `${at}.items: Required value: must be specified`,
      });
    for (const [k, sub] of Object.entries<Schema>(s.properties ?? {})) walk(sub, `${at}.properties[${k}]`, false);
    if (s.items && typeof s.items === 'object') walk(s.items, `${at}.items`, false);
    if (s.additionalProperties && typeof s.additionalProperties === 'object')
      walk(s.additionalProperties, `${at}.additionalProperties`, false);
    if (s.additionalProperties !== undefined && s.properties !== undefined) {
      out.push({
        reason: 'FieldValueForbidden',
        field: `${at}.additionalProperties`,
        message: `${at}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive`,
      });
    }
  };
  if (!schema)
    out.push({ reason: 'FieldValueRequired', field: path, message: `${path}: Required value: schemas are required` });
  else {
    if (schema.type !== 'object')
      out.push({
        reason: 'FieldValueInvalid',
        field: `${path}.type`,
        message: `${path}.type: Invalid value: "${schema.type ?? ''}": must be object at the root`,
      });
    walk(schema, path, true);
  }
  return out;
}

const ROOT_KEEP = new Set(['apiVersion', 'kind', 'metadata']);

/** Removes fields the schema does not declare; returns their paths (for fieldValidation). */
export function prune(obj: any, schema: Schema): string[] {
  const unknown: string[] = [];
  const walk = (v: any, s: Schema | undefined, at: string, root: boolean) => {
    if (!s || v === null || typeof v !== 'object' || preserves(s)) return;
    if (Array.isArray(v)) {
      v.forEach((item, i) => walk(item, s.items, `${at}[${i}]`, false));
      return;
    }
    for (const key of Object.keys(v)) {
      if (root && ROOT_KEEP.has(key)) continue;
      const sub =
        s.properties?.[key] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
      if (!sub && s.additionalProperties !== true) {
        unknown.push(at ? `${at}.${key}` : key);
        delete v[key];
        continue;
      }
      walk(v[key], sub, at ? `${at}.${key}` : key, false);
    }
  };
  walk(obj, schema, '', true);
  return unknown;
}

/** Fills `default`s where a field is absent, inside objects that exist. */
export function applyDefaults(obj: any, schema: Schema): void {
  const walk = (v: any, s: Schema | undefined) => {
    if (!s || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      v.forEach((item) => walk(item, s.items));
      return;
    }
    for (const [key, sub] of Object.entries<Schema>(s.properties ?? {})) {
      if (v[key] === undefined && sub.default !== undefined) v[key] = structuredClone(sub.default);
      walk(v[key], sub);
    }
    if (typeof s.additionalProperties === 'object')
      for (const key of Object.keys(v)) walk(v[key], s.additionalProperties);
  };
  walk(obj, schema);
}

const show = (v: unknown): string => (typeof v === 'string' ? `"${v}"` : JSON.stringify(v));
const typeOf = (v: unknown): string =>
  v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;

/** Validates against the OpenAPI v3 subset CRDs use; messages follow the API server's wording. */
export function validate(obj: any, schema: Schema): StatusCause[] {
  const out: StatusCause[] = [];
  const bad = (field: string, v: unknown, why: string) =>
    out.push({ reason: 'FieldValueInvalid', field, message: `${field}: Invalid value: ${show(v)}: ${why}` });
  const walk = (v: any, s: Schema | undefined, at: string) => {
    if (!s) return;
    if (v === null) {
      if (!s.nullable && s.type) bad(at, v, `${at} in body must be of type ${s.type}: "null"`);
      return;
    }
    if (intOrString(s)) {
      if (typeof v !== 'string' && !Number.isInteger(v))
        bad(at, v, `${at} in body must be of type integer or string: "${typeOf(v)}"`);
    } else if (s.type) {
      const t = typeOf(v);
      const ok = s.type === t || (s.type === 'number' && t === 'integer');
      if (!ok) {
        bad(at, v, `${at} in body must be of type ${s.type}: "${t}"`);
        return;
      }
    }
    if (s.enum && !s.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(v))) {
      out.push({
        reason: 'FieldValueNotSupported',
        field: at,
        message: `${at}: Unsupported value: ${show(v)}: supported values: ${s.enum.map(show).join(', ')}`,
      });
    }
    if (typeof v === 'number') {
      if (s.minimum !== undefined && (s.exclusiveMinimum ? v <= s.minimum : v < s.minimum))
        bad(at, v, `${at} in body should be greater than ${s.exclusiveMinimum ? '' : 'or equal to '}${s.minimum}`);
      if (s.maximum !== undefined && (s.exclusiveMaximum ? v >= s.maximum : v > s.maximum))
        bad(at, v, `${at} in body should be less than ${s.exclusiveMaximum ? '' : 'or equal to '}${s.maximum}`);
    }
    if (typeof v === 'string') {
      if (s.minLength !== undefined && v.length < s.minLength)
        bad(at, v, `${at} in body should be at least ${s.minLength} chars long`);
      if (s.maxLength !== undefined && v.length > s.maxLength)
        out.push({
          reason: 'FieldValueTooLong',
          field: at,
          message: `${at}: Too long: may not be longer than ${s.maxLength}`,
        });
      if (s.pattern !== undefined && !new RegExp(s.pattern).test(v))
        bad(at, v, `${at} in body should match '${s.pattern}'`);
      if (s.format === 'date-time' && Number.isNaN(Date.parse(v)))
        bad(at, v, `${at} in body must be of type date-time: "${v}"`);
    }
    for (const rule of s['x-kubernetes-validations'] ?? []) {
      const why = celViolation(rule, v);
      if (why)
        out.push({ reason: 'FieldValueInvalid', field: at, message: `${at}: Invalid value: "${typeOf(v)}": ${why}` });
    }
    if (Array.isArray(v)) {
      if (s.minItems !== undefined && v.length < s.minItems)
        bad(at, v, `${at} in body should have at least ${s.minItems} items`);
      if (s.maxItems !== undefined && v.length > s.maxItems)
        out.push({
          reason: 'FieldValueTooMany',
          field: at,
          message: `${at}: Too many: ${v.length}: must have at most ${s.maxItems} items`,
        });
      if (s['x-kubernetes-list-type'] === 'set' && new Set(v.map((x) => JSON.stringify(x))).size !== v.length) {
        out.push({
          reason: 'FieldValueDuplicate',
          field: at,
          message: `${at}: Duplicate value: the list must not contain duplicates`,
        });
      }
      v.forEach((item, i) => walk(item, s.items, `${at}[${i}]`));
      return;
    }
    if (typeof v === 'object') {
      for (const req of s.required ?? []) {
        const field = at ? `${at}.${req}` : req;
        if (v[req] === undefined)
          out.push({ reason: 'FieldValueRequired', field, message: `${field}: Required value` });
      }
      if (s.maxProperties !== undefined && Object.keys(v).length > s.maxProperties)
        out.push({
          reason: 'FieldValueTooMany',
          field: at,
          message: `${at}: Too many: ${Object.keys(v).length}: must have at most ${s.maxProperties} items`,
        });
      for (const [key, sub] of Object.entries(v)) {
        const ss =
          s.properties?.[key] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
        if (at === '' && (key === 'metadata' || key === 'apiVersion' || key === 'kind')) continue;
        walk(sub, ss, at ? `${at}.${key}` : key);
      }
    }
  };
  walk(obj, schema, '');
  return out;
}

/**
 * Why a value breaks a CEL validation rule (x-kubernetes-validations), or undefined. Transition
 * rules (those reading oldSelf) are not evaluated: the emulator checks each object on its own.
 */
function celViolation(rule: { rule: string; message?: string }, self: unknown): string | undefined {
  if (/\boldSelf\b/.test(rule.rule)) return undefined;
  try {
    return evaluateCel(rule.rule, { self: celValue(self) }) === true
      ? undefined
      : (rule.message ?? `failed rule: ${rule.rule}`);
  } catch (e) {
    return `failed rule: ${rule.rule}: ${(e as Error).message}`;
  }
}

/** JSON as the CEL library takes it: maps as prototype-less objects, whatever realm parsed them. */
function celValue(v: unknown): unknown {
  if (Array.isArray(v)) return Array.from(v, celValue);
  if (v && typeof v === 'object')
    return Object.assign(Object.create(null), Object.fromEntries(Object.entries(v).map(([k, x]) => [k, celValue(x)])));
  return v;
}
