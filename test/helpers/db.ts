import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Knex } from "knex";
import { openDatabase, type Dialect } from "../../src/store/db.js";

/** PostgreSQL used by tests; CI and every developer machine have one here with trust auth. */
export const TEST_POSTGRES_URL = process.env.GYRE_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";

export const DIALECTS: Dialect[] = ["sqlite", "postgres"];

export interface TestDatabase {
  db: Knex;
  dialect: Dialect;
  dataDir: string;
  /** Passed to the server so it opens the same store. */
  url?: string;
  schema?: string;
  close(): Promise<void>;
}

/** A fresh, migrated store: a temporary SQLite file, or a throw-away PostgreSQL schema. */
export async function openTestDatabase(dialect: Dialect): Promise<TestDatabase> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "gyre-test-"));
  if (dialect === "sqlite") {
    const db = await openDatabase({ dataDir });
    return {
      db,
      dialect,
      dataDir,
      async close() {
        await db.destroy();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  }
  const schema = `t_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const db = await openDatabase({ dataDir, url: TEST_POSTGRES_URL, schema });
  return {
    db,
    dialect,
    dataDir,
    url: TEST_POSTGRES_URL,
    schema,
    async close() {
      await db.raw("DROP SCHEMA IF EXISTS ?? CASCADE", [schema]);
      await db.destroy();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
