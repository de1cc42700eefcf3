/** The HTTP status of a failed Kubernetes API call (client-node's ApiException carries it as `code`). */
export const httpStatus = (e: unknown): number | undefined => (e as { code?: number } | undefined)?.code;

/** The object is not there (404): what a delete or a get of something gone answers. */
export const isNotFound = (e: unknown): boolean => httpStatus(e) === 404;

/** The write lost a race (409): the object changed since it was read, or already exists. */
export const isConflict = (e: unknown): boolean => httpStatus(e) === 409;

/** Resolves undefined when the call answered 404, and rethrows anything else. */
export async function ignoreNotFound<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}
