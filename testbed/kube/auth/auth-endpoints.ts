/* eslint-disable @typescript-eslint/no-explicit-any -- request bodies are free-form JSON */
import { StatusError, badRequest, methodNotAllowed } from '../core/errors.js';
import type { Result } from '../core/handlers.js';
import { authorize, rulesFor, type Attributes } from './rbac.js';
import type { Store } from '../core/store.js';
import { TOKEN_ISSUER, TokenRequestError, type Identity, type ServiceAccountTokens } from './tokens.js';

/** The review and token resources in discovery, as the API server lists them (create only). */
export const AUTH_RESOURCES: Array<{
  group: string;
  version: string;
  name: string;
  kind: string;
  namespaced: boolean;
  subresourceOf?: { group: string; kind: string };
}> = [
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    name: 'selfsubjectaccessreviews',
    kind: 'SelfSubjectAccessReview',
    namespaced: false,
  },
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    name: 'selfsubjectrulesreviews',
    kind: 'SelfSubjectRulesReview',
    namespaced: false,
  },
  {
    group: 'authentication.k8s.io',
    version: 'v1',
    name: 'selfsubjectreviews',
    kind: 'SelfSubjectReview',
    namespaced: false,
  },
  {
    group: '',
    version: 'v1',
    name: 'serviceaccounts/token',
    kind: 'TokenRequest',
    namespaced: true,
    subresourceOf: { group: 'authentication.k8s.io', kind: 'TokenRequest' },
  },
];

export interface AuthEndpointContext {
  store: Store;
  tokens: ServiceAccountTokens;
  user: Identity;
  /** Throws 403 unless the user may do this (a no-op when authorization is off). */
  allow(a: Attributes): void;
}

const parse = (body: string | undefined): any => {
  try {
    return body ? JSON.parse(body) : {};
  } catch (e) {
    throw badRequest(`the body of the request is not valid JSON: ${(e as Error).message}`);
  }
};

/** `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token` (kubectl create token, kubelet's projected tokens). */
function tokenRequest(ctx: AuthEndpointContext, namespace: string, name: string, read: () => any): Result {
  ctx.allow({
    resourceRequest: true,
    verb: 'create',
    apiGroup: '',
    resource: 'serviceaccounts',
    subresource: 'token',
    name,
    namespace,
  });
  const body = read();
  const spec = body?.spec ?? {};
  const ref = spec.boundObjectRef;
  if (ref && ref.kind !== 'Pod' && ref.kind !== 'Secret') {
    throw new StatusError(
      422,
      'Invalid',
      `TokenRequest.authentication.k8s.io "${name}" is invalid: ` +
        `spec.boundObjectRef.kind: Unsupported value: "${ref.kind}": supported values: "Pod", "Secret"`,
    );
  }
  try {
    const issued = ctx.tokens.issue({
      namespace,
      serviceAccount: name,
      audiences: spec.audiences,
      expirationSeconds: spec.expirationSeconds,
      boundObject: ref ? { kind: ref.kind, name: ref.name, uid: ref.uid } : undefined,
    });
    return {
      status: 201,
      body: {
        kind: 'TokenRequest',
        apiVersion: 'authentication.k8s.io/v1',
        metadata: { name, namespace, creationTimestamp: null },
        spec: {
          audiences: issued.audiences,
          expirationSeconds: spec.expirationSeconds ?? 3600,
          boundObjectRef: ref ?? null,
        },
        status: { token: issued.token, expirationTimestamp: issued.expirationTimestamp },
      },
    };
  } catch (e) {
    if (!(e instanceof TokenRequestError)) throw e;
    throw e.code === 404
      ? new StatusError(404, 'NotFound', e.message, { name, kind: 'serviceaccounts' })
      : new StatusError(400, 'BadRequest', e.message);
  }
}

/** `kubectl auth can-i`: the caller's own access, decided by RBAC as for a real request. */
function selfSubjectAccessReview(ctx: AuthEndpointContext, read: () => any): Result {
  ctx.allow({
    resourceRequest: true,
    verb: 'create',
    apiGroup: 'authorization.k8s.io',
    resource: 'selfsubjectaccessreviews',
  });
  const body = read();
  const spec = body?.spec ?? {};
  const r = spec.resourceAttributes;
  const n = spec.nonResourceAttributes;
  if (!r === !n)
    throw new StatusError(
      422,
      'Invalid',
      'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: "": ' +
        'exactly one of nonResourceAttributes or resourceAttributes must be specified',
    );
  const a: Attributes = r
    ? {
        resourceRequest: true,
        verb: r.verb ?? '',
        apiGroup: r.group ?? '',
        resource: r.resource ?? '',
        subresource: r.subresource || undefined,
        name: r.name || undefined,
        namespace: r.namespace || undefined,
      }
    : { resourceRequest: false, verb: n.verb ?? '', path: n.path ?? '' };
  const allowed = authorize(ctx.store, ctx.user, a);
  return {
    status: 201,
    body: {
      kind: 'SelfSubjectAccessReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec,
      status: { allowed },
    },
  };
}

