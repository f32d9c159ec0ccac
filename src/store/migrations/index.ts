import { authMigration } from "./001_auth.js";
import type { Migration } from "./types.js";

/** Every schema step, in the order it is applied. Append only. */
export const migrations: Migration[] = [authMigration];
