import { randomBytes, webcrypto } from 'node:crypto';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

/**
 * A throw-away PKI for TLS tests (@peculiar/x509, as src/tls/certificate.ts): a CA, and
 * certificates it signs for a server (IP 127.0.0.1) or a client (X.509 authentication), and
 * self-signed device certificates, as PEM.
 */

x509.cryptoProvider.set(webcrypto as unknown as Crypto);
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const DAY = 24 * 3600_000;

export interface Pem {
  readonly cert: string;
  readonly key: string;
}

interface Ca extends Pem {
  readonly keys: CryptoKeyPair;
  readonly name: string;
}

async function keyPem(keys: CryptoKeyPair): Promise<string> {
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return x509.PemConverter.encode(pkcs8, 'PRIVATE KEY');
}

const serial = () => `01${randomBytes(15).toString('hex')}`;

export async function makeCa(cn: string): Promise<Ca> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const name = `CN=${cn}`;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name,
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 30 * DAY),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString('pem'), key: await keyPem(keys), keys, name };
}

/** A certificate signed by `ca`: a server's for 127.0.0.1, or a client's. */
export async function issue(ca: Ca, cn: string, use: 'server' | 'client'): Promise<Pem> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${cn}`,
    issuer: ca.name,
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 30 * DAY),
    signingKey: ca.keys.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([
        use === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth,
      ]),
      ...(use === 'server'
        ? [new x509.SubjectAlternativeNameExtension([{ type: 'ip' as const, value: '127.0.0.1' }])]
        : []),
    ],
  });
  return { cert: cert.toString('pem'), key: await keyPem(keys) };
}

/**
 * A self-signed client certificate, as most devices carry (ThingsBoard's X.509 credentials need
 * no CA), valid from `notBefore` to `notAfter` (default: from yesterday for 30 days).
 */
export async function selfSignedClient(
  cn: string,
  validity: { notBefore?: Date; notAfter?: Date } = {},
): Promise<Pem> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${cn}`,
    notBefore: validity.notBefore ?? new Date(Date.now() - DAY),
    notAfter: validity.notAfter ?? new Date(Date.now() + 30 * DAY),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
    ],
  });
  return { cert: cert.toString('pem'), key: await keyPem(keys) };
}
