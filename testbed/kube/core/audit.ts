import type { ServerResponse } from 'node:http';
import type { Attributes } from '../auth/rbac.js';
import type { Identity } from '../auth/tokens.js';

import type { AuditEntry, AuditFilter } from '../../control-plane/audit.js';

export type { AuditEntry, AuditFilter } from '../../control-plane/audit.js';

/** Who asked what, as an entry records it (the answer's code apart). */
function requestOf(user: Identity, a: Extract<Attributes, { resourceRequest: true }>): Omit<AuditEntry, 'code'> {
  return {
    time: Date.now(),
    user: user.name,
    groups: user.groups,
    verb: a.verb,
    apiGroup: a.apiGroup,
    resource: a.resource,
    subresource: a.subresource,
    namespace: a.namespace,
    name: a.name,
  };
}

/** The newest entries, at most `limit` (the oldest are dropped, as a rotated audit log does). */
export class AuditLog {
  private readonly entries: AuditEntry[] = [];

  constructor(private readonly limit = 200_000) {}

  /**
   * Records the request as it comes; its code is the answer's status, known once the headers are
   * sent (a watch's at once, though it stays open).
   */
  record(res: ServerResponse, user: Identity, a: Attributes): void {
    if (!a.resourceRequest) return;
    const entry = Object.defineProperty(requestOf(user, a), 'code', {
      get: () => (res.headersSent ? res.statusCode : 0),
      enumerable: true,
      configurable: true,
    }) as AuditEntry;
    // Once answered, the entry keeps only the code (the getter, and the response with it, go).
    res.once('close', () =>
      Object.defineProperty(entry, 'code', { value: res.headersSent ? res.statusCode : 0, enumerable: true }),
    );
    this.push(entry);
  }

  /** Records a request answered outside an HTTP response (an upgrade: 101 once it is taken). */
  recordCode(user: Identity, a: Attributes, code: number): void {
    if (!a.resourceRequest) return;
    this.push({ ...requestOf(user, a), code });
  }

  private push(entry: AuditEntry): void {
    this.entries.push(entry);
    if (this.entries.length > this.limit) this.entries.splice(0, this.entries.length - this.limit);
  }

  list(f: AuditFilter = {}): AuditEntry[] {
    return this.entries
      .filter((e) => (!f.user || e.user === f.user) && (f.since === undefined || e.time >= f.since))
      .map((e) => ({ ...e, code: e.code }));
  }
}
