/**
 * A small builder for structural OpenAPI v3 schemas whose TypeScript type is inferred from
 * the same definition, so that the CRD manifests and the code cannot disagree.
 */

export type JsonSchema = Record<string, unknown>;

export interface Schema<T> {
  readonly schema: JsonSchema;
  /** Phantom: the TypeScript type this schema describes. */
  readonly _type?: T;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

type Common = { description?: string };
const make = <T>(schema: JsonSchema): Schema<T> => ({
  schema: Object.fromEntries(Object.entries(schema).filter(([, v]) => v !== undefined)),
});

export const s = {
  string: (
    o: Common & { default?: string; pattern?: string; minLength?: number; maxLength?: number; format?: string } = {},
  ) => make<string>({ type: 'string', ...o }),
  int: (o: Common & { default?: number; minimum?: number; maximum?: number } = {}) =>
    make<number>({ type: 'integer', ...o }),
  bool: (o: Common & { default?: boolean } = {}) => make<boolean>({ type: 'boolean', ...o }),
  enum: <const V extends readonly string[]>(values: V, o: Common & { default?: V[number] } = {}) =>
    make<V[number]>({ type: 'string', enum: [...values], ...o }),
  array: <T>(
    items: Schema<T>,
    o: Common & { maxItems?: number; listType?: 'atomic' | 'set' | 'map'; listMapKeys?: string[] } = {},
  ) =>
    make<T[]>({
      type: 'array',
      items: items.schema,
      description: o.description,
      maxItems: o.maxItems,
      'x-kubernetes-list-type': o.listType,
      'x-kubernetes-list-map-keys': o.listMapKeys,
    }),
  map: <T>(values: Schema<T>, o: Common & { maxProperties?: number } = {}) =>
    make<Record<string, T>>({ type: 'object', additionalProperties: values.schema, ...o }),
  object: <P extends Record<string, Schema<unknown>>, R extends keyof P & string = never>(
    props: P,
    o: Common & { required?: readonly R[]; validations?: Array<{ rule: string; message: string }> } = {},
  ) =>
    make<{ [K in R]: Infer<P[K]> } & { [K in Exclude<keyof P, R>]?: Infer<P[K]> }>({
      type: 'object',
      description: o.description,
      required: o.required?.length ? [...o.required] : undefined,
      'x-kubernetes-validations': o.validations,
      properties: Object.fromEntries(Object.entries(props).map(([k, v]) => [k, v.schema])),
    }),
};
