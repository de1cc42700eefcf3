import type { Condition } from '../api/types.js';

/** A condition as planned: its lastTransitionTime is set when it is written. */
export type PlannedCondition = Omit<Condition, 'lastTransitionTime'>;

/** Sets a condition, keeping its lastTransitionTime unless its status changes. */
export function setCondition(list: Condition[], c: PlannedCondition, now: string): Condition[] {
  const old = list.find((x) => x.type === c.type);
  const next: Condition = { ...c, lastTransitionTime: old && old.status === c.status ? old.lastTransitionTime : now };
  return [...list.filter((x) => x.type !== c.type), next].sort((a, b) => (a.type < b.type ? -1 : 1));
}

/** A time as conditions carry it: RFC 3339, to the second. */
export const conditionTime = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
