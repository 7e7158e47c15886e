import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { User } from './api.js';
import type { LiveClient } from './live.js';

/** What every page gets from the shell: the signed-in user and the live-data client. */
export interface AppContext {
  readonly user: User;
  readonly live: LiveClient;
}

export const Ctx = createContext<AppContext | null>(null);

export function useApp(): AppContext {
  const ctx = useContext(Ctx);
  if (!ctx) throw new Error('useApp outside the signed-in shell');
  return ctx;
}

export const isTenantAdmin = (u: User): boolean => u.authority === 'TENANT_ADMIN';
