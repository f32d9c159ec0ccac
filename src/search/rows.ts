/** Bulk inserts and result rows, the same way on SQLite and PostgreSQL. */
import type { Knex } from "knex";
import { dialectOf } from "../store/db.js";

export type ColumnType = "text" | "bigint";
export type Columns = readonly (readonly [name: string, type: ColumnType])[];

/**
 * Inserts rows sent as one JSON parameter (an array of row arrays) that the database unpacks itself: a
 * statement and a parameter per batch rather than per row. Binding values one by one cost the client more
 * than the database spent storing them. Returns the rows of the `suffix` (a RETURNING clause).
 */
export async function insertRows<T>(trx: Knex.Transaction, table: string, columns: Columns, rows: Knex.Value[][], suffix: string): Promise<T[]> {
  if (rows.length === 0) return [];
  const names = columns.map(([name]) => name).join(", ");
  const sql =
    dialectOf(trx) === "sqlite"
      ? // WHERE true: without it SQLite would read ON CONFLICT as a join constraint.
        `INSERT INTO ${table} (${names}) SELECT ${columns.map((_, i) => `value ->> ${i}`).join(", ")} FROM json_each(?) WHERE true ${suffix}`
      : `INSERT INTO ${table} (${names}) SELECT ${columns.map(([, type], i) => `(r ->> ${i})::${type}`).join(", ")} FROM json_array_elements(?::json) r ${suffix}`;
  const result = await trx.raw<unknown>(sql, [wellFormedJson(rows)]);
  return suffix === "" ? [] : rowsOf<T>(result);
}

const ESCAPED_LONE_SURROGATE = /(?<=(?:^|[^\\])(?:\\\\)*)\\ud[89a-f][0-9a-f]{2}/g;

/**
 * JSON.stringify writes a lone surrogate as a \\udXXXX escape, which PostgreSQL refuses and SQLite would store
 * as invalid UTF-8. A bound string parameter would have become U+FFFD; so does it here. (Paired surrogates are
 * written as the characters themselves, so every escape left is a lone one.)
 */
function wellFormedJson(rows: Knex.Value[][]): string {
  const json = JSON.stringify(rows);
  return json.includes("\\ud") ? json.replace(ESCAPED_LONE_SURROGATE, "\ufffd") : json;
}

/** knex.raw returns an array of rows on SQLite and a pg Result (`.rows`) on PostgreSQL. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return (result as { rows: T[] }).rows;
}

