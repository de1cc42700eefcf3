import { isIP } from 'node:net';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

/**
 * The emulated cluster's PKI, made at start as kubeadm does: a CA, the API server's serving
 * certificate (for 127.0.0.1, localhost, the in-cluster `kubernetes.default.svc` names and any
 * extra addresses) and the admin's client certificate (`kubernetes-admin` in `system:masters`).
 * ECDSA P-256 keys: quick to make, and every client here (Go, Node) takes them.
 */
export interface ClusterPki {
  /** PEM of the CA certificate: the kubeconfig's certificate-authority-data and the pods' ca.crt. */
  caCert: string;
  /** PEM (PKCS#8) of the CA's key, kept with --state so the CA outlives a restart. */
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
}

x509.cryptoProvider.set(webcrypto as never);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const YEAR_MS = 365 * 24 * 3600 * 1000;

const pem = (label: string, der: ArrayBuffer) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der)
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END ${label}-----\n`;

const keys = () => webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']) as Promise<webcrypto.CryptoKeyPair>;
const privatePem = async (k: webcrypto.CryptoKey) => pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', k));
const serial = () =>
  Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
    .toString('hex')
    .replace(/^[89a-f]/, '1');

/** In-cluster names of the API server (the `kubernetes` Service in `default`). */
const CLUSTER_NAMES = [
  'localhost',
  'kubernetes',
  'kubernetes.default',
  'kubernetes.default.svc',
  'kubernetes.default.svc.cluster.local',
];

async function newCa(
  notBefore: Date,
  notAfter: Date,
): Promise<{ ca: x509.X509Certificate; privateKey: webcrypto.CryptoKey }> {
  const caKeys = await keys();
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=eni-ipam-emulated-ca',
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  return { ca, privateKey: caKeys.privateKey };
}

/** The CA from an earlier run, to issue new leaf certificates under. */
export interface ExistingCa {
  cert: string;
  key: string;
}

async function importCa(existing: ExistingCa): Promise<{ ca: x509.X509Certificate; privateKey: webcrypto.CryptoKey }> {
  const der = Buffer.from(existing.key.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const privateKey = await webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
  return { ca: new x509.X509Certificate(existing.cert), privateKey };
}

export async function makeClusterPki(extraSans: string[] = [], existing?: ExistingCa): Promise<ClusterPki> {
  for (const s of extraSans) {
    if (!isIP(s) && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/i.test(s))
      throw new Error(`TLS address "${s}" is neither an IP address nor a DNS name`);
  }
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 10 * YEAR_MS);
  const { ca, privateKey: caPrivateKey } = existing ? await importCa(existing) : await newCa(notBefore, notAfter);
  const leaf = async (name: string, usage: string, sans: x509.JsonGeneralName[]) => {
    const k = await keys();
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: name,
      issuer: ca.subject,
      notBefore,
      notAfter,
      publicKey: k.publicKey,
      signingKey: caPrivateKey,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension([usage]),
        await x509.AuthorityKeyIdentifierExtension.create(ca),
        ...(sans.length ? [new x509.SubjectAlternativeNameExtension(sans)] : []),
      ],
    });
    return { cert: cert.toString('pem') + '\n', key: await privatePem(k.privateKey) };
  };
  const addresses = [...new Set(['127.0.0.1', '::1', ...CLUSTER_NAMES, ...extraSans])];
  const server = await leaf(
    'CN=kube-apiserver',
    x509.ExtendedKeyUsage.serverAuth,
    addresses.map((a) => (isIP(a) ? { type: 'ip', value: a } : { type: 'dns', value: a })),
  );
  const admin = await leaf('CN=kubernetes-admin, O=system:masters', x509.ExtendedKeyUsage.clientAuth, []);
  const caKey = existing?.key ?? (await privatePem(caPrivateKey));
  return {
    caCert: ca.toString('pem') + '\n',
    caKey,
    serverCert: server.cert,
    serverKey: server.key,
    adminCert: admin.cert,
    adminKey: admin.key,
  };
}
