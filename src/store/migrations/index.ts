import { authMigration } from "./001_auth.js";
import { searchMigration } from "./002_search.js";
import { jobQueueMigration } from "./003_job_queue.js";
import { trainingMigration } from "./004_training.js";
import { inferenceMigration } from "./005_inference.js";
import { searchConversationWordsMigration } from "./006_search_conversation_words.js";
import type { Migration } from "./types.js";

/** Every schema step, in the order it is applied. Append only. */
export const migrations: Migration[] = [authMigration, searchMigration, jobQueueMigration, trainingMigration, inferenceMigration, searchConversationWordsMigration];
