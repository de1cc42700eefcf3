import { isIP } from 'node:net';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

/**
 * Certificates for a local cluster, made as kubeadm makes them: CAs, serving and client
 * certificates signed by them, and key pairs. ECDSA P-256 keys: quick to make, and every client
 * here (Go, Node) takes them.
 */

/** A certificate and its private key, both PEM (the key PKCS#8). */
export interface CertKey {
  cert: string;
  key: string;
}

x509.cryptoProvider.set(webcrypto as never);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const YEAR_MS = 365 * 24 * 3600 * 1000;

const pem = (label: string, der: ArrayBuffer) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der)
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END ${label}-----\n`;

const newKeys = () => webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']) as Promise<webcrypto.CryptoKeyPair>;
const privatePem = async (k: webcrypto.CryptoKey) => pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', k));
const serial = () =>
  Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
    .toString('hex')
    .replace(/^[89a-f]/, '1');
const validity = () => ({ notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 10 * YEAR_MS) });

/** A self-signed CA named `cn`. */
export async function newCa(cn: string): Promise<CertKey> {
  const k = await newKeys();
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${cn}`,
    ...validity(),
    keys: k,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(k.publicKey),
    ],
  });
  return { cert: ca.toString('pem') + '\n', key: await privatePem(k.privateKey) };
}

async function importKey(key: string): Promise<webcrypto.CryptoKey> {
  const der = Buffer.from(key.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
}

export interface LeafRequest {
  /** e.g. `CN=system:node:n1, O=system:nodes` (O: the groups a client certificate carries). */
  subject: string;
  usage: 'server' | 'client' | 'both';
  /** IP addresses and DNS names a serving certificate covers. */
  sans?: string[];
}

/** A certificate signed by `ca`. */
export async function issue(ca: CertKey, req: LeafRequest): Promise<CertKey> {
  for (const s of req.sans ?? []) {
    if (!isIP(s) && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/i.test(s))
      throw new Error(`TLS address "${s}" is neither an IP address nor a DNS name`);
  }
  const caCert = new x509.X509Certificate(ca.cert);
  const k = await newKeys();
  const usages = {
    server: [x509.ExtendedKeyUsage.serverAuth],
    client: [x509.ExtendedKeyUsage.clientAuth],
    both: [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth],
  }[req.usage];
  const sans = [...new Set(req.sans ?? [])].map((a) =>
    isIP(a) ? { type: 'ip' as const, value: a } : { type: 'dns' as const, value: a },
  );
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: req.subject,
    issuer: caCert.subject,
    ...validity(),
    publicKey: k.publicKey,
    signingKey: await importKey(ca.key),
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension(usages),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
      ...(sans.length ? [new x509.SubjectAlternativeNameExtension(sans)] : []),
    ],
  });
  return { cert: cert.toString('pem') + '\n', key: await privatePem(k.privateKey) };
}

/** A key pair (PEM: PKCS#8 private, SPKI public), e.g. the service-account token signing key. */
export async function newKeyPair(): Promise<{ privateKey: string; publicKey: string }> {
  const k = await newKeys();
  return {
    privateKey: await privatePem(k.privateKey),
    publicKey: pem('PUBLIC KEY', await webcrypto.subtle.exportKey('spki', k.publicKey)),
  };
}

/** In-cluster names of the API server (the `kubernetes` Service in `default`). */
export const API_SERVER_NAMES = [
  'localhost',
  'kubernetes',
  'kubernetes.default',
  'kubernetes.default.svc',
  'kubernetes.default.svc.cluster.local',
];
