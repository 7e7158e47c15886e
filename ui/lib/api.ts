/**
 * The page's one way to the gateway's REST API: the JWT in localStorage (under the names
 * ThingsBoard's UI and our password pages use), a refresh on 401, errors as `ApiError` with the
 * server's message.
 */

const TOKEN = 'jwt_token';
const REFRESH = 'refresh_token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface Id {
  id: string;
  entityType?: string;
}

export interface PageData<T> {
  data: T[];
  totalPages: number;
  totalElements: number;
  hasNext: boolean;
}

export interface User {
  id: Id;
  email: string;
  authority: 'SYS_ADMIN' | 'TENANT_ADMIN' | 'CUSTOMER_USER';
  customerId?: Id;
  firstName?: string | null;
  lastName?: string | null;
}

type Listener = () => void;
const listeners = new Set<Listener>();

export const session = {
  token: (): string => localStorage.getItem(TOKEN) ?? '',
  set(token: string, refresh: string): void {
    localStorage.setItem(TOKEN, token);
    localStorage.setItem(REFRESH, refresh);
    for (const l of listeners) l();
  },
  clear(): void {
    localStorage.removeItem(TOKEN);
    localStorage.removeItem(REFRESH);
    for (const l of listeners) l();
  },
  onChange(l: Listener): () => void {
    listeners.add(l);
    return () => listeners.delete(l);
  },
};

let refreshing: Promise<boolean> | undefined;

/** One refresh at a time; false (and signed out) when the refresh token is no good. */
function refresh(): Promise<boolean> {
  refreshing ??= (async () => {
    const refreshToken = localStorage.getItem(REFRESH);
    if (!refreshToken) return false;
    const res = await fetch('/api/auth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ refreshToken }),
    }).catch(() => undefined);
    if (!res?.ok) return false;
    const body = (await res.json()) as { token: string; refreshToken: string };
    session.set(body.token, body.refreshToken);
    return true;
  })().finally(() => {
    refreshing = undefined;
  });
  return refreshing;
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  /** Send `body` as is (a string or FormData), not as JSON. */
  raw?: boolean;
  signal?: AbortSignal;
}

/** Calls the API; JSON replies are parsed, empty ones give undefined. Throws ApiError. */
export async function api<T = unknown>(path: string, opts: RequestOptions = {}): Promise<T> {
  const send = () => {
    const headers: Record<string, string> = {};
    const token = session.token();
    if (token) headers['X-Authorization'] = `Bearer ${token}`;
    let body: BodyInit | undefined;
    if (opts.body !== undefined) {
      if (opts.raw) body = opts.body as BodyInit;
      else {
        body = JSON.stringify(opts.body);
        headers['content-type'] = 'application/json';
      }
    }
    return fetch(path, {
      method: opts.method ?? (body === undefined ? 'GET' : 'POST'),
      headers,
      body,
      signal: opts.signal,
    });
  };
  let res = await send();
  if (res.status === 401 && session.token()) {
    if (await refresh()) res = await send();
    else session.clear();
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  if (!res.ok) {
    const message =
      (json as { message?: string } | undefined)?.message ??
      (res.status === 504 ? 'Timed out' : `Request failed (${res.status})`);
    throw new ApiError(res.status, message);
  }
  return json as T;
}

/** Query string from defined values. */
export function qs(params: Record<string, string | number | boolean | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
