import { mkdir, rename } from "node:fs/promises";
import path from "node:path";
import { exportLoraAdapter, loadLoraAdapter } from "./adapter-gguf.js";
import { initTensorBackend, tf } from "./backend.js";
import { createLoraAdapter, disposeLoraAdapter, loraVariables, type LoraAdapter, type LoraConfig } from "./lora.js";
import { AdamW } from "./optimizer.js";
import { disposeBaseModel, loadBaseModel, type BaseModel } from "./weights.js";

/** A base model, the adapter being trained and its optimizer, for the length of one job. */
export interface TrainingSession {
  model: BaseModel;
  adapter: LoraAdapter;
  vars: tf.Variable[];
  optimizer: AdamW;
}

export interface SessionOptions {
  baseModelPath: string;
  /** Adapter to continue from; a fresh (identity) adapter when absent. */
  adapterPath?: string;
  lora: LoraConfig;
  weightDecay: number;
  seed: number;
}

export async function openSession(options: SessionOptions): Promise<TrainingSession> {
  await initTensorBackend();
  const model = await loadBaseModel(options.baseModelPath);
  try {
    let adapter: LoraAdapter;
    if (options.adapterPath) {
      // A resumed adapter keeps its own rank, alpha and modules; only dropout follows the request.
      const loaded = await loadLoraAdapter(options.adapterPath, model);
      adapter = { ...loaded, config: { ...loaded.config, dropout: options.lora.dropout } };
    } else {
      adapter = createLoraAdapter(model, options.lora, options.seed);
    }
    const vars = loraVariables(adapter);
    return { model, adapter, vars, optimizer: new AdamW(vars, { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weightDecay: options.weightDecay }) };
  } catch (err) {
    disposeBaseModel(model);
    throw err;
  }
}

export function closeSession(session: TrainingSession): void {
  session.optimizer.dispose();
  disposeLoraAdapter(session.adapter);
  disposeBaseModel(session.model);
}

/** Writes the adapter next to its final name and renames it, so a reader never sees a half-written file. */
export async function saveAdapter(session: TrainingSession, outputPath: string): Promise<void> {
  await mkdir(path.dirname(outputPath), { recursive: true });
  const partial = `${outputPath}.partial-${process.pid}`;
  await exportLoraAdapter(partial, session.adapter, session.model);
  await rename(partial, outputPath);
}
