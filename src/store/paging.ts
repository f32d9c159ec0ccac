import type { Knex } from "knex";
import { invalid } from "../errors.js";

/** The list shape every paginated endpoint shares. */
export interface Page<T> {
  object: "list";
  data: T[];
  first_id: string;
  last_id: string;
  has_more: boolean;
}

export interface PageQuery {
  after?: string;
  limit: number;
}

/** `rows` were fetched with `limit + 1`, so one extra row means there is more. */
export function toPage<T>(rows: T[], limit: number, idOf: (item: T) => string): Page<T> {
  const data = rows.slice(0, limit);
  return {
    object: "list",
    data,
    first_id: data.length ? idOf(data[0]) : "",
    last_id: data.length ? idOf(data[data.length - 1]) : "",
    has_more: rows.length > limit,
  };
}

/** Where a list's cursor ids live: `table` rows within `scope` (the list's owner), ordered by `key`. */
export interface CursorSpec {
  table: string;
  scope: Record<string, string>;
  key: string;
  order?: "asc" | "desc";
}

/**
 * The rows of `list` after the `after` cursor in `key` order, one more than the limit (for toPage). An id that is
 * not in the list's table and scope is an unknown cursor.
 */
export async function rowsAfter<Row>(db: Knex, list: Knex.QueryBuilder, cursor: CursorSpec, query: PageQuery): Promise<Row[]> {
  const order = cursor.order ?? "asc";
  if (query.after) {
    const at = await db(cursor.table).where({ id: query.after, ...cursor.scope }).first(cursor.key);
    if (!at) throw invalid(`'${query.after}' is not an id of this list.`, ["query", "after"], "unknown_cursor");
    list = list.where(cursor.key, order === "asc" ? ">" : "<", at[cursor.key]);
  }
  return list.orderBy(cursor.key, order).limit(query.limit + 1);
}
