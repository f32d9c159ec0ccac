import type { Migration } from "./types.js";

export const authMigration: Migration = {
  name: "001_auth",
  async up(db) {
    await db.schema.createTable("entities", (t) => {
      t.string("name", 100).primary();
      t.timestamp("created_at", { useTz: true }).notNullable();
    });
    await db.schema.createTable("projects", (t) => {
      t.string("entity", 100).notNullable().references("name").inTable("entities").onDelete("CASCADE");
      t.string("name", 100).notNullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
      t.primary(["entity", "name"]);
    });
    await db.schema.createTable("api_keys", (t) => {
      t.string("id", 40).primary();
      t.string("entity", 100).notNullable().references("name").inTable("entities").onDelete("CASCADE");
      t.string("hash", 64).notNullable().unique();
      t.string("label", 200).notNullable().defaultTo("");
      t.timestamp("created_at", { useTz: true }).notNullable();
      t.timestamp("last_used_at", { useTz: true }).nullable();
      t.timestamp("revoked_at", { useTz: true }).nullable();
    });
  },
  async down(db) {
    await db.schema.dropTable("api_keys");
    await db.schema.dropTable("projects");
    await db.schema.dropTable("entities");
  },
};
