import { fork } from "node:child_process";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Knex } from "knex";
import type { ModelRegistry } from "../inference/model-registry.js";
import { fromJson } from "../store/values.js";
import { findCheckpoint } from "./checkpoints.js";
import { trainingPaths } from "./files.js";
import type { JobMessage, JobSpec } from "./job-process.js";
import type { JobRow } from "./jobs.js";
import { DEFAULT_LORA, type LoraSettings } from "./models.js";
import type { JobExecutor } from "./worker.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const fromSource = import.meta.url.endsWith(".ts");
const ENTRY = path.join(here, fromSource ? "job-process.ts" : "job-process.js");

/** Runs each job's training in a child process (see job-process.ts) and relays its progress. */
export function processExecutor(db: Knex, dataDir: string, registry: ModelRegistry): JobExecutor {
  return async (job, progress, signal) => {
    const spec = await jobSpec(db, dataDir, registry, job);
    await mkdir(path.dirname(spec.outputPath), { recursive: true });
    // Sources run through tsx; the build runs as plain JavaScript.
    const child = fork(ENTRY, [], { execArgv: fromSource ? ["--import", "tsx"] : [], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    const kill = () => child.kill("SIGKILL");
    signal.addEventListener("abort", kill, { once: true });
    let chain = Promise.resolve();
    try {
      return await new Promise((resolve, reject) => {
        let settled = false;
        child.on("message", (msg: JobMessage) => {
          // Progress is written in order; the result waits for every event before it.
          chain = chain.then(async () => {
            if (msg.type === "started") await progress.started(msg.data);
            else if (msg.type === "step") await progress.step(msg.metrics);
            else if (msg.type === "done") {
              settled = true;
              resolve({ adapterFile: spec.outputPath, metrics: msg.metrics });
            } else {
              settled = true;
              reject(new Error(msg.message));
            }
          });
          chain.catch(reject);
        });
        child.on("exit", (code, sig) => {
          void chain.then(() => {
            if (settled) return;
            reject(signal.aborted ? signal.reason : new Error(`The training process exited unexpectedly (${sig ?? `code ${code}`}).`));
          });
        });
        child.send(spec);
      });
    } finally {
      signal.removeEventListener("abort", kill);
      if (child.exitCode === null) kill();
    }
  };
}

async function jobSpec(db: Knex, dataDir: string, registry: ModelRegistry, job: JobRow): Promise<JobSpec> {
  const model = await db("models").where({ id: job.model_id }).first();
  if (!model) throw new Error("The model of this job was deleted.");
  const base = await registry.get(model.base_model);
  if (!base?.path) throw new Error(`Base model '${model.base_model}' is not a local GGUF file this server can train on.`);
  const latest = await findCheckpoint(db, dataDir, job.model_id);
  const lora = fromJson<LoraSettings>(model.lora, DEFAULT_LORA);
  return {
    kind: job.kind,
    baseModelPath: base.path,
    adapterPath: latest?.adapterPath ?? undefined,
    outputPath: path.join(dataDir, trainingPaths.job(job.id), "adapter.gguf"),
    dataPath: path.join(dataDir, job.kind === "sft" ? trainingPaths.jobData(job.id) : trainingPaths.jobPayload(job.id)),
    config: trainerConfig(fromJson(job.config, {})),
    // The adapter's shape belongs to the model, so its settings override anything a job asks.
    experimentalConfig: {
      ...fromJson<Record<string, unknown>>(job.experimental_config, {}),
      lora_rank: lora.rank,
      lora_alpha: lora.alpha,
      lora_dropout: lora.dropout,
      lora_target_modules: lora.target_modules,
    },
  };
}

/** The API's SFT `epochs` is the trainer's `num_epochs`. */
function trainerConfig(config: Record<string, unknown>): Record<string, unknown> {
  const { epochs, ...rest } = config;
  return epochs === undefined ? rest : { ...rest, num_epochs: epochs };
}
