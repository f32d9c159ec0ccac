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

export function unknownCursor(after: string): Error {
  return invalid(`'${after}' is not an id of this list.`, ["query", "after"], "unknown_cursor");
}
