import path from "node:path";
import type { AppContext } from "../app-context.js";
import { notImplemented } from "../errors.js";
import { SPEC_DIR } from "../paths.js";
import { healthHandler, metricsHandler } from "./operations-handlers.js";
import type { OperationHandler, ServiceDefinition } from "./service-app.js";

const unavailable: OperationHandler = async () => {
  throw notImplemented("Message search is not available in this build yet.");
};

export function searchService(ctx: AppContext): ServiceDefinition {
  const { db } = ctx;
  return {
    name: "search",
    specPath: path.join(SPEC_DIR, "search.yaml"),
    errorStyle: "detail",
    handlers: {
      searchAgentMessages: unavailable,
      ingestTraces: unavailable,
      ingestTracesAtRoot: unavailable,
      getSearchHealth: healthHandler("search", db),
      getSearchMetrics: metricsHandler,
    },
  };
}
