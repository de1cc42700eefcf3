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
