import { createAppContext } from "../app-context.js";
import { describeConfig } from "../config.js";
import { createLogger } from "../logging.js";
import { startServer } from "../server.js";
import type { Command } from "./command.js";

function untilSignal(onSignal: (signal: string) => void): Promise<void> {
  return new Promise((resolve) => {
    const stop = (signal: string) => {
      onSignal(signal);
      resolve();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
}

export const serveCommand: Command = async ({ config, err }) => {
  const logger = createLogger(config.logLevel);
  logger.info({ config: describeConfig(config) }, "starting");
  const server = await startServer(config, logger, {
    // Shown once, outside the JSON log stream, so the key never lands in log storage.
    onKeyCreated: (key, file) => err(`\nNo API key existed, so one was created for entity 'local':\n\n  ${key}\n\nIt is saved in ${file} (mode 0600) and will not be shown again.\n\n`),
  });
  await untilSignal((signal) => logger.info({ signal }, "shutting down"));
  await server.close();
  logger.info("stopped");
  return 0;
};

/** A training worker without the HTTP services: run several against one PostgreSQL to train in parallel. */
export const workerCommand: Command = async ({ config }) => {
  const logger = createLogger(config.logLevel);
  logger.info({ config: describeConfig(config) }, "starting worker");
  const ctx = await createAppContext(config, logger, { startWorker: true });
  logger.info({ worker: ctx.worker!.id }, "worker ready");
  await untilSignal((signal) => logger.info({ signal }, "shutting down"));
  await ctx.close();
  logger.info("stopped");
  return 0;
};
