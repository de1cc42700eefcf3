import type { Authenticator } from './auth.js';
import { ApiError, apiError, missing } from './errors.js';

export const STS_VERSION = '2015-04-01';

export interface OidcRole {
  roleArn: string;
  oidcProviderArn: string;
  /** The service-account token the provider accepts for this role. */
  token: string;
  credentialTtlSeconds?: number;
}

/**
 * STS AssumeRoleWithOIDC, the call behind RRSA (RAM Roles for Service Accounts): an
 * anonymous call that trades a projected service-account token for a role's temporary
 * credentials. The emulator knows the tokens each provider accepts from the fixture, and, with
 * a verifier, takes the service-account tokens of an emulated cluster.
 */
/** Checks a token against the cluster's issuer (signature, expiry, audience); the subject it names, or undefined. */
export type OidcVerifier = (token: string, audience: string) => string | undefined;

export function assumeRoleWithOidc(
  auth: Authenticator,
  roles: OidcRole[],
  raw: Record<string, string>,
  now = Date.now(),
  verifier?: OidcVerifier,
): object {
  for (const name of ['RoleArn', 'OIDCProviderArn', 'OIDCToken']) if (!raw[name]) throw missing(name);
  const role = roles.find((r) => r.roleArn === raw.RoleArn);
  if (!role) throw new ApiError(404, 'EntityNotExist.Role', `The role ${raw.RoleArn} does not exist.`);
  if (role.oidcProviderArn !== raw.OIDCProviderArn)
    throw new ApiError(
      404,
      'EntityNotExist.OIDCProvider',
      `The OIDC provider ${raw.OIDCProviderArn} is not trusted by ${raw.RoleArn}.`,
    );
  // The fixture's token, or a service-account token of the cluster (audience sts.aliyuncs.com, as
  // RRSA's projected token has).
  const subject =
    role.token === raw.OIDCToken ? 'system:serviceaccount' : verifier?.(raw.OIDCToken, 'sts.aliyuncs.com');
  if (!subject) throw apiError('AuthenticationFail.OIDCToken.Invalid', 'The OIDC token is invalid or expired.');
  const cred = auth.issueTemporary((role.credentialTtlSeconds ?? 3600) * 1000, now);
  const session = raw.RoleSessionName || 'session';
  return {
    Credentials: {
      AccessKeyId: cred.accessKeyId,
      AccessKeySecret: cred.secret,
      SecurityToken: cred.token,
      Expiration: new Date(cred.expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    },
    AssumedRoleUser: {
      Arn: `${role.roleArn}/${session}`,
      AssumedRoleId: `${cred.accessKeyId.slice(4, 20)}:${session}`,
    },
    OIDCTokenInfo: { Issuer: role.oidcProviderArn, Subject: subject },
  };
}
