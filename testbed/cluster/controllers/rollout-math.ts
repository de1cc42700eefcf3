/* eslint-disable @typescript-eslint/no-explicit-any */
import { createHash } from 'node:crypto';

/** An IntOrString (`2`, `"25%"`) against a total, as Kubernetes scales maxSurge and maxUnavailable. */
export function scaled(
  v: number | string | undefined,
  total: number,
  roundUp: boolean,
  fallback: number | string,
): number {
  const x = v ?? fallback;
  if (typeof x === 'number') return x;
  const m = /^(\d+)%$/.exec(x);
  if (!m) {
    if (/^\d+$/.test(x)) return Number(x);
    throw new Error(`invalid value "${x}": an integer or a percentage such as "25%"`);
  }
  const f = (Number(m[1]) * total) / 100;
  return roundUp ? Math.ceil(f) : Math.floor(f);
}

/** The maxSurge and maxUnavailable of a Deployment's rolling update (both 0 would stall: maxUnavailable becomes 1). */
export function deploymentLimits(d: any): { surge: number; unavailable: number } {
  const replicas = d.spec?.replicas ?? 1;
  const ru = d.spec?.strategy?.rollingUpdate ?? {};
  const surge = scaled(ru.maxSurge, replicas, true, '25%');
  let unavailable = scaled(ru.maxUnavailable, replicas, false, '25%');
  if (surge === 0 && unavailable === 0) unavailable = 1;
  return { surge, unavailable: Math.min(unavailable, replicas) };
}

/** The pod-template-hash of a template: a short stable hash, in the alphabet Kubernetes uses for names. */
export function templateHash(template: unknown, collisionCount = 0): string {
  const h = createHash('sha256').update(JSON.stringify(template)).update(String(collisionCount)).digest();
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  let out = '';
  for (let i = 0; i < 10; i++) out += alphabet[h[i]! % alphabet.length];
  return out;
}

/** A random suffix for generated pod names (five characters, as the API server's generateName). */
export function nameSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  let out = '';
  for (let i = 0; i < 5; i++) out += alphabet[Math.floor(Math.random() * alphabet.length)];
  return out;
}

/** A template without the label the controller adds, for comparing a ReplicaSet's template with its Deployment's. */
export function withoutHash(template: any): any {
  const t = structuredClone(template ?? {});
  if (t.metadata?.labels) {
    delete t.metadata.labels['pod-template-hash'];
    if (!Object.keys(t.metadata.labels).length) delete t.metadata.labels;
  }
  return t;
}

export const sameTemplate = (a: any, b: any): boolean => canonical(withoutHash(a)) === canonical(withoutHash(b));

/** JSON with sorted keys, so that key order never makes two equal templates differ. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .filter((k) => (v as any)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as any)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}
