import { createPublicKey, verify } from 'node:crypto';

/**
 * Verifies a service-account token of this control plane as an OIDC relying party does (the
 * ECS emulator's STS, for RRSA): the signature against the issuer's public key, the issuer, one
 * of the audiences, and the expiry. Answers the subject (`system:serviceaccount:<ns>:<name>`), or
 * undefined when the token is not one it would accept.
 */
export function serviceAccountTokenVerifier(publicKeyPem: string, issuer: string) {
  const key = createPublicKey(publicKeyPem);
  return (token: string, audiences: string[], now = Date.now()): string | undefined => {
    const parts = token.split('.');
    if (parts.length !== 3) return undefined;
    const [head, body, sig] = parts as [string, string, string];
    try {
      const header = JSON.parse(Buffer.from(head, 'base64url').toString('utf8')) as { alg?: string };
      if (header.alg !== 'ES256') return undefined;
      const ok = verify(
        'sha256',
        Buffer.from(`${head}.${body}`),
        { key, dsaEncoding: 'ieee-p1363' },
        Buffer.from(sig, 'base64url'),
      );
      if (!ok) return undefined;
      const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as {
        iss?: string;
        sub?: string;
        aud?: string | string[];
        exp?: number;
        nbf?: number;
      };
      const aud = [claims.aud ?? []].flat();
      if (claims.iss !== issuer || !claims.sub || !aud.some((a) => audiences.includes(a))) return undefined;
      if (typeof claims.exp !== 'number' || claims.exp * 1000 <= now) return undefined;
      if (claims.nbf !== undefined && claims.nbf * 1000 > now + 60_000) return undefined;
      return claims.sub;
    } catch {
      return undefined;
    }
  };
}
