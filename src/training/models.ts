import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { Principal } from "../auth/keys.js";
import { authorizeProject, ensureProject } from "../auth/projects.js";
import { conflict, notFound } from "../errors.js";
import { rowsAfter, toPage, type Page, type PageQuery } from "../store/paging.js";
import { fromJson, toIso } from "../store/values.js";
import { removeModelFiles } from "./files.js";

export interface LoraSettings {
  rank: number;
  alpha: number;
  dropout: number;
  target_modules: string[];
}

export const DEFAULT_LORA: LoraSettings = {
  rank: 8,
  alpha: 16,
  dropout: 0,
  target_modules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
};

export interface ModelRecord {
  id: string;
  entity: string;
  project: string;
  name: string;
  base_model: string;
  run_id: null;
  lora: LoraSettings;
  latest_step: number;
  created_at: string;
}

export interface CreateModelInput {
  entity?: string;
  project: string;
  name: string;
  base_model: string;
  return_existing?: boolean;
  lora?: Partial<LoraSettings>;
}

/** Which base models exist; the inference model registry answers this. */
export interface BaseModelCatalog {
  hasBaseModel(id: string): Promise<boolean>;
}

interface ModelRow {
  id: string;
  entity: string;
  project: string;
  name: string;
  base_model: string;
  lora: string;
  created_at: unknown;
  latest_step: number | string | null;
}

function toRecord(row: ModelRow): ModelRecord {
  return {
    id: row.id,
    entity: row.entity,
    project: row.project,
    name: row.name,
    base_model: row.base_model,
    run_id: null,
    lora: fromJson(row.lora, DEFAULT_LORA),
    latest_step: Number(row.latest_step ?? 0),
    created_at: toIso(row.created_at),
  };
}

function modelsWithLatestStep(db: Knex) {
  return db("models").select("models.*", db("checkpoints").max("step").where("checkpoints.model_id", db.ref("models.id")).as("latest_step"));
}

/** Creates a model with its step-0 checkpoint (the untrained base). */
export async function createModel(db: Knex, principal: Principal, input: CreateModelInput, catalog: BaseModelCatalog): Promise<ModelRecord> {
  const ref = authorizeProject(principal, { entity: input.entity ?? principal.entity, project: input.project });
  const existing = await modelsWithLatestStep(db).where({ entity: ref.entity, project: ref.project, name: input.name }).first();
  if (existing) {
    if (input.return_existing) return toRecord(existing);
    throw conflict(`A model named '${input.name}' already exists in ${ref.entity}/${ref.project}.`);
  }
  if (!(await catalog.hasBaseModel(input.base_model))) {
    throw notFound(`Base model '${input.base_model}' does not exist; GET /v1/models on the inference service lists them.`, "model_not_found");
  }
  const id = randomUUID();
  const now = new Date();
  const lora = { ...DEFAULT_LORA, ...input.lora };
  await ensureProject(db, ref);
  try {
    await db.transaction(async (trx) => {
      await trx("models").insert({ id, entity: ref.entity, project: ref.project, name: input.name, base_model: input.base_model, lora: JSON.stringify(lora), created_at: now });
      await trx("checkpoints").insert({ id: randomUUID(), model_id: id, step: 0, metrics: "{}", adapter_path: null, created_at: now });
    });
  } catch (err) {
    // Two creations raced: the unique name constraint decided, so answer as if we had lost cleanly.
    const winner = await modelsWithLatestStep(db).where({ entity: ref.entity, project: ref.project, name: input.name }).first();
    if (!winner) throw err;
    if (input.return_existing) return toRecord(winner);
    throw conflict(`A model named '${input.name}' already exists in ${ref.entity}/${ref.project}.`);
  }
  return getModel(db, principal, id);
}

/** A model of another entity is reported as missing, so ids cannot be probed across entities. */
export async function getModel(db: Knex, principal: Principal, id: string): Promise<ModelRecord> {
  const row = await modelsWithLatestStep(db).where({ id, entity: principal.entity }).first();
  if (!row) throw notFound(`Model ${id} not found.`, "model_not_found");
  return toRecord(row);
}

export async function findModelByName(db: Knex, entity: string, project: string, name: string): Promise<ModelRecord | null> {
  const row = await modelsWithLatestStep(db).where({ entity, project, name }).first();
  return row ? toRecord(row) : null;
}

export async function listModels(db: Knex, principal: Principal, query: PageQuery & { project?: string }): Promise<Page<ModelRecord>> {
  let q = modelsWithLatestStep(db).where({ entity: principal.entity });
  if (query.project) q = q.where({ project: query.project });
  const rows = await rowsAfter<ModelRow>(db, q, { table: "models", scope: { entity: principal.entity }, key: "seq" }, query);
  return toPage(rows.map(toRecord), query.limit, (m) => m.id);
}

export interface DeletedModel {
  model_id: string;
  deleted_checkpoints: number;
  deleted_run: boolean;
  deleted_jobs: number;
}

/** Deletes the model, its checkpoints and their adapter files, its jobs and their events. */
export async function deleteModel(db: Knex, principal: Principal, id: string, dataDir: string): Promise<DeletedModel> {
  await getModel(db, principal, id);
  const result = await db.transaction(async (trx) => {
    const jobIds: string[] = (await trx("training_jobs").where({ model_id: id }).select("id")).map((j: { id: string }) => j.id);
    // A running job's worker sees its job vanish at the next heartbeat and stops.
    if (jobIds.length) await trx("training_events").whereIn("job_id", jobIds).delete();
    const deletedJobs = await trx("training_jobs").where({ model_id: id }).delete();
    const deletedCheckpoints = await trx("checkpoints").where({ model_id: id }).delete();
    await trx("trajectory_logs").where({ model_id: id }).delete();
    await trx("models").where({ id }).delete();
    return { deletedJobs, deletedCheckpoints, jobIds };
  });
  await removeModelFiles(dataDir, id, result.jobIds);
  return { model_id: id, deleted_checkpoints: result.deletedCheckpoints, deleted_run: result.deletedJobs > 0, deleted_jobs: result.deletedJobs };
}