/** `kubectl auth can-i --list`: the rules that apply in a namespace. */
function selfSubjectRulesReview(ctx: AuthEndpointContext, read: () => any): Result {
  ctx.allow({
    resourceRequest: true,
    verb: 'create',
    apiGroup: 'authorization.k8s.io',
    resource: 'selfsubjectrulesreviews',
  });
  const body = read();
  const namespace = body?.spec?.namespace;
  if (!namespace)
    throw new StatusError(
      422,
      'Invalid',
      'SelfSubjectRulesReview.authorization.k8s.io "" is invalid: spec.namespace: Required value',
    );
  const rules = ctx.user.groups.includes('system:masters')
    ? [
        { verbs: ['*'], apiGroups: ['*'], resources: ['*'] },
        { verbs: ['*'], nonResourceURLs: ['*'] },
      ]
    : rulesFor(ctx.store, ctx.user, namespace);
  const resourceRules = rules
    .filter((r) => r.resources?.length)
    .map(({ verbs, apiGroups, resources, resourceNames }) => ({ verbs, apiGroups, resources, resourceNames }));
  const nonResourceRules = rules
    .filter((r) => r.nonResourceURLs?.length)
    .map(({ verbs, nonResourceURLs }) => ({ verbs, nonResourceURLs }));
  return {
    status: 201,
    body: {
      kind: 'SelfSubjectRulesReview',
      apiVersion: 'authorization.k8s.io/v1',
      metadata: { creationTimestamp: null },
      spec: { namespace },
      status: { resourceRules, nonResourceRules, incomplete: false },
    },
  };
}

/** `kubectl auth whoami`. */
function selfSubjectReview(ctx: AuthEndpointContext): Result {
  ctx.allow({
    resourceRequest: true,
    verb: 'create',
    apiGroup: 'authentication.k8s.io',
    resource: 'selfsubjectreviews',
  });
  const { name, uid, groups, extra } = ctx.user;
  return {
    status: 201,
    body: {
      kind: 'SelfSubjectReview',
      apiVersion: 'authentication.k8s.io/v1',
      metadata: { creationTimestamp: null },
      status: { userInfo: { username: name, uid, groups, extra } },
    },
  };
}

/**
 * Service account issuer discovery (OIDC), as kube-apiserver serves it: relying parties (an STS
 * exchanging a projected token, as RRSA does) fetch the issuer's keys to verify tokens offline.
 */
function issuerDiscovery(ctx: AuthEndpointContext, path: string, host: string): Result | undefined {
  if (path === '.well-known/openid-configuration') {
    return {
      status: 200,
      body: {
        issuer: TOKEN_ISSUER,
        jwks_uri: `https://${host}/openid/v1/jwks`,
        response_types_supported: ['id_token'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
      },
    };
  }
  if (path === 'openid/v1/jwks') return { status: 200, body: ctx.tokens.jwks() };
  return undefined;
}

/** Answers the authentication and authorization endpoints, or undefined for any other path. */
export function authEndpoint(
  ctx: AuthEndpointContext,
  segs: string[],
  method: string,
  body: () => string | undefined,
  host = 'localhost',
): Result | undefined {
  const path = segs.join('/');
  if (method === 'GET') {
    const discovery = issuerDiscovery(ctx, path, host);
    if (discovery) return discovery;
  }
  const token = /^api\/v1\/namespaces\/([^/]+)\/serviceaccounts\/([^/]+)\/token$/.exec(path);
  const known =
    token ||
    path === 'apis/authorization.k8s.io/v1/selfsubjectaccessreviews' ||
    path === 'apis/authorization.k8s.io/v1/selfsubjectrulesreviews' ||
    path === 'apis/authentication.k8s.io/v1/selfsubjectreviews';
  if (!known) return undefined;
  if (method !== 'POST')
    throw methodNotAllowed(`the server does not allow this method on the requested resource: ${method}`);
  if (token) return tokenRequest(ctx, token[1]!, token[2]!, () => parse(body()));
  if (path.endsWith('selfsubjectaccessreviews')) return selfSubjectAccessReview(ctx, () => parse(body()));
  if (path.endsWith('selfsubjectrulesreviews')) return selfSubjectRulesReview(ctx, () => parse(body()));
  return selfSubjectReview(ctx);
}
