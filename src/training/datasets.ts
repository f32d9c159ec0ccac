import { randomUUID } from "node:crypto";
import { readFile, realpath, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Knex } from "knex";
import type { components } from "../../generated/training.js";
import type { Principal } from "../auth/keys.js";
import { authorizeProject, ensureProject } from "../auth/projects.js";
import { AppError, invalid, notFound } from "../errors.js";
import { toIso } from "../store/values.js";
import { ensureParent, trainingPaths } from "./files.js";
import { validateSftData } from "./sft-data.js";

export type DatasetRecord = components["schemas"]["Dataset"];

export interface TrainingDataOptions {
  dataDir: string;
  /** `file://` URLs must point inside this directory. */
  importDir: string;
  /** Upper bound for data fetched over http(s). */
  maxBytes: number;
}

interface DatasetRow {
  id: string;
  entity: string;
  project: string;
  name: string;
  version: number;
  path: string;
  num_examples: number;
  bytes: number | string;
  created_at: unknown;
}

const datasetUrl = (r: Pick<DatasetRow, "entity" | "project" | "name" | "version">) => `dataset:///${r.entity}/${r.project}/${r.name}:v${r.version}`;

function toRecord(row: DatasetRow): DatasetRecord {
  return {
    id: row.id,
    object: "dataset",
    entity: row.entity,
    project: row.project,
    name: row.name,
    version: Number(row.version),
    url: datasetUrl(row),
    num_examples: Number(row.num_examples),
    bytes: Number(row.bytes),
    created_at: toIso(row.created_at),
  };
}

/** Stores a validated JSON Lines file as the next version of the named dataset. */
export async function uploadDataset(
  db: Knex,
  principal: Principal,
  input: { entity?: string; project: string; name: string; text: string },
  dataDir: string,
): Promise<DatasetRecord> {
  const ref = authorizeProject(principal, { entity: input.entity ?? principal.entity, project: input.project });
  const { numExamples } = validateSftData(input.text);
  const id = randomUUID();
  const relative = trainingPaths.dataset(id);
  await writeFile(await ensureParent(dataDir, relative), input.text);
  await ensureProject(db, ref);
  const row = await db.transaction(async (trx) => {
    const [{ v }] = await trx("datasets").where({ entity: ref.entity, project: ref.project, name: input.name }).max({ v: "version" });
    const version = v === null || v === undefined ? 0 : Number(v) + 1;
    const values = { id, entity: ref.entity, project: ref.project, name: input.name, version, path: relative, num_examples: numExamples, bytes: Buffer.byteLength(input.text), created_at: new Date() };
    await trx("datasets").insert(values);
    return values;
  });
  return toRecord(row);
}

export async function getDataset(db: Knex, principal: Principal, id: string): Promise<DatasetRecord> {
  const row: DatasetRow | undefined = await db("datasets").where({ id, entity: principal.entity }).first();
  if (!row) throw notFound(`Dataset ${id} not found.`);
  return toRecord(row);
}

const LOC = ["body", "training_data_url"];

/**
 * Reads the training data a URL names: one of our datasets (`dataset:///e/p/name:vN|latest`, also spelled
 * `wandb-artifact:///…`), a `file://` path inside the import directory, or `http(s)://` within a size limit.
 */
export async function readTrainingData(db: Knex, principal: Principal, url: string, options: TrainingDataOptions): Promise<string> {
  const artifact = /^(?:dataset|wandb-artifact):\/\/\/([^/]+)\/([^/]+)\/([^/:]+)(?::(v\d+|latest))?$/.exec(url);
  if (artifact) return readDataset(db, principal, artifact[1], artifact[2], artifact[3], artifact[4] ?? "latest", options.dataDir);
  if (url.startsWith("file://")) return readImport(url, options.importDir);
  if (/^https?:\/\//.test(url)) return fetchLimited(url, options.maxBytes);
  throw invalid("Unsupported training_data_url: use dataset:///entity/project/name:vN, wandb-artifact:///…, file:// or http(s)://.", LOC, "unsupported_url");
}

async function readDataset(db: Knex, principal: Principal, entity: string, project: string, name: string, version: string, dataDir: string): Promise<string> {
  authorizeProject(principal, { entity, project });
  let q = db("datasets").where({ entity, project, name });
  q = version === "latest" ? q.orderBy("version", "desc") : q.where({ version: Number(version.slice(1)) });
  const row: DatasetRow | undefined = await q.first();
  if (!row) throw invalid(`No dataset ${entity}/${project}/${name}:${version}; upload it with POST /v1/preview/datasets.`, LOC, "dataset_not_found");
  return readFile(path.join(dataDir, row.path), "utf8");
}

async function readImport(url: string, importDir: string): Promise<string> {
  let target: string;
  try {
    target = await realpath(decodeURIComponent(new URL(url).pathname));
  } catch {
    throw invalid(`Cannot read ${url}: no such file.`, LOC, "unreadable_url");
  }
  const root = await realpath(importDir).catch(() => path.resolve(importDir));
  if (!target.startsWith(root + path.sep)) {
    throw invalid(`file:// training data must be inside ${root} (the server's import directory).`, LOC, "url_not_allowed");
  }
  return readFile(target, "utf8");
}

async function fetchLimited(url: string, maxBytes: number): Promise<string> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(60_000), redirect: "follow" });
  } catch (err) {
    throw invalid(`Cannot fetch ${url}: ${(err as Error).message}`, LOC, "unreadable_url");
  }
  if (!res.ok || !res.body) throw invalid(`Fetching ${url} answered ${res.status}.`, LOC, "unreadable_url");
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.byteLength;
    if (size > maxBytes) throw new AppError("too_large", `Training data at ${url} is larger than ${maxBytes} bytes.`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Limits for reading training data, from the server configuration. */
export function readTrainingDataOptions(config: { dataDir: string; importDir: string; maxBodyBytes: { training: number } }): TrainingDataOptions {
  return { dataDir: config.dataDir, importDir: config.importDir, maxBytes: config.maxBodyBytes.training };
}
