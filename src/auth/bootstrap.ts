import { writeFileSync } from "node:fs";
import path from "node:path";
import type { Knex } from "knex";
import { countActiveApiKeys, createApiKey, registerApiKey } from "./keys.js";

export const LOCAL_ENTITY = "local";

/**
 * Makes sure someone can call the server: registers `GYRE_API_KEY` for entity `local`, and on a first start
 * with no key at all creates one, writes it to a 0600 file in the data directory, and returns it to be shown once.
 */
export async function bootstrapKeys(db: Knex, dataDir: string, envKey?: string): Promise<{ createdKey?: string; keyFile?: string }> {
  if (envKey) {
    await registerApiKey(db, LOCAL_ENTITY, envKey, "GYRE_API_KEY");
    return {};
  }
  if ((await countActiveApiKeys(db)) > 0) return {};
  const { key } = await createApiKey(db, LOCAL_ENTITY, "first start");
  const keyFile = path.join(dataDir, "api-key");
  writeFileSync(keyFile, key + "\n", { mode: 0o600 });
  return { createdKey: key, keyFile };
}
