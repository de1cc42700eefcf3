import { describe, expect, it } from '@jest/globals';
import { DEFAULT_API_LIMITS } from '../../src/cloud/limits.js';
import { apiLimitsSchema, defaultClassSpecSchema, strictValuesSchema } from '../../src/api/values-schema.js';
import { eniPoolClassSpec } from '../../src/api/types.js';

const walk = (schema: unknown, visit: (s: Record<string, unknown>) => void): void => {
  if (!schema || typeof schema !== 'object') return;
  visit(schema as Record<string, unknown>);
  for (const v of Object.values(schema)) walk(v, visit);
};

describe("the chart's generated schema parts", () => {
  it('make every object of the ENIPoolClass spec refuse unknown keys, keep maps open and drop what JSON schema does not know', () => {
    const spec = defaultClassSpecSchema();
    expect(spec.additionalProperties).toBe(false);
    expect(Object.keys(spec.properties as object)).toEqual(Object.keys(eniPoolClassSpec.schema.properties as object));
    walk(spec, (s) => {
      for (const k of Object.keys(s)) expect(k.startsWith('x-kubernetes-')).toBe(false);
      if (s.properties) expect(s.additionalProperties).toBe(false);
    });
    const props = spec.properties as Record<string, Record<string, unknown>>;
    // A map (tags) takes any key; a label selector's expressions refuse unknown fields.
    expect(props.vSwitchTags!.additionalProperties).toEqual({ type: 'string' });
    const expressions = (props.nodeSelector!.properties as Record<string, Record<string, unknown>>).matchExpressions!;
    expect((expressions.items as Record<string, unknown>).additionalProperties).toBe(false);
    // Types, ranges and enums are the CRD's.
    expect(props.preAllocate).toMatchObject({ type: 'integer', minimum: 0 });
    expect(props.vSwitchSelection!.enum).toEqual(['MostFreeIPs', 'Ordered']);
  });

  it('strictValuesSchema leaves an explicit additionalProperties alone', () => {
    expect(strictValuesSchema({ type: 'object', properties: {}, additionalProperties: true })).toEqual({
      type: 'object',
      properties: {},
      additionalProperties: true,
    });
  });

  it('limit operator.apiLimits to the actions the cloud client knows', () => {
    const limits = apiLimitsSchema(Object.keys(DEFAULT_API_LIMITS));
    expect(limits.additionalProperties).toBe(false);
    expect(Object.keys(limits.properties as object).sort()).toEqual(Object.keys(DEFAULT_API_LIMITS).sort());
  });
});
