import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Knex } from "knex";
import { createAppContext, type AppContext } from "./app-context.js";
import { bootstrapKeys } from "./auth/bootstrap.js";
import type { Config, ServiceName } from "./config.js";
import { inferenceService } from "./http/inference-service.js";
import { searchService } from "./http/search-service.js";
import { createServiceApp, type ServiceDefinition } from "./http/service-app.js";
import { trainingService } from "./http/training-service.js";
import type { Logger } from "./logging.js";

export interface RunningServer {
  /** Base URL of each started service (`http://host:port`). */
  urls: Partial<Record<ServiceName, string>>;
  db: Knex;
  context: AppContext;
  close(): Promise<void>;
}

const SERVICES: Record<ServiceName, (ctx: AppContext) => ServiceDefinition> = {
  search: searchService,
  training: trainingService,
  inference: inferenceService,
};

/** Opens the store and the shared parts, makes sure a key exists, and starts each configured service on its own port. */
export interface StartOptions {
  databaseSchema?: string;
  /** Called on a first start with no key, before any service listens: show the new key once. */
  onKeyCreated?: (key: string, file: string) => void;
}

export async function startServer(config: Config, logger: Logger, options: StartOptions = {}): Promise<RunningServer> {
  const ctx = await createAppContext(config, logger, { databaseSchema: options.databaseSchema });
  const { db } = ctx;
  const servers: http.Server[] = [];
  try {
    const { createdKey, keyFile } = await bootstrapKeys(db, config.dataDir, config.apiKey);
    if (createdKey && keyFile) options.onKeyCreated?.(createdKey, keyFile);
    const urls: RunningServer["urls"] = {};
    for (const name of config.services) {
      const app = await createServiceApp(SERVICES[name](ctx), {
        db,
        logger,
        limits: { bodyBytes: config.maxBodyBytes[name], concurrentRequests: config.maxConcurrentRequests, validateResponses: config.validateResponses },
      });
      const server = http.createServer(app.callback());
      // Bounded time per request; streamed completions and large uploads fit well inside it.
      server.requestTimeout = 10 * 60_000;
      server.headersTimeout = 60_000;
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(config.ports[name], config.host, () => resolve());
      });
      const { port } = server.address() as AddressInfo;
      urls[name] = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
      logger.info({ service: name, url: urls[name] }, "listening");
    }
    return {
      urls,
      db,
      context: ctx,
      async close() {
        await Promise.all(servers.map((s) => closeServer(s)));
        await ctx.close();
      },
    };
  } catch (err) {
    await Promise.all(servers.map((s) => closeServer(s)));
    await ctx.close();
    throw err;
  }
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections();
    // In-flight requests get a moment to finish; streams that would hold the shutdown are cut.
    setTimeout(() => server.closeAllConnections(), 5_000).unref();
  });
}
