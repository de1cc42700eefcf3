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

/** When temporary credentials are refreshed, and how a failed refresh is retried. */
export interface RefreshOptions {
  /** Refresh this long before the credentials expire (at most half their lifetime; default 5 minutes). */
  refreshBeforeMs?: number;
  /** The clock expiry is judged on (epoch milliseconds). */
  now?: () => number;
  /** For the back-off's jitter. */
  random?: () => number;
}

export interface RamRoleOptions extends RefreshOptions {
  role: string;
  /** The ECS metadata service; http://100.100.100.200 on an instance. */
  metadataEndpoint?: string;
}

/**
 * Temporary credentials of the instance's RAM role from the metadata service, refreshed
 * before they expire (hardened mode: a session token is asked for first, and plain mode
 * is used if the service does not offer one).
 */
export function ramRoleCredentials(o: RamRoleOptions): CredentialsProvider {
  const base = (o.metadataEndpoint ?? 'http://100.100.100.200').replace(/\/$/, '');
  const now = o.now ?? Date.now;
  const fetchOnce = async (): Promise<Expiring> => {
    const headers: Record<string, string> = {};
    try {
      const t = await fetch(`${base}/latest/api/token`, {
        method: 'PUT',
        headers: { 'X-aliyun-ecs-metadata-token-ttl-seconds': '300' },
        signal: AbortSignal.timeout(METADATA_TIMEOUT_MS),
      });
      if (t.ok) headers['X-aliyun-ecs-metadata-token'] = await t.text();
    } catch {
      // No hardened mode: fall through to plain requests.
    }
    const url = `${base}/latest/meta-data/ram/security-credentials/${encodeURIComponent(o.role)}`;
    let res: Response;
    try {
      res = await fetch(url, { headers, signal: AbortSignal.timeout(METADATA_TIMEOUT_MS) });
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

  return refreshing(`ECS RAM role ${o.role}`, o, fetchOnce);
}

/**
 * Each metadata request's limit. Generous: refreshes run in the background, ahead of expiry,
 * so a slow metadata service (seconds, under load) delays no call; giving up early would.
 */
const METADATA_TIMEOUT_MS = 10_000;

interface Expiring {
  creds: Credentials;
  expiresAt: number;
}

/** A failed refresh is retried after 1 s, doubling up to a minute, each delay jittered down by up to half. */
const RETRY_BASE_MS = 1000;
const RETRY_MAX_MS = 60_000;

/**
 * Temporary credentials, served from the cache at once while they are valid. A refresh starts
 * in the background once they are within the refresh margin (one for all callers); a failed
 * one is remembered and retried with a jittered, capped back-off while the valid credentials
 * keep being served. Only a caller that finds none valid waits for a fetch, or fails with the
 * last one's error while the back-off runs (a metadata service in trouble is not hammered).
 */
function refreshing(source: string, o: RefreshOptions, fetchOnce: () => Promise<Expiring>): CredentialsProvider {
  const now = o.now ?? Date.now;
  const random = o.random ?? Math.random;
  const margin = o.refreshBeforeMs ?? 5 * 60_000;
  let cached: (Expiring & { refreshAt: number }) | undefined;
  let inflight: Promise<Expiring> | undefined;
  let failures = 0;
  let retryAt = 0;
  let lastError: Error | undefined;

  const fetchShared = (): Promise<Expiring> =>
    (inflight ??= fetchOnce()
      .then(
        (got) => {
          const at = now();
          // Credentials shorter-lived than twice the margin are refreshed at half their life, not at once.
          cached = { ...got, refreshAt: got.expiresAt - Math.min(margin, (got.expiresAt - at) / 2) };
          failures = 0;
          lastError = undefined;
          return got;
        },
        (e: Error) => {
          failures++;
          const delay = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (failures - 1));
          retryAt = now() + delay * (1 - random() / 2);
          lastError = e;
          throw e;
        },
      )
      .finally(() => {
        inflight = undefined;
      }));

  return {
    source,
    async getCredentials() {
      const t = now();
      if (cached && t < cached.expiresAt) {
        if (t >= cached.refreshAt && !inflight && t >= retryAt) fetchShared().catch(() => undefined);
        return cached.creds;
      }
      if (!inflight && lastError && t < retryAt) {
        const wait = ((retryAt - t) / 1000).toFixed(1);
        throw new CredentialsError(`${lastError.message} (no valid credentials; next attempt in ${wait} s)`);
      }
      return (await fetchShared()).creds;
    },
  };
}

export interface OidcRoleOptions extends RefreshOptions {
  roleArn: string;
  oidcProviderArn: string;
  /** The projected service-account token; read again at every refresh, as the kubelet rotates it. */
  tokenFile: string;
  /** STS endpoint, e.g. https://sts-vpc.cn-hangzhou.aliyuncs.com. */
  stsEndpoint: string;
  sessionName?: string;
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
  return refreshing(`RRSA role ${o.roleArn}`, o, fetchOnce);
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
