import { recordStoredConversationWords } from "../../search/conversation-words.js";
import { dialectOf } from "../db.js";
import type { Migration } from "./types.js";

/**
 * Search at scale: the words of each conversation (see src/search/conversation-words.ts), so that a word found in
 * most messages is counted per conversation; and messages by time, so that the newest matches of such a word are
 * found by reading the newest messages.
 */
export const searchConversationWordsMigration: Migration = {
  name: "006_search_conversation_words",
  async up(db) {
    const postgres = dialectOf(db) === "postgres";
    await db.schema.createTable("search_conversation_words", (t) => {
      t.bigIncrements("id").primary();
      t.string("project", 201).notNullable();
      t.text("conversation_key").notNullable();
      // Words new to the conversation: separated by spaces on SQLite, lexemes on PostgreSQL.
      if (postgres) t.specificType("words", "tsvector").notNullable();
      else t.text("words").notNullable();
      t.index(["project", "conversation_key"], "search_conversation_words_conversation");
    });
    if (postgres) {
      // Counting reads each matching row's project: keep the words out of line, so that the rows stay narrow.
      await db.raw("ALTER TABLE search_conversation_words ALTER COLUMN words SET STORAGE EXTERNAL");
      await db.raw("ALTER TABLE search_conversation_words SET (toast_tuple_target = 128)");
      await db.raw("CREATE INDEX search_conversation_words_words ON search_conversation_words USING GIN (words)");
    } else {
      // Contentless (the table holds the words), membership only (detail=none); `_` joins the project token.
      await db.raw("CREATE VIRTUAL TABLE search_conversation_words_fts USING fts5(words, content='', detail=none, tokenize=\"ascii tokenchars '_'\")");
    }
    await db.schema.alterTable("search_messages", (t) => {
      t.index(["project", "started_us", "conversation_key", "content_id"], "search_messages_time");
    });
    await db.transaction((trx) => recordStoredConversationWords(trx));
  },
  async down(db) {
    await db.schema.alterTable("search_messages", (t) => {
      t.dropIndex([], "search_messages_time");
    });
    if (dialectOf(db) === "sqlite") await db.raw("DROP TABLE IF EXISTS search_conversation_words_fts");
    await db.schema.dropTableIfExists("search_conversation_words");
  },
};
