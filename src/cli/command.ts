import type { Knex } from "knex";
import type { Principal } from "../auth/keys.js";
import type { Config } from "../config.js";
import { openDatabase } from "../store/db.js";

/** What every command gets: the configuration, its words and options, and where to write. */
export interface CommandArgs {
  config: Config;
  /** The words after the command name. */
  words: string[];
  options: Record<string, string | boolean | undefined>;
  out: (text: string) => void;
  err: (text: string) => void;
}

export type Command = (args: CommandArgs) => Promise<number>;

/** Commands work on the store directly, as its operator: the entity they act for is `--entity` (default `local`). */
export function operatorOf(args: CommandArgs): Principal {
  return { keyId: "cli", entity: String(args.options.entity ?? "local") };
}

export async function withDatabase<T>(config: Config, fn: (db: Knex) => Promise<T>): Promise<T> {
  const db = await openDatabase({ dataDir: config.dataDir, url: config.databaseUrl });
  try {
    return await fn(db);
  } finally {
    await db.destroy();
  }
}

export class UsageError extends Error {}
