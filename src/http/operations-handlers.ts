import type { Knex } from "knex";
import { checkDatabase } from "../health/checks.js";
import { VERSION } from "../paths.js";
import { renderMetrics } from "./metrics.js";
import type { OperationHandler } from "./service-app.js";

/** `GET /health`: up when the database answers. */
export function healthHandler(service: string, db: Knex): OperationHandler {
  return async () => {
    const database = await checkDatabase(db);
    return { status: database.success ? 200 : 503, body: { status: database.success ? "ok" : "unavailable", service, version: VERSION } };
  };
}

export const metricsHandler: OperationHandler = async () => {
  const { contentType, text } = await renderMetrics();
  return { body: text, contentType };
};
