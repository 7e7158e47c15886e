import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * A throw-away certificate and key made with openssl in `dir` (RSA 2048, or P-256 as the gateway
 * makes its own); returns their paths.
 */
export function opensslCertificate(
  dir: string,
  subject: string,
  subjectAltName: string,
  keyType: 'rsa' | 'p256' = 'rsa',
): { cert: string; key: string } {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      ...(keyType === 'rsa' ? ['rsa:2048'] : ['ec', '-pkeyopt', 'ec_paramgen_curve:P-256']),
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      subject,
      '-addext',
      `subjectAltName=${subjectAltName}`,
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}
