import { isDeepStrictEqual } from 'node:util';

/** A value as JSON carries it: undefined fields gone (a dropped field and an absent one are the same). */
const asJson = (v: unknown): unknown => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

/**
 * Whether two values say the same as JSON, whatever the order of their keys: the API server keeps
 * a custom resource as unstructured JSON and answers it with its keys sorted, so comparing JSON
 * texts would take every object read back for a change and write it again on every reconcile.
 */
export const sameJson = (a: unknown, b: unknown): boolean => isDeepStrictEqual(asJson(a), asJson(b));
