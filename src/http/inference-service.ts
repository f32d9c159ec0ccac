import path from "node:path";
import type { AppContext } from "../app-context.js";
import { notImplemented } from "../errors.js";
import { SPEC_DIR } from "../paths.js";
import { healthHandler, metricsHandler } from "./operations-handlers.js";
import type { OperationHandler, ServiceDefinition } from "./service-app.js";

const unavailable: OperationHandler = async () => {
  throw notImplemented("Inference is not available in this build yet.");
};

export function inferenceService(ctx: AppContext): ServiceDefinition {
  const { db } = ctx;
  return {
    name: "inference",
    specPath: path.join(SPEC_DIR, "inference.yaml"),
    errorStyle: "openai",
    handlers: {
      createChatCompletion: unavailable,
      listModels: unavailable,
      getUsage: unavailable,
      getInferenceHealth: healthHandler("inference", db),
      getInferenceMetrics: metricsHandler,
    },
  };
}
