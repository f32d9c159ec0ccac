import { mkdir, rm } from "node:fs/promises";
import path from "node:path";

/**
 * Where training keeps its files inside the data directory. Paths stored in the database are relative to it, so
 * a server and its workers can share one data directory mounted at different places.
 */
export const trainingPaths = {
  adapter: (modelId: string, step: number) => path.join("adapters", modelId, `step-${step}.gguf`),
  modelAdapters: (modelId: string) => path.join("adapters", modelId),
  job: (jobId: string) => path.join("jobs", jobId),
  jobPayload: (jobId: string) => path.join("jobs", jobId, "payload.json"),
  jobData: (jobId: string) => path.join("jobs", jobId, "train.jsonl"),
  dataset: (datasetId: string) => path.join("datasets", `${datasetId}.jsonl`),
};

export async function ensureParent(dataDir: string, relative: string): Promise<string> {
  const absolute = path.join(dataDir, relative);
  await mkdir(path.dirname(absolute), { recursive: true });
  return absolute;
}

export async function removeModelFiles(dataDir: string, modelId: string, jobIds: string[]): Promise<void> {
  await rm(path.join(dataDir, trainingPaths.modelAdapters(modelId)), { recursive: true, force: true });
  for (const jobId of jobIds) await rm(path.join(dataDir, trainingPaths.job(jobId)), { recursive: true, force: true });
}
