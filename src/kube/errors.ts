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

/**
 * What an API error says, for a log line: `403 Forbidden: enipools.eniipam.io "n1" is
 * forbidden: User "..." cannot patch resource "enipools/status" ...` from the Status the API
 * server sent, rather than client-node's message (the code, "Unknown API Status Code!" and the
 * body as escaped JSON). Other errors keep their message.
 */
export function apiErrorMessage(e: unknown): string {
  const err = e as { code?: unknown; body?: unknown; message?: string };
  if (typeof err?.code === 'number' && err.body !== undefined) {
    let status: { message?: string; reason?: string } | undefined;
    try {
      status = typeof err.body === 'string' ? JSON.parse(err.body) : (err.body as typeof status);
    } catch {
      status = undefined;
    }
    if (status?.message) return `${err.code}${status.reason ? ` ${status.reason}` : ''}: ${status.message}`;
    return `HTTP ${err.code}`;
  }
  return String(err?.message ?? e);
}
