import type { Migration } from "./types.js";

/** The durable training job queue: jobs with leases, and the workers that take them. */
export const jobQueueMigration: Migration = {
  name: "003_job_queue",
  async up(db) {
    await db.schema.createTable("training_jobs", (t) => {
      // The sequence orders jobs by creation (listing, paging, and "jobs of one model run in order").
      t.increments("seq");
      t.string("id", 36).notNullable().unique();
      t.string("entity", 100).notNullable();
      t.string("project", 100).notNullable();
      t.string("model_id", 36).notNullable().index();
      t.string("kind", 8).notNullable();
      t.string("status", 16).notNullable();
      // Which class of worker may take the job; lets CPU and accelerator workers share one store.
      t.string("device", 8).notNullable().defaultTo("cpu");
      t.text("config").notNullable().defaultTo("{}");
      t.text("experimental_config").notNullable().defaultTo("{}");
      t.text("error").nullable();
      t.integer("result_step").nullable();
      t.integer("attempts").notNullable().defaultTo(0);
      t.boolean("cancel_requested").notNullable().defaultTo(false);
      t.string("lease_owner", 100).nullable();
      t.timestamp("lease_expires_at", { useTz: true }).nullable();
      t.timestamp("created_at", { useTz: true }).notNullable();
      t.timestamp("started_at", { useTz: true }).nullable();
      t.timestamp("finished_at", { useTz: true }).nullable();
      t.index(["device", "status", "created_at"]);
    });
    await db.schema.createTable("workers", (t) => {
      t.string("id", 100).primary();
      t.string("device", 8).notNullable();
      t.string("host", 200).notNullable();
      t.integer("pid").notNullable();
      t.timestamp("started_at", { useTz: true }).notNullable();
      t.timestamp("heartbeat_at", { useTz: true }).notNullable();
    });
  },
  async down(db) {
    await db.schema.dropTable("workers");
    await db.schema.dropTable("training_jobs");
  },
};
