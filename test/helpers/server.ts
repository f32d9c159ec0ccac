import { mkdirSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { loadConfig, type ServiceName } from "../../src/config.js";
import { createLogger } from "../../src/logging.js";
import { startServer, type RunningServer } from "../../src/server.js";
import type { Dialect } from "../../src/store/db.js";
import { openTestDatabase } from "./db.js";
import { tinyModelPath } from "./tiny-model.js";

export const TEST_KEY = "gyre_test_key_for_entity_local";

export interface TestServer extends RunningServer {
  key: string;
  url(service: ServiceName): string;
}

/**
 * Starts the server in this process on free loopback ports, against a fresh store of the given dialect. Its models
 * directory holds the built-in tiny model as `tiny-chat` (built once per checkout and shared by test files).
 */
export async function startTestServer(options: { dialect?: Dialect; services?: ServiceName[]; env?: Record<string, string> } = {}): Promise<TestServer> {
  const store = await openTestDatabase(options.dialect ?? "sqlite");
  // The server opens its own connection to the same store; this one only prepared it.
  await store.db.destroy();
  const modelsDir = path.join(store.dataDir, "models");
  mkdirSync(modelsDir, { recursive: true });
  symlinkSync(await tinyModelPath(), path.join(modelsDir, "tiny-chat.gguf"));
  const config = loadConfig(
    { searchPort: "0", trainingPort: "0", inferencePort: "0", dataDir: store.dataDir, databaseUrl: store.url, services: (options.services ?? ["search", "training", "inference"]).join(",") },
    // The server checks its own answers against the spec, whichever client a test uses.
    { GYRE_API_KEY: TEST_KEY, GYRE_MODELS_DIR: modelsDir, GYRE_VALIDATE_RESPONSES: "on", ...options.env },
  );
  const server = await startServer(config, createLogger("silent"), { databaseSchema: store.schema });
  return {
    ...server,
    key: TEST_KEY,
    url(service) {
      const u = server.urls[service];
      if (!u) throw new Error(`${service} is not running`);
      return u;
    },
    async close() {
      if (store.schema) await server.db.raw("DROP SCHEMA IF EXISTS ?? CASCADE", [store.schema]);
      await server.close();
      rmSync(store.dataDir, { recursive: true, force: true });
    },
  };
}
