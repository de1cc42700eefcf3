import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

export interface Credentials {
  accessKeyId: string;
  accessKeySecret: string;
  securityToken?: string;
}

/** What pop-core's `credentialsProvider` hook calls before each request. */
export interface CredentialsProvider {
  getCredentials(): Promise<Credentials>;
  /** Where the credentials come from, for logs (never the values). */
  readonly source: string;
}

export class CredentialsError extends Error {}

export function staticCredentials(c: Credentials, source = 'static'): CredentialsProvider {
  return { source, getCredentials: async () => c };
}

/** `ALIBABA_CLOUD_ACCESS_KEY_ID`, `ALIBABA_CLOUD_ACCESS_KEY_SECRET`, optional `ALIBABA_CLOUD_SECURITY_TOKEN`. */
export function envCredentials(env: NodeJS.ProcessEnv = process.env): CredentialsProvider {
  const id = env.ALIBABA_CLOUD_ACCESS_KEY_ID;
  const secret = env.ALIBABA_CLOUD_ACCESS_KEY_SECRET;
  if (!id || !secret) {
    throw new CredentialsError(
      'no cloud credentials: set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, ' +
        'mount them as files (--credentials-dir), or use an ECS RAM role (--ram-role)',
    );
  }
  return staticCredentials(
    { accessKeyId: id, accessKeySecret: secret, securityToken: env.ALIBABA_CLOUD_SECURITY_TOKEN || undefined },
    'environment',
  );
}

/**
 * Files `access-key-id`, `access-key-secret` and optional `security-token` in a folder, as a
 * mounted Secret provides them. They are read again when they change, so a rotated Secret
 * takes effect without a restart.
 */
export function fileCredentials(dir: string): CredentialsProvider {
  let cached: { mtimeMs: number; creds: Credentials } | undefined;
  const read = async (name: string) => (await readFile(join(dir, name), 'utf8')).trim();
  return {
    source: `files in ${dir}`,
    async getCredentials() {
      let mtimeMs: number;
      try {
        mtimeMs = (await stat(join(dir, 'access-key-secret'))).mtimeMs;
      } catch {
        throw new CredentialsError(`no credentials in ${dir}: expected files access-key-id and access-key-secret`);
      }
      if (cached && cached.mtimeMs === mtimeMs) return cached.creds;
      const [accessKeyId, accessKeySecret] = await Promise.all([read('access-key-id'), read('access-key-secret')]);
      const securityToken = await read('security-token').catch(() => undefined);
      if (!accessKeyId || !accessKeySecret) throw new CredentialsError(`empty credentials in ${dir}`);
      cached = { mtimeMs, creds: { accessKeyId, accessKeySecret, securityToken: securityToken || undefined } };
      return cached.creds;
    },
  };
}

export interface RamRoleOptions {
  role: string;
  /** The ECS metadata service; http://100.100.100.200 on an instance. */
  metadataEndpoint?: string;
  /** Refresh this long before the credentials expire. */
  refreshBeforeMs?: number;
  now?: () => number;
}

/**
 * Temporary credentials of the instance's RAM role from the metadata service, refreshed
 * before they expire (hardened mode: a session token is asked for first, and plain mode
 * is used if the service does not offer one).
 */
export function ramRoleCredentials(o: RamRoleOptions): CredentialsProvider {
  const base = (o.metadataEndpoint ?? 'http://100.100.100.200').replace(/\/$/, '');
  const now = o.now ?? Date.now;
  const margin = o.refreshBeforeMs ?? 5 * 60_000;
  const fetchOnce = async (): Promise<Expiring> => {
    const headers: Record<string, string> = {};
    try {
      const t = await fetch(`${base}/latest/api/token`, {
        method: 'PUT',
        headers: { 'X-aliyun-ecs-metadata-token-ttl-seconds': '300' },
        signal: AbortSignal.timeout(2000),
      });
      if (t.ok) headers['X-aliyun-ecs-metadata-token'] = await t.text();
    } catch {
      // No hardened mode: fall through to plain requests.
    }
    const url = `${base}/latest/meta-data/ram/security-credentials/${encodeURIComponent(o.role)}`;
    let res: Response;
    try {
      res = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
    } catch (e) {
      throw new CredentialsError(`RAM role ${o.role}: metadata service ${base} unreachable: ${(e as Error).message}`);
    }
    if (!res.ok) throw new CredentialsError(`RAM role ${o.role}: metadata service answered HTTP ${res.status}`);
    const body = (await res.json()) as Record<string, string>;
    if (body.Code !== 'Success' || !body.AccessKeyId || !body.AccessKeySecret) {
      throw new CredentialsError(`RAM role ${o.role}: metadata service answered Code ${body.Code ?? '(none)'}`);
    }
    return {
      creds: {
        accessKeyId: body.AccessKeyId,
        accessKeySecret: body.AccessKeySecret,
        securityToken: body.SecurityToken,
      },
      expiresAt: Date.parse(body.Expiration ?? '') || now() + 15 * 60_000,
    };
  };

  return refreshing(`ECS RAM role ${o.role}`, margin, now, fetchOnce);
}

