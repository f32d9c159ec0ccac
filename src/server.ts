import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Knex } from "knex";
import { bootstrapKeys } from "./auth/bootstrap.js";
import type { Config, ServiceName } from "./config.js";
import { inferenceService } from "./http/inference-service.js";
import { searchService } from "./http/search-service.js";
import { createServiceApp, type ServiceDefinition } from "./http/service-app.js";
import { trainingService } from "./http/training-service.js";
import type { Logger } from "./logging.js";
import { openDatabase } from "./store/db.js";

export interface RunningServer {
  /** Base URL of each started service (`http://host:port`). */
  urls: Partial<Record<ServiceName, string>>;
  db: Knex;
  /** Set on a first start with no key: shown once to whoever started the server. */
  createdKey?: { key: string; file: string };
  close(): Promise<void>;
}

const SERVICES: Record<ServiceName, (db: Knex) => ServiceDefinition> = {
  search: searchService,
  training: trainingService,
  inference: inferenceService,
};

/** Opens the store, makes sure a key exists, and starts each configured service on its own port. */
export async function startServer(config: Config, logger: Logger, options: { databaseSchema?: string } = {}): Promise<RunningServer> {
  const db = await openDatabase({ dataDir: config.dataDir, url: config.databaseUrl, schema: options.databaseSchema });
  const servers: http.Server[] = [];
  try {
    const { createdKey, keyFile } = await bootstrapKeys(db, config.dataDir, config.apiKey);
    const urls: RunningServer["urls"] = {};
    for (const name of config.services) {
      const app = await createServiceApp(SERVICES[name](db), {
        db,
        logger,
        limits: { bodyBytes: config.maxBodyBytes[name], concurrentRequests: config.maxConcurrentRequests },
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
      createdKey: createdKey && keyFile ? { key: createdKey, file: keyFile } : undefined,
      async close() {
        await Promise.all(servers.map((s) => closeServer(s)));
        await db.destroy();
      },
    };
  } catch (err) {
    await Promise.all(servers.map((s) => closeServer(s)));
    await db.destroy();
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
