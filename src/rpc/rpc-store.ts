import type { PageQuery } from '../common/entity.js';
import type { Db } from '../db/open.js';
import type { RpcStatus } from './types.js';

export interface RpcRow {
  id: string;
  device_rid: number;
  device_id: string;
  request_id: number;
  oneway: number;
  method: string;
  params: string;
  status: RpcStatus;
  expiration_time: number;
  retries: number | null;
  response: string | null;
  additional_info: string | null;
  created_time: number;
}

type NewRpcRow = Omit<RpcRow, 'device_id' | 'response'>;

export const RPC_SORT = ['createdTime', 'expirationTime', 'status'] as const;
export type RpcSort = (typeof RPC_SORT)[number];

const SORT_COLUMN: Record<RpcSort, string> = {
  createdTime: 'r.created_time',
  expirationTime: 'r.expiration_time',
  status: 'r.status',
};

const SELECT = `SELECT r.*, d.id AS device_id FROM rpc r JOIN device d ON d.rid = r.device_rid`;

/** SQL for persistent RPC rows. */
export class RpcStore {
  readonly #insert;
  readonly #byId;
  readonly #setStatus;
  readonly #setResponse;
  readonly #open;
  readonly #maxRequestId;
  readonly #delete;

  constructor(private readonly db: Db) {
    this.#insert = db.prepare<[NewRpcRow]>(
      `INSERT INTO rpc (id, device_rid, request_id, oneway, method, params, status, expiration_time,
                        retries, additional_info, created_time)
       VALUES (@id, @device_rid, @request_id, @oneway, @method, @params, @status, @expiration_time,
               @retries, @additional_info, @created_time)`,
    );
    this.#byId = db.prepare<[string], RpcRow>(`${SELECT} WHERE r.id = ?`);
    this.#setStatus = db.prepare<[RpcStatus, string]>(`UPDATE rpc SET status = ? WHERE id = ?`);
    this.#setResponse = db.prepare<[RpcStatus, string | null, string]>(
      `UPDATE rpc SET status = ?, response = ? WHERE id = ?`,
    );
    this.#open = db.prepare<[], RpcRow>(
      `${SELECT} WHERE r.status IN ('QUEUED', 'SENT', 'DELIVERED') ORDER BY r.device_rid, r.request_id`,
    );
    this.#maxRequestId = db.prepare<[number], { max: number | null }>(
      `SELECT MAX(request_id) AS max FROM rpc WHERE device_rid = ?`,
    );
    this.#delete = db.prepare<[string]>(`DELETE FROM rpc WHERE id = ?`);
  }

  insert(row: NewRpcRow): void {
    this.#insert.run(row);
  }

  byId(id: string): RpcRow | undefined {
    return this.#byId.get(id);
  }

  setStatus(id: string, status: RpcStatus, response?: string | null): void {
    if (response === undefined) this.#setStatus.run(status, id);
    else this.#setResponse.run(status, response, id);
  }

  /** Rows that may still be delivered or answered (loaded at start). */
  open(): RpcRow[] {
    return this.#open.all();
  }

  /** Highest request id stored for a device, so ids stay unique across a restart. */
  maxRequestId(rid: number): number | undefined {
    return this.#maxRequestId.get(rid)?.max ?? undefined;
  }

  /** One page of a device's RPCs, optionally of one status; `textSearch` matches the method. */
  page(
    rid: number,
    q: PageQuery<RpcSort>,
    status: RpcStatus | undefined,
  ): { rows: RpcRow[]; total: number } {
    const where = ['r.device_rid = ?'];
    const params: Array<string | number> = [rid];
    if (status) {
      where.push('r.status = ?');
      params.push(status);
    }
    if (q.textSearch) {
      where.push("r.method LIKE ? ESCAPE '\\'");
      params.push(`%${q.textSearch.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
    }
    const filter = where.join(' AND ');
    const order = `${SORT_COLUMN[q.sortProperty ?? 'createdTime']} ${q.sortOrder}, r.request_id ${q.sortOrder}`;
    // @NOTE: the sort column comes from a fixed map, never from the request text.
    const rows = this.db
      .prepare<Array<string | number>, RpcRow>(
        `${SELECT} WHERE ${filter} ORDER BY ${order} LIMIT ? OFFSET ?`,
      )
      .all(...params, q.pageSize, q.page * q.pageSize);
    const total = this.db
      .prepare<Array<string | number>, { n: number }>(
        `SELECT COUNT(*) AS n FROM rpc r WHERE ${filter}`,
      )
      .get(...params)?.n;
    return { rows, total: total ?? 0 };
  }

  delete(id: string): boolean {
    return this.#delete.run(id).changes > 0;
  }
}
