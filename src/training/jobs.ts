import { randomUUID } from "node:crypto";
import { writeFile } from "node:fs/promises";
import type { Knex } from "knex";
import type { Principal } from "../auth/keys.js";
import { conflict, invalid, notFound } from "../errors.js";
import { rowsAfter, toPage, type Page, type PageQuery } from "../store/paging.js";
import { fromJson, toIso, toIsoOrNull } from "../store/values.js";
import { readTrainingData, type TrainingDataOptions } from "./datasets.js";
import { appendEvent } from "./events.js";
import { ensureParent, trainingPaths } from "./files.js";
import { getModel } from "./models.js";
import { validateSftData } from "./sft-data.js";

export type JobStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled";
export type JobKind = "sft" | "rl";

export interface TrainingJobRecord {
  id: string;
  object: "training_job";
  kind: JobKind;
  model_id: string;
  status: JobStatus;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  error: string | null;
  result_step: number | null;
  attempts: number;
  config: Record<string, unknown>;
  experimental_config: Record<string, unknown>;
}

export interface JobRow {
  seq: number;
  id: string;
  entity: string;
  project: string;
  model_id: string;
  kind: JobKind;
  status: JobStatus;
  device: string;
  config: string;
  experimental_config: string;
  error: string | null;
  result_step: number | null;
  attempts: number;
  cancel_requested: boolean | number;
  lease_owner: string | null;
  lease_expires_at: unknown;
  created_at: unknown;
  started_at: unknown;
  finished_at: unknown;
}

export function toJobRecord(row: JobRow): TrainingJobRecord {
  return {
    id: row.id,
    object: "training_job",
    kind: row.kind,
    model_id: row.model_id,
    status: row.status,
    created_at: toIso(row.created_at),
    started_at: toIsoOrNull(row.started_at),
    finished_at: toIsoOrNull(row.finished_at),
    error: row.error,
    result_step: row.result_step === null ? null : Number(row.result_step),
    attempts: Number(row.attempts),
    config: fromJson(row.config, {}),
    experimental_config: fromJson(row.experimental_config, {}),
  };
}

export interface SftJobInput {
  model_id: string;
  training_data_url: string;
  config?: Record<string, unknown>;
  experimental_config?: Record<string, unknown>;
}

/** A message the policy produced, with the logprobs it was sampled with. */
interface ChoiceLike {
  message: unknown;
  finish_reason?: unknown;
  logprobs?: { content?: unknown[] | null } | null;
}

export interface RlJobInput {
  model_id: string;
  trajectory_groups: { trajectories: { messages_and_choices: unknown[]; reward: number }[] }[];
  experimental_config?: Record<string, unknown>;
}

/** Validates the model and the data, keeps a copy of the data with the job, and queues it. */
export async function createSftJob(db: Knex, principal: Principal, input: SftJobInput, data: TrainingDataOptions): Promise<TrainingJobRecord> {
  const model = await getModel(db, principal, input.model_id);
  const text = await readTrainingData(db, principal, input.training_data_url, data);
  const { numExamples } = validateSftData(text, ["body", "training_data_url"]);
  const id = randomUUID();
  await writeFile(await ensureParent(data.dataDir, trainingPaths.jobData(id)), text);
  const config = { ...input.config, training_data_url: input.training_data_url, num_examples: numExamples };
  return insertJob(db, { id, model, kind: "sft", config, experimental: input.experimental_config ?? {} });
}

export async function createRlJob(db: Knex, principal: Principal, input: RlJobInput, dataDir: string): Promise<TrainingJobRecord> {
  const model = await getModel(db, principal, input.model_id);
  const experimental = input.experimental_config ?? {};
  const counts = checkTrajectories(input, experimental.allow_training_without_logprobs === true);
  const id = randomUUID();
  await writeFile(await ensureParent(dataDir, trainingPaths.jobPayload(id)), JSON.stringify({ trajectory_groups: input.trajectory_groups }));
  return insertJob(db, { id, model, kind: "rl", config: counts, experimental });
}

function isChoice(item: unknown): item is ChoiceLike {
  return typeof item === "object" && item !== null && "message" in item && !("role" in item);
}

