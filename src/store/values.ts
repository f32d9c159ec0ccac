/** SQLite hands timestamps back as epoch milliseconds, PostgreSQL as Date: both become ISO strings here. */
export function toIso(value: unknown): string {
  return new Date(value as string | number | Date).toISOString();
}

export function toIsoOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : toIso(value);
}

/** JSON columns are text on both databases. */
export function fromJson<T>(value: unknown, fallback: T): T {
  if (typeof value !== "string" || value === "") return fallback;
  return JSON.parse(value) as T;
}
