import { Ajv } from 'ajv';
import { describeSchemaError } from '../schema-errors.js';

export interface FaultRule {
  /** The action it applies to; every action when absent. */
  action?: string;
  /**
   * error: answer with `code`; timeout: never answer; non-json: a 502 HTML page as a proxy
   * sends; drop-answer: carry the call out, then close the connection without answering.
   */
  kind: 'error' | 'timeout' | 'non-json' | 'drop-answer';
  code?: string;
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
          kind: { enum: ['error', 'timeout', 'non-json', 'drop-answer'] },
          code: { type: 'string', minLength: 1 },
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
    if (r.kind === 'error' && !r.code) throw new Error(`faults.rules[${i}].code: an error rule needs a code`);
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
  | { kind: 'drop-answer' };

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

  decide(action: string): FaultDecision {
    for (const rule of this.spec.rules ?? []) {
      if (rule.action && rule.action !== action) continue;
      const hits = this.hits.get(rule) ?? 0;
      if (rule.times !== undefined && hits >= rule.times) continue;
      if (this.random() >= rule.rate) continue;
      this.hits.set(rule, hits + 1);
      if (rule.kind === 'error') return { kind: 'error', code: rule.code! };
      return { kind: rule.kind };
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