/** Every Choice must carry its logprobs (the old policy) unless training without them was asked for. */
function checkTrajectories(input: RlJobInput, allowWithoutLogprobs: boolean): { num_groups: number; num_trajectories: number; num_choices: number } {
  let numTrajectories = 0;
  let numChoices = 0;
  input.trajectory_groups.forEach((group, g) => {
    group.trajectories.forEach((trajectory, t) => {
      numTrajectories++;
      trajectory.messages_and_choices.forEach((item, i) => {
        if (!isChoice(item)) return;
        numChoices++;
        if (!allowWithoutLogprobs && !item.logprobs?.content?.length) {
          throw invalid(
            "This Choice has no logprobs. Sample with `logprobs: true`, or set experimental_config.allow_training_without_logprobs.",
            ["body", "trajectory_groups", g, "trajectories", t, "messages_and_choices", i, "logprobs"],
            "missing_logprobs",
          );
        }
      });
    });
  });
  if (numChoices === 0) {
    throw invalid("No trajectory contains a Choice: there is nothing the policy produced to train on.", ["body", "trajectory_groups"], "nothing_to_train");
  }
  return { num_groups: input.trajectory_groups.length, num_trajectories: numTrajectories, num_choices: numChoices };
}

async function insertJob(
  db: Knex,
  job: { id: string; model: { id: string; entity: string; project: string }; kind: JobKind; config: Record<string, unknown>; experimental: Record<string, unknown> },
): Promise<TrainingJobRecord> {
  await db("training_jobs").insert({
    id: job.id,
    entity: job.model.entity,
    project: job.model.project,
    model_id: job.model.id,
    kind: job.kind,
    status: "queued",
    device: "cpu",
    config: JSON.stringify(job.config),
    experimental_config: JSON.stringify(job.experimental),
    created_at: new Date(),
  });
  return toJobRecord(await db("training_jobs").where({ id: job.id }).first());
}

async function jobRow(db: Knex, principal: Principal, id: string): Promise<JobRow> {
  const row: JobRow | undefined = await db("training_jobs").where({ id, entity: principal.entity }).first();
  if (!row) throw notFound(`Training job ${id} not found.`);
  return row;
}

export async function getJob(db: Knex, principal: Principal, id: string): Promise<TrainingJobRecord> {
  return toJobRecord(await jobRow(db, principal, id));
}

/** Checks the job exists and is the caller's (for its events). */
export async function assertJobVisible(db: Knex, principal: Principal, id: string): Promise<void> {
  await jobRow(db, principal, id);
}

export async function listJobs(db: Knex, principal: Principal, query: PageQuery & { model_id?: string; status?: JobStatus }): Promise<Page<TrainingJobRecord>> {
  let q = db("training_jobs").where({ entity: principal.entity });
  if (query.model_id) q = q.where({ model_id: query.model_id });
  if (query.status) q = q.where({ status: query.status });
  const rows = await rowsAfter<JobRow>(db, q, { table: "training_jobs", scope: { entity: principal.entity }, key: "seq" }, query);
  return toPage(rows.map(toJobRecord), query.limit, (j) => j.id);
}

export const CANCELLED_MESSAGE = "Cancelled by request.";

/** A queued job is cancelled at once; a running one is flagged, and its worker stops it at the next step. */
export async function cancelJob(db: Knex, principal: Principal, id: string): Promise<TrainingJobRecord> {
  const row = await jobRow(db, principal, id);
  if (row.status === "queued") {
    const n = await db("training_jobs").where({ id, status: "queued" }).update({ status: "cancelled", finished_at: new Date(), error: CANCELLED_MESSAGE });
    if (n === 1) {
      await appendEvent(db, id, "training_failed", { error_message: CANCELLED_MESSAGE, cancelled: true });
      return getJob(db, principal, id);
    }
    return cancelJob(db, principal, id); // it was claimed meanwhile: cancel it as a running job
  }
  if (row.status === "running") {
    await db("training_jobs").where({ id }).update({ cancel_requested: true });
    return getJob(db, principal, id);
  }
  throw conflict(`Training job ${id} already ${row.status}.`);
}
