import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DIALECTS, openTestDatabase, type TestDatabase } from "./helpers/db.js";

describe.each(DIALECTS)("store on %s", (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => t?.close());

  it("applies every migration", async () => {
    expect(await t.db.schema.hasTable("api_keys")).toBe(true);
    const [{ n }] = await t.db("knex_migrations").count({ n: "*" });
    expect(Number(n)).toBeGreaterThan(0);
  });
});
