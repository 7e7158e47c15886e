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

/**
 * Serves the bundled web UI from `root`. Unknown paths that look like pages fall back to
 * index.html so that client-side routes survive a reload.
 */
export function serveUi(root: string) {
  return async (c: Context): Promise<Response> => {
    const rel = normalize(decodeURIComponent(c.req.path)).replace(/^([/\\])+/, '');
    const file = join(root, rel === '' ? 'index.html' : rel);
    if (!file.startsWith(root + sep) && file !== root) return c.notFound();
    for (const candidate of [file, extname(file) ? undefined : join(root, 'index.html')]) {
      if (!candidate) continue;
      try {
        const body = await readFile(candidate);
        const type = TYPES[extname(candidate)] ?? 'application/octet-stream';
        const cache = candidate.endsWith('.html') ? 'no-cache' : 'public, max-age=3600';
        return c.body(body, 200, { 'content-type': type, 'cache-control': cache });
      } catch {
        // Not there: try the next candidate, then 404.
      }
    }
    return c.notFound();
  };
}
