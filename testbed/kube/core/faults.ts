import type { ServerResponse } from 'node:http';
import { Ajv } from 'ajv';
import { StatusError } from './errors.js';
import { describeSchemaError } from '../../harness/schema-errors.js';

export const KUBE_VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'] as const;
export type KubeVerb = (typeof KUBE_VERBS)[number];

/**
 * One fault rule of the Kubernetes emulator. A rule matches a request by verb, resource
 * (`nodes`, `enipools`, `enipools/status`, `leases`; `enipools.eni-ipam.io` works too; as in
 * RBAC, `enipools` does not cover `enipools/status`) and path prefix, each optional; the first
 * matching rule that is still active acts.
 */
export interface KubeFaultRule {
  verbs?: KubeVerb[];
  resource?: string;
  pathPrefix?: string;
  /**
   * respond: answer with `code` (a Status as the API server words it; 429 with Retry-After;
   * 410 on a WATCH is an in-stream ERROR event); delay: wait `ms`, then serve; hang: accept and
   * never answer (the connection is reset when the rule ends or the emulator closes);
   * close-watches: end every matching open watch each `everySeconds` (clients resume).
   */
  action: 'respond' | 'delay' | 'hang' | 'close-watches';
  code?: 403 | 404 | 409 | 410 | 429 | 500 | 503 | 504;
  retryAfterSeconds?: number;
  /** The user named in a 403 (default: the operator's service account, as the chart names it). */
  user?: string;
  ms?: number;
  everySeconds?: number;
  /** Share of matching requests hit, 0 to 1 (default 1). */
  rate?: number;
  /** Act on at most this many requests, then stop. */
  times?: number;
  /** Active for this long after it is set, then gone. */
  durationMs?: number;
}

export interface KubeFaultRuleState extends KubeFaultRule {
  hits: number;
  active: boolean;
}

/** What the server knows about a request when it asks the rules. */
export interface KubeRequestInfo {
  verb: KubeVerb;
  resource: string;
  group: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  path: string;
  currentRv: number;
}

const ruleSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['action'],
  properties: {
    verbs: { type: 'array', minItems: 1, items: { enum: [...KUBE_VERBS] } },
    resource: { type: 'string', minLength: 1 },
    pathPrefix: { type: 'string', pattern: '^/' },
    action: { enum: ['respond', 'delay', 'hang', 'close-watches'] },
    code: { enum: [403, 404, 409, 410, 429, 500, 503, 504] },
    retryAfterSeconds: { type: 'integer', minimum: 0 },
    user: { type: 'string', minLength: 1 },
    ms: { type: 'number', minimum: 0 },
    everySeconds: { type: 'number', exclusiveMinimum: 0 },
    rate: { type: 'number', minimum: 0, maximum: 1 },
    times: { type: 'integer', minimum: 1 },
    durationMs: { type: 'number', exclusiveMinimum: 0 },
  },
} as const;

const specSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    rules: { type: 'array', items: ruleSchema },
    unreachableMs: { type: 'number', exclusiveMinimum: 0 },
  },
} as const;

export interface KubeFaultSpec {
  rules?: KubeFaultRule[];
  /** Refuse connections for this long (the listener closes and reopens on the same port). */
  unreachableMs?: number;
}

const validate = new Ajv({ strict: true }).compile(specSchema);

/** Validates a fault spec (from PUT /_emulator/faults or a test); the message names the field. */
export function parseKubeFaultSpec(data: unknown): KubeFaultSpec {
  if (!validate(data)) throw new Error(`faults.${describeSchemaError(validate.errors![0]!)}`);
  const spec = data as KubeFaultSpec;
  spec.rules?.forEach((r, i) => {
    const need = (field: keyof KubeFaultRule) => {
      if (r[field] === undefined) throw new Error(`faults.rules[${i}].${field}: a "${r.action}" rule needs ${field}`);
    };
    if (r.action === 'respond') need('code');
    if (r.action === 'delay') need('ms');
    if (r.action === 'close-watches') need('everySeconds');
    if (r.action === 'close-watches' && r.verbs && !r.verbs.includes('watch'))
      throw new Error(
        `faults.rules[${i}].verbs: a "close-watches" rule acts on watches; include "watch" or leave verbs out`,
      );
  });
  return spec;
}

interface Entry {
  rule: KubeFaultRule;
  hits: number;
  until: number;
  timers: NodeJS.Timeout[];
  held: Set<ServerResponse>;
}

