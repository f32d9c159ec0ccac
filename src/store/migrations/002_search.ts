import type { Knex } from "knex";
import { dialectOf } from "../db.js";
import type { Migration } from "./types.js";

/**
 * Message search: spans, one row per message occurrence, one per conversation, and each distinct content once with its
 * normalised word string (see src/search/text.ts). Full text: FTS5 on SQLite, a tsvector + GIN on
 * PostgreSQL; both index the same words, built in JS, so both engines match the same rows.
 */
export const searchMigration: Migration = {
  name: "002_search",
  async up(db) {
    const postgres = dialectOf(db) === "postgres";
    await db.schema.createTable("search_spans", (t) => {
      t.string("project", 201).notNullable();
      t.string("trace_id", 32).notNullable();
      t.string("span_id", 16).notNullable();
      t.string("parent_span_id", 16).notNullable().defaultTo("");
      t.text("name").notNullable();
      t.integer("kind").notNullable().defaultTo(0);
      // Microseconds since the epoch: exact in a JS number, finer than any client's clock.
      t.bigInteger("start_us").notNullable();
      t.bigInteger("end_us").notNullable();
      t.text("operation_name").notNullable().defaultTo("");
      t.text("provider_name").notNullable().defaultTo("");
      t.text("request_model").notNullable().defaultTo("");
      t.text("response_model").notNullable().defaultTo("");
      t.text("agent_name").notNullable().defaultTo("");
      t.text("conversation_id").notNullable().defaultTo("");
      t.text("conversation_name").notNullable().defaultTo("");
      /** The conversation id, or `trace:<trace_id>` for a span without one (the search's grouping key). */
      t.text("conversation_key").notNullable();
      t.text("resource_attributes").notNullable();
      // Without the message payloads: their text is stored once, in search_content.
      t.text("attributes").notNullable();
      t.text("events").notNullable();
      t.primary(["project", "trace_id", "span_id"]);
    });
    // One row per conversation, kept current at ingestion, so that naming a page of results reads a row per
    // conversation instead of ranking all its spans.
    await db.schema.createTable("search_conversations", (t) => {
      t.string("project", 201).notNullable();
      t.text("conversation_key").notNullable();
      // The newest non-empty value and the (start, span id) of the span that sent it; -1 while none was sent.
      t.text("conversation_name").notNullable();
      t.bigInteger("name_us").notNullable();
      t.string("name_span", 16).notNullable();
      t.text("agent_name").notNullable();
      t.bigInteger("agent_us").notNullable();
      t.string("agent_span", 16).notNullable();
      t.primary(["project", "conversation_key"]);
    });
    await db.schema.createTable("search_content", (t) => {
      t.increments("id").primary();
      t.string("digest", 64).notNullable().unique();
      t.text("content").notNullable();
      t.text("search_text").notNullable();
      // The distinct words as lexemes, built from search_text without PostgreSQL's text parser.
      if (postgres) t.specificType("words", "tsvector GENERATED ALWAYS AS (array_to_tsvector(string_to_array(btrim(search_text), ' '))) STORED");
    });
    await db.schema.createTable("search_messages", (t) => {
      t.bigIncrements("id").primary();
      t.string("project", 201).notNullable();
      t.string("trace_id", 32).notNullable();
      t.string("span_id", 16).notNullable();
      t.integer("ordinal").notNullable();
      t.string("role", 16).notNullable();
      // search_content.id; no foreign key: both rows are written in one transaction, and a per-row check
      // would cost ingestion a lookup per message.
      t.integer("content_id").notNullable();
      t.text("conversation_key").notNullable();
      t.text("agent_name").notNullable();
      t.text("provider_name").notNullable();
      t.text("request_model").notNullable();
      t.bigInteger("started_us").notNullable();
      t.index(["project", "conversation_key", "started_us"], "search_messages_conversation");
      t.index(["project", "trace_id", "started_us"], "search_messages_trace");
      // Covers an agent's messages narrowed by role and model, and their grouping, without reading the rows:
      // an agent has tens of thousands of messages, and a row lookup each cost more than the query's budget.
      t.index(["project", "agent_name", "role", "request_model", "started_us", "conversation_key", "content_id"], "search_messages_agent");
      // Covers the full-text join (content -> occurrences) and its grouping without reading the rows.
      t.index(["content_id", "project", "conversation_key", "started_us"], "search_messages_content");
    });
    if (postgres) {
      await db.raw("CREATE INDEX search_content_words ON search_content USING GIN (words)");
    } else {
      // The ascii tokenizer splits only on ASCII non-alphanumerics, so it sees exactly the words text.ts wrote.
      await db.raw(
        "CREATE VIRTUAL TABLE search_content_fts USING fts5(search_text, content='search_content', content_rowid='id', tokenize='ascii')",
      );
      await db.raw(
        "CREATE TRIGGER search_content_fts_insert AFTER INSERT ON search_content BEGIN INSERT INTO search_content_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
      );
      await db.raw(
        "CREATE TRIGGER search_content_fts_delete AFTER DELETE ON search_content BEGIN INSERT INTO search_content_fts(search_content_fts, rowid, search_text) VALUES ('delete', old.id, old.search_text); END",
      );
    }
  },
  async down(db: Knex) {
    if (dialectOf(db) === "sqlite") await db.raw("DROP TABLE IF EXISTS search_content_fts");
    await db.schema.dropTableIfExists("search_messages");
    await db.schema.dropTableIfExists("search_content");
    await db.schema.dropTableIfExists("search_conversations");
    await db.schema.dropTableIfExists("search_spans");
  },
};
