import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import path from "node:path";
import type { Knex } from "knex";
import { invalid } from "../errors.js";
import { rowsAfter, toPage, type Page, type PageQuery } from "../store/paging.js";
import { fromJson, toIso } from "../store/values.js";
import type { ModelRecord } from "./models.js";

export interface CheckpointRecord {
  id: string;
  step: number;
  metrics: Record<string, number>;
  model_id: string;
  name: string;
  created_at: string;
}

interface CheckpointRow {
  id: string;
  model_id: string;
  step: number;
  metrics: string;
  adapter_path: string | null;
  created_at: unknown;
}

/** The id that serves a checkpoint: `entity/project/name:stepN`. */
export function checkpointName(model: Pick<ModelRecord, "entity" | "project" | "name">, step: number): string {
  return `${model.entity}/${model.project}/${model.name}:step${step}`;
}

function toRecord(model: ModelRecord, row: CheckpointRow): CheckpointRecord {
  return {
    id: row.id,
    step: Number(row.step),
    metrics: fromJson(row.metrics, {}),
    model_id: row.model_id,
    name: checkpointName(model, Number(row.step)),
    created_at: toIso(row.created_at),
  };
}

export async function listCheckpoints(db: Knex, model: ModelRecord, query: PageQuery & { order: "asc" | "desc" }): Promise<Page<CheckpointRecord>> {
  const cursor = { table: "checkpoints", scope: { model_id: model.id }, key: "step", order: query.order };
  const rows = await rowsAfter<CheckpointRow>(db, db("checkpoints").where({ model_id: model.id }), cursor, query);
  return toPage(rows.map((r) => toRecord(model, r)), query.limit, (c) => c.id);
}

export interface ResolvedCheckpoint {
  step: number;
  /** Absolute path of the LoRA adapter; null for step 0, the untrained base. */
  adapterPath: string | null;
}

/** The named step, or the latest when `step` is undefined; null when there is no such step. */
export async function findCheckpoint(db: Knex, dataDir: string, modelId: string, step?: number): Promise<ResolvedCheckpoint | null> {
  const q = db("checkpoints").where({ model_id: modelId });
  const row: CheckpointRow | undefined = step === undefined ? await q.orderBy("step", "desc").first() : await q.where({ step }).first();
  if (!row) return null;
  return { step: Number(row.step), adapterPath: row.adapter_path ? path.join(dataDir, row.adapter_path) : null };
}

export async function addCheckpoint(
  db: Knex,
  checkpoint: { modelId: string; step: number; metrics: Record<string, number>; adapterPath: string; jobId: string },
): Promise<string> {
  const id = randomUUID();
  await db("checkpoints").insert({
    id,
    model_id: checkpoint.modelId,
    step: checkpoint.step,
    metrics: JSON.stringify(checkpoint.metrics),
    adapter_path: checkpoint.adapterPath,
    job_id: checkpoint.jobId,
    created_at: new Date(),
  });
  return id;
}

/** Deletes the named steps with their adapter files. Step 0 is the base model itself and stays. */
export async function deleteCheckpoints(db: Knex, dataDir: string, model: ModelRecord, steps: number[]): Promise<{ deleted_count: number; not_found_steps: number[] }> {
  const zero = steps.indexOf(0);
  if (zero >= 0) throw invalid("Step 0 is the untrained base model and cannot be deleted.", ["body", "steps", zero], "base_checkpoint");
  const wanted = [...new Set(steps)];
  const rows: CheckpointRow[] = wanted.length ? await db("checkpoints").where({ model_id: model.id }).whereIn("step", wanted) : [];
  const found = new Set(rows.map((r) => Number(r.step)));
  if (rows.length) await db("checkpoints").whereIn("id", rows.map((r) => r.id)).delete();
  for (const r of rows) if (r.adapter_path) await rm(path.join(dataDir, r.adapter_path), { force: true });
  return { deleted_count: rows.length, not_found_steps: wanted.filter((s) => !found.has(s)) };
}