interface OpenWatchInfo {
  res: ServerResponse;
  info: KubeRequestInfo;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const qualified = (resource: string, group: string) => (group ? `${resource}.${group}` : resource);

function matches(rule: KubeFaultRule, r: KubeRequestInfo): boolean {
  if (rule.verbs && !rule.verbs.includes(r.verb)) return false;
  if (rule.pathPrefix && !r.path.startsWith(rule.pathPrefix)) return false;
  if (rule.resource) {
    const sub = r.subresource ? `/${r.subresource}` : '';
    if (rule.resource !== `${r.resource}${sub}` && rule.resource !== `${qualified(r.resource, r.group)}${sub}`)
      return false;
  }
  return true;
}

/** The Status the API server sends for each code, worded as it words them. */
function statusFor(rule: KubeFaultRule, r: KubeRequestInfo): StatusError {
  const what = qualified(r.resource, r.group);
  const sub = r.subresource ? `/${r.subresource}` : '';
  const details = { name: r.name, group: r.group, kind: r.resource };
  switch (rule.code!) {
    case 403: {
      const user = rule.user ?? 'system:serviceaccount:kube-system:eni-ipam-operator';
      const scope = r.namespace ? `in the namespace "${r.namespace}"` : 'at the cluster scope';
      const subject = r.name ? `${what} "${r.name}"` : what;
      return new StatusError(
        403,
        'Forbidden',
        `${subject} is forbidden: User "${user}" cannot ${r.verb} ` +
          `resource "${r.resource}${sub}" in API group "${r.group}" ${scope}`,
        details,
      );
    }
    case 404:
      return new StatusError(
        404,
        'NotFound',
        r.name ? `${what} "${r.name}" not found` : 'the server could not find the requested resource',
        details,
      );
    case 409:
      return new StatusError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${what} "${r.name ?? ''}": the object has been modified; ` +
          'please apply your changes to the latest version and try again',
        details,
      );
    case 410:
      return new StatusError(410, 'Expired', `too old resource version: 1 (${r.currentRv})`);
    case 429:
      return new StatusError(
        429,
        'TooManyRequests',
        'The server has received too many requests and has asked us to try again later',
        { retryAfterSeconds: rule.retryAfterSeconds ?? 1 },
      );
    case 500:
      return new StatusError(500, 'InternalError', 'Internal error occurred: injected fault');
    case 503:
      return new StatusError(503, 'ServiceUnavailable', 'The server is currently unable to handle the request');
    case 504:
      return new StatusError(
        504,
        'Timeout',
        `The ${r.verb} operation against ${what} could not be completed at this time, please try again.`,
      );
  }
}

/**
 * The emulator's fault rules: asked once per resource request (apply), they answer it, hold it,
 * delay it or let it through; they also keep the open watches to close them on a schedule.
 */
export class KubeFaultRules {
  private entries: Entry[] = [];
  private readonly watches = new Set<OpenWatchInfo>();

  set(rules: KubeFaultRule[]): void {
    this.clear();
    const now = Date.now();
    this.entries = parseKubeFaultSpec({ rules }).rules!.map((rule) => ({
      rule: { ...rule },
      hits: 0,
      until: rule.durationMs ? now + rule.durationMs : Infinity,
      timers: [],
      held: new Set(),
    }));
    for (const e of this.entries) {
      if (e.rule.durationMs) e.timers.push(setTimeout(() => this.end(e), e.rule.durationMs).unref());
      if (e.rule.action === 'close-watches') {
        e.timers.push(
          setInterval(() => {
            if (!this.live(e)) return;
            for (const w of [...this.watches]) {
              if (!matches(e.rule, w.info) || !this.take(e)) continue;
              this.watches.delete(w);
              w.res.end();
            }
          }, e.rule.everySeconds! * 1000).unref(),
        );
      }
    }
  }

  clear(): void {
    for (const e of this.entries) this.end(e);
    this.entries = [];
  }

  list(): KubeFaultRuleState[] {
    return this.entries.map((e) => ({ ...e.rule, hits: e.hits, active: this.live(e) }));
  }

  /** Answers `true` when the rules answered (or hold) the request; throws a StatusError to fail it. */
  async apply(res: ServerResponse, r: KubeRequestInfo): Promise<boolean> {
    for (const e of this.entries) {
      if (e.rule.action === 'close-watches' || !this.live(e) || !matches(e.rule, r)) continue;
      if (e.rule.rate !== undefined && Math.random() >= e.rule.rate) continue;
      if (!this.take(e)) continue;
      if (e.rule.action === 'delay') {
        await sleep(e.rule.ms!);
        break;
      }
      if (e.rule.action === 'hang') {
        e.held.add(res);
        res.on('close', () => e.held.delete(res));
        return true;
      }
      const err = statusFor(e.rule, r);
      if (r.verb === 'watch' && err.code === 410) {
        // A watch learns of an expired resourceVersion from an ERROR event in its stream.
        res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: err.toStatus() })}\n`);
        return true;
      }
      throw err;
    }
    if (r.verb === 'watch') {
      const w = { res, info: r };
      this.watches.add(w);
      res.on('close', () => this.watches.delete(w));
    }
    return false;
  }

  private live(e: Entry): boolean {
    return Date.now() < e.until && (e.rule.times === undefined || e.hits < e.rule.times);
  }

  private take(e: Entry): boolean {
    if (!this.live(e)) return false;
    e.hits++;
    return true;
  }

  private end(e: Entry): void {
    e.until = Math.min(e.until, Date.now());
    e.timers.forEach(clearTimeout);
    e.timers = [];
    for (const res of e.held) res.socket?.destroy();
    e.held.clear();
  }
}

/** The request as the rules see it, from the server's own routing (HTTP verbs mapped to API verbs). */
export function faultInfo(
  verb: string,
  r: { t: { resource: string; group: string }; namespace?: string; name?: string; subresource?: string },
  path: string,
  currentRv: number,
): KubeRequestInfo {
  const apiVerb = (verb === 'post' ? 'create' : verb === 'put' ? 'update' : verb) as KubeVerb;
  return {
    verb: apiVerb,
    resource: r.t.resource,
    group: r.t.group,
    subresource: r.subresource,
    namespace: r.namespace,
    name: r.name,
    path,
    currentRv,
  };
}
