import type { ErrorObject } from 'ajv';

/** A JSON pointer as a field path: `/rules/0/verbs/1` -> `rules[0].verbs[1]`. */
export function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .filter(Boolean)
    .map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`))
    .join('');
}

/** What a schema error says, naming the field and what was wrong with it (and what is allowed). */
export function describeSchemaError(e: ErrorObject): string {
  const at = fieldPath(e.instancePath) || '(top level)';
  const params = e.params as { additionalProperty?: string; missingProperty?: string; allowedValues?: unknown[] };
  if (e.keyword === 'additionalProperties') return `${at}: unknown field "${params.additionalProperty}"`;
  if (e.keyword === 'required') return `${at}: missing required field "${params.missingProperty}"`;
  if (e.keyword === 'pattern') return `${at}: "${String(e.data)}" is not a valid value (expected ${e.params.pattern})`;
  if (e.keyword === 'enum')
    return `${at}: must be equal to one of the allowed values ${JSON.stringify(params.allowedValues)}`;
  return `${at}: ${e.message ?? 'is invalid'}`;
}
