import path from "node:path";
import type { AppContext } from "../app-context.js";
import { notImplemented } from "../errors.js";
import { checkApi, checkDatabase, checkQueue } from "../health/checks.js";
import { SPEC_DIR } from "../paths.js";
import { healthHandler, metricsHandler } from "./operations-handlers.js";
import type { OperationHandler, ServiceDefinition } from "./service-app.js";

const unavailable: OperationHandler = async () => {
  throw notImplemented("Training is not available in this build yet.");
};

export function trainingService(ctx: AppContext): ServiceDefinition {
  const { db } = ctx;
  const systemCheck: OperationHandler = async () => {
    const [api, database, cpu_queue, gpu_queue] = await Promise.all([checkApi(), checkDatabase(db), checkQueue(db, "cpu"), checkQueue(db, "gpu")]);
    const body = { api, database, cpu_queue, gpu_queue };
    return { status: Object.values(body).every((c) => c.success) ? 200 : 503, body };
  };
  return {
    name: "training",
    specPath: path.join(SPEC_DIR, "training.yaml"),
    errorStyle: "detail",
    handlers: {
      createTrainingChatCompletion: unavailable,
      createTrainingChatCompletionSlash: unavailable,
      createModel: unavailable,
      listModels: unavailable,
      getModel: unavailable,
      deleteModel: unavailable,
      listCheckpoints: unavailable,
      deleteCheckpoints: unavailable,
      logTrajectories: unavailable,
      uploadDataset: unavailable,
      getDataset: unavailable,
      createSftTrainingJob: unavailable,
      createRlTrainingJob: unavailable,
      listTrainingJobs: unavailable,
      getTrainingJob: unavailable,
      cancelTrainingJob: unavailable,
      listTrainingJobEvents: unavailable,
      getTrainingHealth: healthHandler("training", db),
      getSystemCheck: systemCheck,
      getTrainingMetrics: metricsHandler,
    },
  };
}
