import { existsSync, readFileSync } from 'node:fs';

/**
 * kube-apiserver's audit log, read back: one entry per resource request at the Metadata level,
 * with who asked, the RBAC attributes it was authorized on, and the answer's code. What a test
 * needs to derive the permissions a program really uses from a run of it.
 */
export interface AuditEntry {
  /** Milliseconds since the epoch, when the request came. */
  time: number;
  user: string;
  groups: string[];
  verb: string;
  apiGroup: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  code: number;
}

export interface AuditFilter {
  user?: string;
  /** Entries of requests received at or after this time (ms). */
  since?: number;
}

/** Every request at Metadata, once it is answered (a watch: once it starts). */
export const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`;

interface Event {
  auditID: string;
  stage: string;
  verb: string;
  user?: { username?: string; groups?: string[] };
  impersonatedUser?: { username?: string; groups?: string[] };
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string; apiGroup?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
}

/** The log's entries, oldest first; a request logged at two stages (a watch) counts once. */
export function readAudit(path: string, f: AuditFilter = {}): AuditEntry[] {
  if (!existsSync(path)) return [];
  const byId = new Map<string, AuditEntry>();
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line) continue;
    let e: Event;
    try {
      e = JSON.parse(line) as Event;
    } catch {
      continue; // a line being written
    }
    if (!e.objectRef?.resource) continue;
    const who = e.impersonatedUser ?? e.user ?? {};
    byId.set(e.auditID, {
      time: Date.parse(e.requestReceivedTimestamp),
      user: who.username ?? '',
      groups: who.groups ?? [],
      verb: e.verb,
      apiGroup: e.objectRef.apiGroup ?? '',
      resource: e.objectRef.resource,
      subresource: e.objectRef.subresource,
      namespace: e.objectRef.namespace,
      name: e.objectRef.name,
      code: e.responseStatus?.code ?? 0,
    });
  }
  return [...byId.values()].filter(
    (e) => (!f.user || e.user === f.user) && (f.since === undefined || e.time >= f.since),
  );
}
