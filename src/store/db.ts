import path from "node:path";
import { mkdirSync } from "node:fs";
import knex, { type Knex } from "knex";
import { migrations } from "./migrations/index.js";
import type { Migration } from "./migrations/types.js";

export type Dialect = "sqlite" | "postgres";

export interface DatabaseOptions {
  /** `postgres://…` for PostgreSQL; otherwise SQLite in `dataDir`. */
  url?: string;
  dataDir: string;
  /** PostgreSQL schema to use (tests isolate themselves this way). */
  schema?: string;
}

export function dialectOf(db: Knex): Dialect {
  const client = String(db.client.config.client);
  return client === "pg" || client === "postgres" || client === "postgresql" ? "postgres" : "sqlite";
}

/** Opens the store and brings its schema up to date. */
export async function openDatabase(options: DatabaseOptions): Promise<Knex> {
  const db = options.url?.startsWith("postgres") ? postgresClient(options.url, options.schema) : sqliteClient(options.dataDir);
  if (options.schema && dialectOf(db) === "postgres") {
    await db.raw("CREATE SCHEMA IF NOT EXISTS ??", [options.schema]);
  }
  await db.migrate.latest({ migrationSource: new ListMigrationSource(migrations) });
  return db;
}

function postgresClient(url: string, schema?: string): Knex {
  return knex({
    client: "pg",
    connection: url,
    searchPath: schema ? [schema] : undefined,
    pool: { min: 0, max: 10 },
  });
}

function sqliteClient(dataDir: string): Knex {
  mkdirSync(dataDir, { recursive: true });
  return knex({
    client: "sqlite3",
    connection: { filename: path.join(dataDir, "gyre.sqlite") },
    useNullAsDefault: true,
    // One connection: SQLite serialises writers anyway, and this keeps transactions simple.
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn: SqliteConnection, done: (err: Error | null, conn: SqliteConnection) => void) {
        conn.exec("PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000; PRAGMA synchronous=NORMAL;", (err) =>
          done(err, conn),
        );
      },
    },
  });
}

interface SqliteConnection {
  exec(sql: string, cb: (err: Error | null) => void): void;
}

class ListMigrationSource implements Knex.MigrationSource<Migration> {
  constructor(private readonly list: Migration[]) {}
  async getMigrations(): Promise<Migration[]> {
    return this.list;
  }
  getMigrationName(migration: Migration): string {
    return migration.name;
  }
  async getMigration(migration: Migration): Promise<Knex.Migration> {
    return { up: migration.up, down: migration.down };
  }
}
