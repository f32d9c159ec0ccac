import type { Migration } from "./types.js";

/** Base models registered by hand (files elsewhere, or upstream engines), and token usage per request. */
export const inferenceMigration: Migration = {
  name: "005_inference",
  async up(db) {
    await db.schema.createTable("base_models", (t) => {
      t.string("id", 200).primary();
      // A GGUF file served by llama.cpp here, or null for a model served by an upstream engine.
      t.string("path", 1000).nullable();
      t.string("upstream_url", 1000).nullable();
      t.string("upstream_model", 200).nullable();
      // The name of the environment variable holding the upstream key: the key itself is never stored.
      t.string("upstream_key_env", 200).nullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
    });
    await db.schema.createTable("usage", (t) => {
      t.bigIncrements("seq");
      t.string("key_id", 40).notNullable();
      t.string("entity", 100).notNullable();
      t.string("project", 100).notNullable().defaultTo("");
      t.string("model", 300).notNullable();
      t.integer("prompt_tokens").notNullable();
      t.integer("completion_tokens").notNullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
      t.index(["entity", "created_at"]);
    });
  },
  async down(db) {
    await db.schema.dropTable("usage");
    await db.schema.dropTable("base_models");
  },
};
