import { badRequest } from './errors.js';
import type { KubeObject, ResourceType } from './types.js';

type Requirement = { key: string; op: 'in' | 'notin'; values: string[] } | { key: string; op: 'exists' | '!exists' };

/** A parsed label selector: every requirement must hold. */
export type LabelSelector = Requirement[];

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;
const VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Splits on commas that are not inside parentheses. */
function splitTop(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of s) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out;
}

/** Parses the full label selector grammar: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`. */
export function parseLabelSelector(text: string | undefined): LabelSelector {
  if (!text || !text.trim()) return [];
  const fail = (why: string) => badRequest(`unable to parse requirement: ${why}`);
  return splitTop(text).map((raw) => {
    const part = raw.trim();
    let m: RegExpExecArray | null;
    const check = (key: string, values: string[] = []) => {
      if (!KEY.test(key)) throw fail(`invalid label key "${key}"`);
      for (const v of values) if (!VALUE.test(v) || v.length > 63) throw fail(`invalid label value: "${v}"`);
    };
    if ((m = /^(\S+?)\s+(in|notin)\s*\((.*)\)$/.exec(part))) {
      const values = m[3]!.split(',').map((v) => v.trim());
      check(m[1]!, values);
      return { key: m[1]!, op: m[2] as 'in' | 'notin', values };
    }
    if ((m = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part))) {
      check(m[1]!, [m[3]!]);
      return { key: m[1]!, op: m[2] === '!=' ? 'notin' : 'in', values: [m[3]!] };
    }
    if ((m = /^!\s*(\S+)$/.exec(part))) {
      check(m[1]!);
      return { key: m[1]!, op: '!exists' };
    }
    if (/^\S+$/.test(part)) {
      check(part);
      return { key: part, op: 'exists' };
    }
    throw fail(`"${part}"`);
  });
}

export function matchesLabels(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  return sel.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(l, r.key);
    switch (r.op) {
      case 'exists':
        return has;
      case '!exists':
        return !has;
      case 'in':
        return has && r.values.includes(l[r.key]!);
      case 'notin':
        return !has || !r.values.includes(l[r.key]!);
    }
  });
}

export type FieldSelector = Array<{
  field: string;
  value: string;
  negate: boolean;
  get: (o: KubeObject) => string | undefined;
}>;

const baseFields: Record<string, (o: KubeObject) => string | undefined> = {
  'metadata.name': (o) => o.metadata.name,
  'metadata.namespace': (o) => o.metadata.namespace ?? '',
};

/** Parses `f=v`, `f==v`, `f!=v`, comma-separated; a field the kind does not support is a 400. */
export function parseFieldSelector(text: string | undefined, t: ResourceType): FieldSelector {
  if (!text || !text.trim()) return [];
  return text.split(',').map((raw) => {
    const m = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(raw);
    if (!m) throw badRequest(`invalid field selector: "${raw}"`);
    const get = baseFields[m[1]!] ?? t.fieldSelectors[m[1]!];
    if (!get) throw badRequest(`field label not supported: ${m[1]}`);
    return { field: m[1]!, value: m[3]!, negate: m[2] === '!=', get };
  });
}

export function matchesFields(sel: FieldSelector, o: KubeObject): boolean {
  return sel.every((r) => ((r.get(o) ?? '') === r.value) !== r.negate);
}
