/** ThingsBoard wire conventions shared by every domain: entity ids and paging. */

import { ValidationError } from '../errors.js';

/** The entity types this gateway knows (ThingsBoard's names). */
export const ENTITY_TYPES = [
  'TENANT',
  'CUSTOMER',
  'USER',
  'DEVICE',
  'DEVICE_PROFILE',
  'DASHBOARD',
  'OTA_PACKAGE',
  'AUDIT_LOG',
  'ENTITY_GROUP',
  'RULE_CHAIN',
  'RULE_NODE',
  'SCHEDULER_EVENT',
  'ALARM',
] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];

export interface EntityId<T extends EntityType = EntityType> {
  readonly entityType: T;
  readonly id: string;
}

/** ThingsBoard's "no customer" id: unassigned entities carry it as `customerId`. */
export const NULL_UUID = '13814000-1dd2-11b2-8080-808080808080';

export function entityId<T extends EntityType>(entityType: T, id: string): EntityId<T> {
  return { entityType, id };
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID_RE.test(value);
}

/** Checks a path or body id and names it in the error, as ThingsBoard's 400 does. */
export function requireUuid(value: unknown, what: string): string {
  if (!isUuid(value))
    throw new ValidationError(`Invalid UUID string for ${what}: ${String(value)}`);
  return value.toLowerCase();
}

export interface PageData<T> {
  readonly data: readonly T[];
  readonly totalPages: number;
  readonly totalElements: number;
  readonly hasNext: boolean;
}

export type SortOrder = 'ASC' | 'DESC';

export interface PageQuery<S extends string = string> {
  readonly pageSize: number;
  readonly page: number;
  readonly textSearch?: string;
  readonly sortProperty?: S;
  readonly sortOrder: SortOrder;
}

export function pageData<T>(data: readonly T[], totalElements: number, q: PageQuery): PageData<T> {
  const totalPages = Math.ceil(totalElements / q.pageSize);
  return { data, totalPages, totalElements, hasNext: (q.page + 1) * q.pageSize < totalElements };
}

const MAX_PAGE_SIZE = 10_000;

/**
 * Validates ThingsBoard paging parameters from a query string. `pageSize` and `page` are
 * required (0-based page), as in ThingsBoard.
 */
export function parsePageQuery<S extends string>(
  params: Readonly<Record<string, string | undefined>>,
  sortable: readonly S[],
): PageQuery<S> {
  const problems: string[] = [];
  const int = (name: string, min: number, max: number): number => {
    const raw = params[name];
    if (raw === undefined || raw === '') {
      problems.push(`${name} is required`);
      return min;
    }
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max) {
      problems.push(`${name} must be an integer from ${min} to ${max}`);
      return min;
    }
    return n;
  };
  const pageSize = int('pageSize', 1, MAX_PAGE_SIZE);
  const page = int('page', 0, Number.MAX_SAFE_INTEGER);
  const sortProperty = params.sortProperty || undefined;
  if (sortProperty !== undefined && !sortable.includes(sortProperty as S)) {
    problems.push(`sortProperty must be one of ${sortable.join(', ')}`);
  }
  const order = (params.sortOrder || 'ASC').toUpperCase();
  if (order !== 'ASC' && order !== 'DESC') problems.push('sortOrder must be ASC or DESC');
  if (problems.length > 0) throw new ValidationError(problems.join('; '));
  return {
    pageSize,
    page,
    textSearch: params.textSearch || undefined,
    sortProperty: sortProperty as S | undefined,
    sortOrder: order as SortOrder,
  };
}

/** Parses a JSON text column that stores a free-form object; null stays null. */
export function parseJsonColumn(text: string | null): unknown {
  return text === null ? null : JSON.parse(text);
}
