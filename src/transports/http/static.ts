import { readFile } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import type { Context } from 'hono';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.map': 'application/json',
};

/** Files under assets/ carry a content hash in their name (build-ui.mjs): cached for a year. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/** The precompressed copies the build writes beside each asset, best first. */
const ENCODINGS = [
  { name: 'br', ext: '.br' },
  { name: 'gzip', ext: '.gz' },
] as const;

function accepts(c: Context, encoding: string): boolean {
  const header = c.req.header('accept-encoding') ?? '';
  return header.split(',').some((part) => {
    const [token, ...params] = part.trim().split(';');
    return token === encoding && !params.some((p) => /^\s*q=0(\.0*)?\s*$/.test(p));
  });
}

/**
 * Serves the bundled web UI from `root`. Hashed assets get long-lived cache headers and their
 * precompressed copy (brotli or gzip) when the client accepts it. Unknown paths that look like
 * pages fall back to index.html (never cached) so that client-side routes survive a reload.
 */
export function serveUi(root: string) {
  return async (c: Context): Promise<Response> => {
    const rel = normalize(decodeURIComponent(c.req.path)).replace(/^([/\\])+/, '');
    const file = join(root, rel === '' ? 'index.html' : rel);
    if (!file.startsWith(root + sep) && file !== root) return c.notFound();
    for (const candidate of [file, extname(file) ? undefined : join(root, 'index.html')]) {
      if (!candidate) continue;
      const type = TYPES[extname(candidate)] ?? 'application/octet-stream';
      const hashed = candidate.startsWith(join(root, 'assets') + sep);
      const headers: Record<string, string> = {
        'content-type': type,
        'cache-control': hashed ? IMMUTABLE : 'no-cache',
      };
      if (hashed) {
        headers.vary = 'accept-encoding';
        for (const enc of ENCODINGS) {
          if (!accepts(c, enc.name)) continue;
          const body = await readFile(candidate + enc.ext).catch(() => undefined);
          if (body) return c.body(body, 200, { ...headers, 'content-encoding': enc.name });
        }
      }
      try {
        return c.body(await readFile(candidate), 200, headers);
      } catch {
        // Not there: try the next candidate, then 404.
      }
    }
    return c.notFound();
  };
}
