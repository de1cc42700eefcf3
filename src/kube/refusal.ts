import { apiErrorMessage, httpStatus } from './errors.js';

/**
 * Why the API server did not take a call, as a metric label: a small fixed set, never an object
 * name. `unreachable` is a call with no HTTP answer (refused connection, reset, timeout).
 */
export type RefusalReason =
  | 'unauthorized'
  | 'forbidden'
  | 'not-found'
  | 'conflict'
  | 'invalid'
  | 'throttled'
  | 'unavailable'
  | 'rejected'
  | 'unreachable';

export interface Refusal {
  reason: RefusalReason;
  /** The HTTP status, when there was an answer. */
  code?: number;
  /** What the server asked for (`Retry-After`, or the Status's `details.retryAfterSeconds`), in ms. */
  retryAfterMs?: number;
  /** One line for logs and Events: the server's own words when it sent a Status. */
  message: string;
}

/** Retry-After hints above this are taken as this: a server cannot park a writer for hours. */
const MAX_HINT_MS = 10 * 60_000;

function reasonOf(code: number | undefined): RefusalReason {
  if (code === undefined) return 'unreachable';
  if (code === 401) return 'unauthorized';
  if (code === 403) return 'forbidden';
  if (code === 404) return 'not-found';
  if (code === 409) return 'conflict';
  if (code === 400 || code === 413 || code === 422) return 'invalid';
  if (code === 429) return 'throttled';
  if (code >= 500) return 'unavailable';
  return 'rejected';
}

/** A header of client-node's ApiException, whatever its case. */
function header(e: unknown, name: string): string | undefined {
  const headers = (e as { headers?: Record<string, unknown> } | undefined)?.headers;
  if (!headers || typeof headers !== 'object') return undefined;
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : headers[key];
  return typeof v === 'string' ? v : undefined;
}

/** `Retry-After` as seconds or an HTTP date, else the Status body's `details.retryAfterSeconds`. */
function retryAfterMs(e: unknown, now: number): number | undefined {
  const h = header(e, 'retry-after')?.trim();
  let ms: number | undefined;
  if (h && /^\d+$/.test(h)) ms = Number(h) * 1000;
  else if (h && !Number.isNaN(Date.parse(h))) ms = Math.max(0, Date.parse(h) - now);
  if (ms === undefined) {
    let body = (e as { body?: unknown }).body;
    try {
      if (typeof body === 'string') body = JSON.parse(body);
    } catch {
      body = undefined;
    }
    const s = (body as { details?: { retryAfterSeconds?: unknown } } | undefined)?.details?.retryAfterSeconds;
    if (typeof s === 'number' && s >= 0) ms = s * 1000;
  }
  return ms === undefined ? undefined : Math.min(ms, MAX_HINT_MS);
}

/**
 * What a failed Kubernetes API call says about retrying it. The server's hint counts for 429 and
 * 5xx answers, as client-go takes it.
 */
export function refusalOf(e: unknown, now: number): Refusal {
  // A system error (ECONNREFUSED, ...) has a string code: no HTTP answer at all.
  const status = httpStatus(e);
  const code = typeof status === 'number' ? status : undefined;
  const reason = reasonOf(code);
  const hinted = code === 429 || (code !== undefined && code >= 500);
  const after = hinted ? retryAfterMs(e, now) : undefined;
  return {
    reason,
    ...(code === undefined ? {} : { code }),
    ...(after === undefined ? {} : { retryAfterMs: after }),
    message: apiErrorMessage(e),
  };
}
