import type { ResourceType } from './types.js';

export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

/** A failed request, answered with a metav1 Status object. */
export class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: {
      name?: string;
      group?: string;
      kind?: string;
      causes?: StatusCause[];
      retryAfterSeconds?: number;
    },
  ) {
    super(message);
  }

  toStatus() {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      details: this.details,
      code: this.code,
    };
  }
}

const qualified = (t: ResourceType): string => (t.group ? `${t.resource}.${t.group}` : t.resource);

export const notFound = (t: ResourceType, name: string) =>
  new StatusError(404, 'NotFound', `${qualified(t)} "${name}" not found`, { name, group: t.group, kind: t.resource });

export const alreadyExists = (t: ResourceType, name: string) =>
  new StatusError(409, 'AlreadyExists', `${qualified(t)} "${name}" already exists`, {
    name,
    group: t.group,
    kind: t.resource,
  });

export const conflict = (t: ResourceType, name: string) =>
  new StatusError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualified(t)} "${name}": the object has been modified; ` +
      'please apply your changes to the latest version and try again',
    { name, group: t.group, kind: t.resource },
  );

/** 422 Invalid with per-field causes, worded like the API server's field errors. */
export function invalid(t: ResourceType, name: string, causes: StatusCause[]): StatusError {
  const kind = t.group ? `${t.kind}.${t.group}` : t.kind;
  const text = causes.map((c) => c.message);
  const list = text.length === 1 ? text[0] : `[${text.join(', ')}]`;
  // Each cause's own message leaves out its field, as the API server's do; the summary keeps it.
  const bare = causes.map((c) => ({
    ...c,
    message: c.field && c.message.startsWith(`${c.field}: `) ? c.message.slice(c.field.length + 2) : c.message,
  }));
  return new StatusError(422, 'Invalid', `${kind} "${name}" is invalid: ${list}`, {
    name,
    group: t.group,
    kind: t.kind,
    causes: bare,
  });
}

export const badRequest = (message: string) => new StatusError(400, 'BadRequest', message);
export const methodNotAllowed = (message: string) => new StatusError(405, 'MethodNotAllowed', message);
export const unsupportedMediaType = (type: string) =>
  new StatusError(
    415,
    'UnsupportedMediaType',
    'the body of the request was in an unknown format - accepted media types include: ' +
      `application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got ${type})`,
  );
export const gone = (message: string) => new StatusError(410, 'Expired', message);
