import type { Migration } from "./types.js";

/** Models (LoRA adapter lines on a base model), their checkpoints, datasets, job events and logged trajectories. */
export const trainingMigration: Migration = {
  name: "004_training",
  async up(db) {
    await db.schema.createTable("models", (t) => {
      t.increments("seq");
      t.string("id", 36).notNullable().unique();
      t.string("entity", 100).notNullable();
      t.string("project", 100).notNullable();
      t.string("name", 100).notNullable();
      t.string("base_model", 200).notNullable();
      t.text("lora").notNullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
      t.unique(["entity", "project", "name"]);
    });
    await db.schema.createTable("checkpoints", (t) => {
      t.string("id", 36).primary();
      t.string("model_id", 36).notNullable().references("id").inTable("models").onDelete("CASCADE");
      t.integer("step").notNullable();
      t.text("metrics").notNullable().defaultTo("{}");
      // Relative to the data directory; null for step 0, the untrained base.
      t.string("adapter_path", 500).nullable();
      t.string("job_id", 36).nullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
      t.unique(["model_id", "step"]);
    });
    await db.schema.createTable("datasets", (t) => {
      t.string("id", 36).primary();
      t.string("entity", 100).notNullable();
      t.string("project", 100).notNullable();
      t.string("name", 100).notNullable();
      t.integer("version").notNullable();
      t.string("path", 500).notNullable();
      t.integer("num_examples").notNullable();
      t.bigInteger("bytes").notNullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
      t.unique(["entity", "project", "name", "version"]);
    });
    await db.schema.createTable("training_events", (t) => {
      // The sequence is the event id: it sorts in creation order, so `after` paging is exact.
      t.bigIncrements("seq");
      t.string("job_id", 36).notNullable().index();
      t.string("type", 32).notNullable();
      t.text("data").notNullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
    });
    await db.schema.createTable("trajectory_logs", (t) => {
      t.increments("seq");
      t.string("model_id", 36).notNullable().references("id").inTable("models").onDelete("CASCADE");
      t.string("split", 100).notNullable();
      t.integer("step").notNullable();
      t.text("groups").notNullable();
      t.text("metrics").notNullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
    });
  },
  async down(db) {
    await db.schema.dropTable("trajectory_logs");
    await db.schema.dropTable("training_events");
    await db.schema.dropTable("datasets");
    await db.schema.dropTable("checkpoints");
    await db.schema.dropTable("models");
  },
};
