import type { V1Taint } from '@kubernetes/client-node';

/** A taint as `key[=value]:effect`, the form kubelet's --register-with-taints and kubectl take. */
export interface TaintSpec {
  key: string;
  value?: string;
  effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
}

const EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
// A qualified name (an optional DNS prefix and a name of at most 63 characters), as the API server checks.
const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** Parses `key[=value]:effect`; throws a message saying what is wrong and what is expected. */
export function parseTaint(text: string): TaintSpec {
  const colon = text.lastIndexOf(':');
  const effect = colon < 0 ? '' : text.slice(colon + 1);
  const [key = '', value] = (colon < 0 ? text : text.slice(0, colon)).split(/=(.*)/s, 2);
  if (!EFFECTS.includes(effect as TaintSpec['effect']))
    throw new Error(`taint "${text}": the effect must be one of ${EFFECTS.join(', ')} (key[=value]:effect)`);
  if (!KEY.test(key)) throw new Error(`taint "${text}": "${key}" is not a valid taint key (key[=value]:effect)`);
  if (value !== undefined && !VALUE.test(value))
    throw new Error(`taint "${text}": "${value}" is not a valid taint value (key[=value]:effect)`);
  return { key, ...(value ? { value } : {}), effect: effect as TaintSpec['effect'] };
}

/** The spec as kubectl prints it. */
export const formatTaint = (t: TaintSpec): string => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`;

/** Whether a node's taint is this one (a taint is known by its key and effect, as the API server does). */
export const isTaint = (t: TaintSpec) => (taint: V1Taint) => taint.key === t.key && taint.effect === t.effect;
