import { authMigration } from "./001_auth.js";
import { jobQueueMigration } from "./003_job_queue.js";
import type { Migration } from "./types.js";

/** Every schema step, in the order it is applied. Append only. */
export const migrations: Migration[] = [authMigration, jobQueueMigration];
