import { Ajv } from 'ajv';
import { describeSchemaError } from '../harness/schema-errors.js';

export interface FaultRule {
  /** The action it applies to; every action when absent. */
  action?: string;
  /**
   * error: answer with `code`; timeout: never answer; non-json: a 502 HTML page as a proxy
   * sends; drop-answer: carry the call out, then close the connection without answering.
   * Answers that are not what the action promises (ANSWER_FAULTS): http-no-code, missing-field,
   * wrong-field, repeat-next-token, empty-answer.
   */
  kind: FaultKind;
  code?: string;
  /** http-no-code: the HTTP status (300-599; 503 by default). */
  status?: number;
  /** missing-field, wrong-field: the top-level field of the answer (missing-field: the action's main one by default). */
  field?: string;
  /** wrong-field: the JSON value the field is given. */
  value?: unknown;
  /** Share of matching calls hit, 0 to 1. */
  rate: number;
  /** Hit at most this many calls, then stop. */
  times?: number;
}

export interface FaultSpec {
  rules?: FaultRule[];
  /** Added to every call, in (scaled) milliseconds. */
  latencyMs?: number;
  actionLatencyMs?: Record<string, number>;
  /** Share of detaches that stay `Detaching` until DetachNetworkInterface is issued again. */
  stuckDetachRate?: number;
  /** Share of attaches that fall back to `Available` instead of reaching `InUse`. */
  attachFailRate?: number;
  seed?: number;
}

/**
 * Answers that are not what the action promises. A gateway in front of the API answers
 * http-no-code without reaching it; the others are carried out first, the API's answer mangled on
 * its way back: http-no-code (a status, 503 by default, with a JSON body `{RequestId, Message}` and
 * no Code), missing-field (a 200 answer without `field`), wrong-field (`field` set to `value`),
 * repeat-next-token (a page answering the NextToken the call carried; calls without one are not
 * hit) and empty-answer (`{}`).
 */
export const ANSWER_FAULTS = [
  'http-no-code',
  'missing-field',
  'wrong-field',
  'repeat-next-token',
  'empty-answer',
] as const;

export type FaultKind = 'error' | 'timeout' | 'non-json' | 'drop-answer' | (typeof ANSWER_FAULTS)[number];
const KINDS: FaultKind[] = ['error', 'timeout', 'non-json', 'drop-answer', ...ANSWER_FAULTS];

/** Actions that page with NextToken, which repeat-next-token applies to. */
export const TOKEN_PAGED = [
  'DescribeNetworkInterfaces',
  'DescribeInstances',
  'DescribeSecurityGroups',
  'DescribeInstanceTypes',
] as const;

const rate = { type: 'number', minimum: 0, maximum: 1 } as const;
const faultSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    rules: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['kind', 'rate'],
        properties: {
          action: { type: 'string', minLength: 1 },
          kind: { enum: KINDS },
          code: { type: 'string', minLength: 1 },
          status: { type: 'integer', minimum: 300, maximum: 599 },
          field: { type: 'string', minLength: 1 },
          value: {},
          rate,
          times: { type: 'integer', minimum: 1 },
        },
      },
    },
    latencyMs: { type: 'number', minimum: 0 },
    actionLatencyMs: { type: 'object', additionalProperties: { type: 'number', minimum: 0 } },
    stuckDetachRate: rate,
    attachFailRate: rate,
    seed: { type: 'integer' },
  },
} as const;

const validate = new Ajv({ strict: true }).compile(faultSchema);

/** Validates a fault spec (from a fixture or the admin path); the message names the field. */
export function parseFaultSpec(data: unknown): FaultSpec {
  if (!validate(data)) throw new Error(`faults.${describeSchemaError(validate.errors![0]!)}`);
  const spec = data as FaultSpec;
  spec.rules?.forEach((r, i) => {
    const at = `faults.rules[${i}]`;
    if (r.kind === 'error' && !r.code) throw new Error(`${at}.code: an error rule needs a code`);
    if (r.status !== undefined && r.kind !== 'http-no-code')
      throw new Error(`${at}.status: only an http-no-code rule takes a status`);
    if (r.field !== undefined && r.kind !== 'missing-field' && r.kind !== 'wrong-field')
      throw new Error(`${at}.field: only missing-field and wrong-field rules take a field`);
    if (r.kind === 'wrong-field' && (r.field === undefined || !('value' in r)))
      throw new Error(`${at}: a wrong-field rule needs a field and a value`);
    if (r.value !== undefined && r.kind !== 'wrong-field')
      throw new Error(`${at}.value: only a wrong-field rule takes a value`);
    if (r.kind === 'repeat-next-token' && !(TOKEN_PAGED as readonly string[]).includes(r.action ?? ''))
      throw new Error(
        `${at}.action: repeat-next-token needs an action that pages by NextToken: ${TOKEN_PAGED.join(', ')}`,
      );
  });
  return spec;
}

/** A small seeded PRNG (mulberry32) so that a fault run can be repeated. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type FaultDecision =
  | { kind: 'none' }
  | { kind: 'error'; code: string }
  | { kind: 'timeout' }
  | { kind: 'non-json' }
  | { kind: 'drop-answer' }
  | { kind: 'http-no-code'; status: number }
  | { kind: 'missing-field'; field?: string }
  | { kind: 'wrong-field'; field: string; value: unknown }
  | { kind: 'repeat-next-token' }
  | { kind: 'empty-answer' };

export class Faults {
  private spec: FaultSpec = {};
  private readonly hits = new Map<FaultRule, number>();
  private random: () => number = prng(1);

  constructor(spec?: FaultSpec) {
    if (spec) this.set(spec);
  }

  set(spec: FaultSpec): void {
    this.spec = parseFaultSpec(spec);
    this.hits.clear();
    this.random = prng(spec.seed ?? Date.now());
  }

  get current(): FaultSpec {
    return this.spec;
  }

  /** The fault for this call, if any; `nextToken`: the NextToken the call carried. */
  decide(action: string, nextToken?: string): FaultDecision {
    for (const rule of this.spec.rules ?? []) {
      if (rule.action && rule.action !== action) continue;
      if (rule.kind === 'repeat-next-token' && !nextToken) continue;
      const hits = this.hits.get(rule) ?? 0;
      if (rule.times !== undefined && hits >= rule.times) continue;
      if (this.random() >= rule.rate) continue;
      this.hits.set(rule, hits + 1);
      switch (rule.kind) {
        case 'error':
          return { kind: 'error', code: rule.code! };
        case 'http-no-code':
          return { kind: 'http-no-code', status: rule.status ?? 503 };
        case 'missing-field':
          return { kind: 'missing-field', field: rule.field };
        case 'wrong-field':
          return { kind: 'wrong-field', field: rule.field!, value: rule.value };
        default:
          return { kind: rule.kind };
      }
    }
    return { kind: 'none' };
  }

  latencyMs(action: string): number {
    return (this.spec.latencyMs ?? 0) + (this.spec.actionLatencyMs?.[action] ?? 0);
  }

  detachSticks(): boolean {
    return this.random() < (this.spec.stuckDetachRate ?? 0);
  }

  attachFails(): boolean {
    return this.random() < (this.spec.attachFailRate ?? 0);
  }
}
