import path from "node:path";
import type { Knex } from "knex";
import type { Config } from "./config.js";
import { ChatService } from "./inference/chat-service.js";
import { EnginePool } from "./inference/engine-pool.js";
import { DEFAULT_MODEL_ID, ModelRegistry } from "./inference/model-registry.js";
import { buildTinyModel } from "./inference/tiny-model.js";
import type { Logger } from "./logging.js";
import { openDatabase } from "./store/db.js";
import { processExecutor } from "./training/executor.js";
import { TrainingWorker } from "./training/worker.js";

/** The long-lived parts every service shares: one store, one model registry, one engine per model, one worker. */
export interface AppContext {
  config: Config;
  db: Knex;
  logger: Logger;
  registry: ModelRegistry;
  engines: EnginePool;
  chat: ChatService;
  worker?: TrainingWorker;
  close(): Promise<void>;
}

export async function createAppContext(config: Config, logger: Logger, options: { databaseSchema?: string; startWorker?: boolean } = {}): Promise<AppContext> {
  const db = await openDatabase({ dataDir: config.dataDir, url: config.databaseUrl, schema: options.databaseSchema });
  const registry = new ModelRegistry(db, config.modelsDir);
  await ensureDefaultModel(registry, logger);
  const engines = new EnginePool({ parallel: config.parallel, maxQueue: config.maxQueue, threads: config.threads }, logger);
  const chat = new ChatService(db, config.dataDir, registry, engines, config.tokenQuota);
  const worker = (options.startWorker ?? config.worker)
    ? new TrainingWorker(db, { dataDir: config.dataDir, device: "cpu", executor: processExecutor(db, config.dataDir, registry), logger, leaseMs: config.leaseSeconds * 1000 })
    : undefined;
  await worker?.start();
  return {
    config,
    db,
    logger,
    registry,
    engines,
    chat,
    worker,
    async close() {
      await worker?.stop();
      await engines.close();
      await db.destroy();
    },
  };
}

/** A fresh install serves and trains at once: with no model at all, the built-in tiny model is built. */
async function ensureDefaultModel(registry: ModelRegistry, logger: Logger): Promise<void> {
  if ((await registry.list()).length > 0) return;
  const outPath = path.join(registry.modelsDir, `${DEFAULT_MODEL_ID}.gguf`);
  logger.info({ path: outPath }, "no model configured: building the built-in tiny model");
  let lastReported = -1;
  await buildTinyModel({
    outPath,
    onProgress(done, total) {
      const percent = Math.floor((done / total) * 10) * 10;
      if (percent !== lastReported) {
        lastReported = percent;
        logger.info({ model: DEFAULT_MODEL_ID, percent }, "building model");
      }
    },
  });
}
