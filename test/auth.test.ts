import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiKey, hashApiKey, listApiKeys, registerApiKey, revokeApiKey, verifyApiKey } from "../src/auth/keys.js";
import { authorizeProject, parseProjectId } from "../src/auth/projects.js";
import { bootstrapKeys } from "../src/auth/bootstrap.js";
import { AppError } from "../src/errors.js";
import { statSync, readFileSync } from "node:fs";
import path from "node:path";
import { DIALECTS, openTestDatabase, type TestDatabase } from "./helpers/db.js";

describe.each(DIALECTS)("API keys on %s", (dialect) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => t?.close());

  it("first start creates one key, stores it in a 0600 file, and only its hash in the database", async () => {
    const first = await bootstrapKeys(t.db, t.dataDir);
    expect(first.createdKey).toMatch(/^gyre_/);
    const file = path.join(t.dataDir, "api-key");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8").trim()).toBe(first.createdKey);
    const rows = await t.db("api_keys").select("*");
    expect(JSON.stringify(rows)).not.toContain(first.createdKey);
    expect(rows[0].hash).toBe(hashApiKey(first.createdKey!));
    expect(await verifyApiKey(t.db, first.createdKey!)).toMatchObject({ entity: "local" });
    const second = await bootstrapKeys(t.db, t.dataDir);
    expect(second.createdKey).toBeUndefined();
  });

  it("creates, verifies, lists and revokes keys per entity", async () => {
    const { id, key } = await createApiKey(t.db, "acme", "ci");
    expect(await verifyApiKey(t.db, key)).toEqual({ keyId: id, entity: "acme" });
    expect(await verifyApiKey(t.db, key + "x")).toBeNull();
    const listed = await listApiKeys(t.db);
    expect(listed.find((k) => k.id === id)).toMatchObject({ entity: "acme", label: "ci", revoked_at: null });
    expect(await revokeApiKey(t.db, id)).toBe(true);
    expect(await revokeApiKey(t.db, id)).toBe(false);
    expect(await verifyApiKey(t.db, key)).toBeNull();
  });

  it("registers an operator-chosen key once, and never for two entities", async () => {
    const a = await registerApiKey(t.db, "local", "gyre_fixed_key");
    const b = await registerApiKey(t.db, "local", "gyre_fixed_key");
    expect(a.id).toBe(b.id);
    await expect(registerApiKey(t.db, "other", "gyre_fixed_key")).rejects.toThrow(/already registered/);
  });
});

describe("project permission", () => {
  const principal = { keyId: "key_1", entity: "acme" };
  it("lets a key reach its own entity's projects only", () => {
    expect(authorizeProject(principal, parseProjectId("acme/bot", ["body", "project_id"]))).toEqual({ entity: "acme", project: "bot" });
    const err = (() => {
      try {
        authorizeProject(principal, parseProjectId("other/bot", ["body", "project_id"]));
      } catch (e) {
        return e as AppError;
      }
    })();
    expect(err?.kind).toBe("forbidden");
  });
  it("rejects malformed project ids with their location", () => {
    for (const bad of ["acme", "acme/", "/bot", "a/b/c", "acme/b ot"]) {
      expect(() => parseProjectId(bad, ["header", "project_id"])).toThrow(AppError);
    }
  });
});
