import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Authenticator } from './auth.js';

/**
 * The slice of the ECS instance metadata service that hands out a RAM role's temporary
 * credentials (`/latest/meta-data/ram/security-credentials/<role>`), with the optional
 * session token of hardened mode (`PUT /latest/api/token`).
 */
export function metadataHandler(auth: Authenticator, roles: Array<{ name: string; credentialTtlSeconds?: number }>) {
  const sessionTokens = new Map<string, number>();
  const text = (res: ServerResponse, status: number, body: string) => {
    res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
  };
  return (req: IncomingMessage, res: ServerResponse, path: string): void => {
    if (path === '/latest/api/token') {
      if (req.method !== 'PUT') return text(res, 405, 'Method Not Allowed');
      const ttl = Number(req.headers['x-aliyun-ecs-metadata-token-ttl-seconds']);
      if (!Number.isInteger(ttl) || ttl < 1 || ttl > 21600)
        return text(res, 400, 'X-aliyun-ecs-metadata-token-ttl-seconds must be 1-21600');
      const token = randomBytes(24).toString('base64url');
      sessionTokens.set(token, Date.now() + ttl * 1000);
      return text(res, 200, token);
    }
    const given = req.headers['x-aliyun-ecs-metadata-token'];
    if (typeof given === 'string' && !((sessionTokens.get(given) ?? 0) > Date.now()))
      return text(res, 401, 'Unauthorized');
    const prefix = '/latest/meta-data/ram/security-credentials/';
    if (path === prefix || path === prefix.slice(0, -1)) return text(res, 200, roles.map((r) => r.name).join('\n'));
    const role = roles.find((r) => path === prefix + r.name);
    if (!role) return text(res, 404, 'Not Found');
    const now = Date.now();
    const cred = auth.issueTemporary((role.credentialTtlSeconds ?? 3600) * 1000, now);
    const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        AccessKeyId: cred.accessKeyId,
        AccessKeySecret: cred.secret,
        SecurityToken: cred.token,
        Expiration: iso(cred.expiresAt),
        LastUpdated: iso(now),
        Code: 'Success',
      }),
    );
  };
}