interface Expiring {
  creds: Credentials;
  expiresAt: number;
}

/**
 * Temporary credentials kept until `margin` before they expire, fetched once for all callers
 * at a time; a failed early refresh keeps the old ones while they are still valid.
 */
function refreshing(
  source: string,
  margin: number,
  now: () => number,
  fetchOnce: () => Promise<Expiring>,
): CredentialsProvider {
  let cached: Expiring | undefined;
  let inflight: Promise<Expiring> | undefined;
  return {
    source,
    async getCredentials() {
      if (cached && now() < cached.expiresAt - margin) return cached.creds;
      inflight ??= fetchOnce().finally(() => {
        inflight = undefined;
      });
      try {
        cached = await inflight;
        return cached.creds;
      } catch (e) {
        if (cached && now() < cached.expiresAt) return cached.creds;
        throw e;
      }
    },
  };
}

export interface OidcRoleOptions {
  roleArn: string;
  oidcProviderArn: string;
  /** The projected service-account token; read again at every refresh, as the kubelet rotates it. */
  tokenFile: string;
  /** STS endpoint, e.g. https://sts-vpc.cn-hangzhou.aliyuncs.com. */
  stsEndpoint: string;
  sessionName?: string;
  refreshBeforeMs?: number;
  now?: () => number;
}

/**
 * RRSA (RAM Roles for Service Accounts): the pod's projected service-account token is traded
 * for the role's temporary credentials with STS AssumeRoleWithOIDC, an unsigned call.
 */
export function oidcRoleCredentials(o: OidcRoleOptions): CredentialsProvider {
  const now = o.now ?? Date.now;
  const fetchOnce = async (): Promise<Expiring> => {
    let token: string;
    try {
      token = (await readFile(o.tokenFile, 'utf8')).trim();
    } catch (e) {
      throw new CredentialsError(
        `RRSA role ${o.roleArn}: cannot read the service-account token ${o.tokenFile}: ` +
          `${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    const form = new URLSearchParams({
      Action: 'AssumeRoleWithOIDC',
      Version: '2015-04-01',
      Format: 'JSON',
      Timestamp: new Date(now()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      RoleArn: o.roleArn,
      OIDCProviderArn: o.oidcProviderArn,
      OIDCToken: token,
      RoleSessionName: o.sessionName ?? 'eni-ipam',
    });
    let res: Response;
    try {
      res = await fetch(o.stsEndpoint, { method: 'POST', body: form, signal: AbortSignal.timeout(10_000) });
    } catch (e) {
      throw new CredentialsError(`RRSA role ${o.roleArn}: STS ${o.stsEndpoint} unreachable: ${(e as Error).message}`);
    }
    const body = (await res.json().catch(() => ({}))) as {
      Code?: string;
      Message?: string;
      Credentials?: Record<string, string>;
    };
    const c = body.Credentials;
    if (!res.ok || !c?.AccessKeyId || !c.AccessKeySecret) {
      throw new CredentialsError(
        `RRSA role ${o.roleArn}: AssumeRoleWithOIDC answered HTTP ${res.status} ` +
          `${body.Code ?? ''}: ${body.Message ?? 'no credentials'}`,
      );
    }
    return {
      creds: { accessKeyId: c.AccessKeyId, accessKeySecret: c.AccessKeySecret, securityToken: c.SecurityToken },
      expiresAt: Date.parse(c.Expiration ?? '') || now() + 15 * 60_000,
    };
  };
  return refreshing(`RRSA role ${o.roleArn}`, o.refreshBeforeMs ?? 5 * 60_000, now, fetchOnce);
}

/** RRSA's settings as ACK's pod-identity webhook (or the Helm chart) injects them, if all are set. */
export function rrsaFromEnv(
  env: NodeJS.ProcessEnv = process.env,
): { roleArn: string; oidcProviderArn: string; tokenFile: string } | undefined {
  const roleArn = env.ALIBABA_CLOUD_ROLE_ARN;
  const oidcProviderArn = env.ALIBABA_CLOUD_OIDC_PROVIDER_ARN;
  const tokenFile = env.ALIBABA_CLOUD_OIDC_TOKEN_FILE;
  return roleArn && oidcProviderArn && tokenFile ? { roleArn, oidcProviderArn, tokenFile } : undefined;
}
