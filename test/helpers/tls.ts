import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** A throw-away RSA certificate and key made with openssl in `dir`; returns their paths. */
export function opensslCertificate(
  dir: string,
  subject: string,
  subjectAltName: string,
): { cert: string; key: string } {
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
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
