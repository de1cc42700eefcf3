import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { StatusError } from '../core/errors.js';
import { authorize, forbidden, type Attributes } from './rbac.js';
import type { Store } from '../core/store.js';
import type { Identity, ServiceAccountTokens } from './tokens.js';

/** The admin's identity: cluster-admin through `system:masters`, as kubeadm's admin.conf. */
export const ADMIN: Identity = { name: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] };
export const ANONYMOUS: Identity = { name: 'system:anonymous', groups: ['system:unauthenticated'] };

export interface Authentication {
  /** The admin kubeconfig's bearer token. */
  adminToken: string;
  tokens: ServiceAccountTokens;
}

/**
 * Who sent a request: a client certificate signed by the cluster CA (CN is the user, O the
 * groups), else a bearer token (the admin's, or a service-account JWT), else anonymous.
 * Undefined means the credentials were presented but are not valid: 401.
 */
export function authenticate(req: IncomingMessage, auth: Authentication): Identity | undefined {
  // A client certificate signed by the cluster CA wins, as kube-apiserver tries x509 first.
  const socket = req.socket as TLSSocket;
  if (socket.encrypted && socket.authorized) {
    const subject = socket.getPeerCertificate().subject;
    const list = (v: string | string[] | undefined) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
    const [name] = list(subject?.CN);
    if (name) return { name, groups: [...list(subject.O), 'system:authenticated'] };
  }
  const header = String(req.headers.authorization ?? '');
  if (!header) return ANONYMOUS;
  const m = /^Bearer\s+(\S+)$/i.exec(header);
  if (!m) return undefined;
  if (m[1] === auth.adminToken) return ADMIN;
  return auth.tokens.verify(m[1]!);
}

/**
 * `Impersonate-User` / `Impersonate-Group` (kubectl --as / --as-group): the identity to act as, and
 * the RBAC checks (`impersonate` on users, groups or serviceaccounts) the caller must pass first.
 */
export function impersonation(req: IncomingMessage): { identity: Identity; checks: Attributes[] } | undefined {
  const name = req.headers['impersonate-user'];
  if (typeof name !== 'string' || !name) return undefined;
  const raw = req.headers['impersonate-group'];
  const groups =
    raw === undefined ? [] : (Array.isArray(raw) ? raw : [raw]).flatMap((g) => g.split(',').map((x) => x.trim()));
  const sa = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(name);
  const checks: Attributes[] = [
    sa
      ? {
          resourceRequest: true,
          verb: 'impersonate',
          apiGroup: '',
          resource: 'serviceaccounts',
          name: sa[2],
          namespace: sa[1],
        }
      : { resourceRequest: true, verb: 'impersonate', apiGroup: '', resource: 'users', name },
    ...groups.map((g): Attributes => ({
      resourceRequest: true,
      verb: 'impersonate',
      apiGroup: '',
      resource: 'groups',
      name: g,
    })),
  ];
  const implied = sa ? ['system:serviceaccounts', `system:serviceaccounts:${sa[1]}`] : [];
  return { identity: { name, groups: [...new Set([...groups, ...implied, 'system:authenticated'])] }, checks };
}

/**
 * Who a request acts as: its authenticated caller (401 for bad credentials), or whom it
 * impersonates, once the caller may (403 otherwise). Without `auth` everyone is the admin.
 */
export function requestUser(auth: Authentication | undefined, store: Store, req: IncomingMessage): Identity {
  if (!auth) return ADMIN;
  const caller = authenticate(req, auth);
  if (!caller) throw new StatusError(401, 'Unauthorized', 'Unauthorized');
  const acting = impersonation(req);
  for (const a of acting?.checks ?? []) if (!authorize(store, caller, a)) throw forbidden(caller, a);
  return acting?.identity ?? caller;
}
