import {
  createHash,
  createPrivateKey,
  createPublicKey,
  createSign,
  createVerify,
  generateKeyPairSync,
  randomUUID,
  type KeyObject,
} from 'node:crypto';
import type { Store } from '../core/store.js';

/** Who a request comes from, as the API server's authenticators name it. */
export interface Identity {
  name: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** The issuer (and default audience) of the emulated cluster's service-account tokens, as kubeadm sets it. */
export const TOKEN_ISSUER = 'https://kubernetes.default.svc.cluster.local';

export interface TokenRequestInput {
  namespace: string;
  serviceAccount: string;
  audiences?: string[];
  /** Default 3600, at least 600 (the API server's minimum). */
  expirationSeconds?: number;
  /** Bind the token to a pod (projected volumes) or a secret: it stops working when the object goes. */
  boundObject?: { kind: 'Pod' | 'Secret'; name: string; uid?: string };
}

export interface IssuedToken {
  token: string;
  expirationTimestamp: string;
  audiences: string[];
}

const b64url = (v: object | Buffer) => (Buffer.isBuffer(v) ? v : Buffer.from(JSON.stringify(v))).toString('base64url');

/** Thrown when a token cannot be issued; the caller turns it into a Status. */
export class TokenRequestError extends Error {
  constructor(
    readonly code: 400 | 404,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Service-account tokens: RS256 JWTs with the claims kube-apiserver puts in them (iss, sub
 * `system:serviceaccount:NS:NAME`, aud, iat/nbf/exp, jti and the `kubernetes.io` claim naming the
 * namespace, the service account and the pod or secret it is bound to, with their uids).
 * Verification checks the signature, the time, the audience and that the service account and the
 * bound object still exist with the same uid. The key is made on first use.
 */
export class ServiceAccountTokens {
  private key?: { priv: KeyObject; pub: KeyObject; kid: string };

  constructor(
    private readonly store: Store,
    private readonly now: () => number = Date.now,
    /** A signing key from an earlier run (PKCS#8 PEM), so its tokens stay valid. */
    private readonly savedKey?: string,
  ) {}

  /** The public signing key as a JSON Web Key Set (`/openid/v1/jwks`), for relying parties such as an STS. */
  jwks(): { keys: Array<Record<string, string>> } {
    const { pub, kid } = this.signingKey();
    const jwk = pub.export({ format: 'jwk' }) as { n: string; e: string };
    return { keys: [{ use: 'sig', kty: 'RSA', kid, alg: 'RS256', n: jwk.n, e: jwk.e }] };
  }

  /** The signing key as PKCS#8 PEM, to keep it across restarts. */
  privateKeyPem(): string {
    return this.signingKey().priv.export({ format: 'pem', type: 'pkcs8' }).toString();
  }

  private signingKey() {
    if (!this.key) {
      const { privateKey, publicKey } = this.savedKey
        ? { privateKey: createPrivateKey(this.savedKey), publicKey: createPublicKey(this.savedKey) }
        : generateKeyPairSync('rsa', { modulusLength: 2048 });
      // The key id as kube-apiserver derives it: the SHA-256 of the DER public key.
      const kid = b64url(
        createHash('sha256')
          .update(publicKey.export({ format: 'der', type: 'spki' }))
          .digest(),
      );
      this.key = { priv: privateKey, pub: publicKey, kid };
    }
    return this.key;
  }

  private object(
    resource: 'serviceaccounts' | 'pods' | 'secrets' | 'nodes',
    namespace: string | undefined,
    name: string,
  ) {
    const t = this.store.types.get(resource);
    return t ? this.store.get(t, namespace, name) : undefined;
  }

  issue(req: TokenRequestInput): IssuedToken {
    const sa = this.object('serviceaccounts', req.namespace, req.serviceAccount);
    if (!sa) throw new TokenRequestError(404, `serviceaccounts "${req.serviceAccount}" not found`);
    const expirationSeconds = req.expirationSeconds ?? 3600;
    if (!Number.isInteger(expirationSeconds) || expirationSeconds < 600) {
      throw new TokenRequestError(
        400,
        `spec.expirationSeconds: Invalid value: ${expirationSeconds}: may not specify a duration less than 10 minutes`,
      );
    }
    const audiences = req.audiences?.length ? req.audiences : [TOKEN_ISSUER];
    const claim: Record<string, unknown> = {
      namespace: req.namespace,
      serviceaccount: { name: req.serviceAccount, uid: sa.metadata.uid },
    };
    if (req.boundObject) {
      const { kind, name } = req.boundObject;
      const bound = this.object(kind === 'Pod' ? 'pods' : 'secrets', req.namespace, name);
      if (!bound) throw new TokenRequestError(404, `${kind === 'Pod' ? 'pods' : 'secrets'} "${name}" not found`);
      if (req.boundObject.uid && req.boundObject.uid !== bound.metadata.uid) {
        throw new TokenRequestError(
          400,
          `the UID in the bound object reference (${req.boundObject.uid}) ` +
            `does not match the UID in record (${bound.metadata.uid})`,
        );
      }
      claim[kind === 'Pod' ? 'pod' : 'secret'] = { name, uid: bound.metadata.uid };
      const nodeName = kind === 'Pod' ? bound.spec?.nodeName : undefined;
      if (nodeName) {
        const node = this.object('nodes', undefined, nodeName);
        claim.node = { name: nodeName, uid: node?.metadata.uid };
      }
    }
    const iat = Math.floor(this.now() / 1000);
    const exp = iat + expirationSeconds;
    const payload = {
      aud: audiences,
      exp,
      iat,
      iss: TOKEN_ISSUER,
      jti: randomUUID(),
      'kubernetes.io': claim,
      nbf: iat,
      sub: `system:serviceaccount:${req.namespace}:${req.serviceAccount}`,
    };
    const key = this.signingKey();
    const signingInput = `${b64url({ alg: 'RS256', kid: key.kid })}.${b64url(payload)}`;
    const signature = createSign('RSA-SHA256').update(signingInput).sign(key.priv);
    return {
      token: `${signingInput}.${b64url(signature)}`,
      expirationTimestamp: new Date(exp * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      audiences,
    };
  }

  /** The identity a token names, or undefined when it is not one of ours or no longer valid. */
  verify(token: string, audiences: string[] = [TOKEN_ISSUER]): Identity | undefined {
    const parts = token.split('.');
    if (parts.length !== 3 || (!this.key && !this.savedKey)) return undefined;
    const [header, body, signature] = parts as [string, string, string];
    if (
      !createVerify('RSA-SHA256')
        .update(`${header}.${body}`)
        .verify(this.signingKey().pub, Buffer.from(signature, 'base64url'))
    )
      return undefined;
    let claims: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- a JWT payload
    try {
      claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    const nowS = this.now() / 1000;
    if (claims.iss !== TOKEN_ISSUER || !(claims.exp > nowS) || !(claims.nbf <= nowS + 60)) return undefined;
    if (!(claims.aud as string[]).some((a) => audiences.includes(a))) return undefined;
    const k = claims['kubernetes.io'];
    const sa = this.object('serviceaccounts', k.namespace, k.serviceaccount.name);
    if (!sa || sa.metadata.uid !== k.serviceaccount.uid || sa.metadata.deletionTimestamp) return undefined;
    const extra: Record<string, string[]> = {};
    for (const [kind, resource] of [
      ['pod', 'pods'],
      ['secret', 'secrets'],
    ] as const) {
      if (!k[kind]) continue;
      const bound = this.object(resource, k.namespace, k[kind].name);
      if (!bound || bound.metadata.uid !== k[kind].uid) return undefined;
      // A terminating pod keeps its token through its grace period (its deletionTimestamp is when
      // that ends) and a minute more, as the API server's validator allows: it must still release
      // leases and write its last status.
      const deleting = bound.metadata.deletionTimestamp;
      if (deleting && Date.parse(deleting) / 1000 < nowS - 60) return undefined;
      if (kind === 'pod')
        Object.assign(extra, {
          'authentication.kubernetes.io/pod-name': [k.pod.name],
          'authentication.kubernetes.io/pod-uid': [k.pod.uid],
        });
    }
    if (k.node)
      Object.assign(extra, {
        'authentication.kubernetes.io/node-name': [k.node.name],
        ...(k.node.uid ? { 'authentication.kubernetes.io/node-uid': [k.node.uid] } : {}),
      });
    extra['authentication.kubernetes.io/credential-id'] = [`JTI=${claims.jti}`];
    return {
      name: claims.sub,
      uid: k.serviceaccount.uid,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${k.namespace}`, 'system:authenticated'],
      extra,
    };
  }
}
