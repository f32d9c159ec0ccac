import type { Knex } from "knex";
import type { components } from "../../generated/search.js";
import { dialectOf, type Dialect } from "../store/db.js";
import { SearchRequestError } from "./errors.js";
import { parseQuery, type ParsedQuery } from "./query.js";
import { PREVIEW_LENGTH, preview } from "./text.js";

type Schemas = components["schemas"];
/** The request and answer are the spec's own types (spec/search.yaml). */
export type SearchRole = Schemas["Role"];
export const SEARCH_ROLES: readonly SearchRole[] = ["", "user", "assistant", "system", "tool", "tool_call", "tool_result"];
/** POST /agents/search request body; `project_id` has passed the caller's permission check. */
export type AgentSearchReq = Schemas["AgentSearchReq"];
export type AgentSearchMatchedMessage = Schemas["AgentSearchMatchedMessage"];
export type AgentSearchConversationResult = Schemas["AgentSearchConversationResult"];
export type AgentSearchRes = Schemas["AgentSearchRes"];

export const MAX_LIMIT = 1000;

interface Where {
  sql: string;
  bindings: Knex.Value[];
}

/**
 * Full-text search (non-empty query) or structured retrieval (empty query) over one project's messages.
 *
 * Hits are grouped by conversation: `gen_ai.conversation.id`, or `trace:<trace_id>` for messages without
 * one (so unrelated traces are never lumped together); the `conversation_id` filter matches that same
 * value. Conversations come newest `last_activity` first (ties by id), messages inside chronologically (then
 * by trace, span and position in the span). `limit`/`offset` page over conversations; `total_conversations`
 * counts all of them. With a text query, the same content with the same role in the same conversation is
 * shown once, at its newest occurrence. `conversation_name` and `agent_name` are the newest non-empty values
 * among all spans of the conversation. An empty `roles` list means no role filter; `tool` also matches
 * `tool_call` and `tool_result`.
 */
export async function searchMessages(db: Knex, req: AgentSearchReq): Promise<AgentSearchRes> {
  if (dialectOf(db) === "sqlite") return runSearch(db, "sqlite", req);
  // One snapshot for the page, its messages and names; settings for queries that aggregate many rows:
  // JIT compilation costs more than it saves here, and sorts of a few hundred thousand keys fit in memory.
  return db.transaction(
    async (trx) => {
      await trx.raw("SET LOCAL jit = off");
      await trx.raw("SET LOCAL work_mem = '64MB'");
      return runSearch(trx, "postgres", req);
    },
    { isolationLevel: "repeatable read", readOnly: true },
  );
}

async function runSearch(db: Knex, dialect: Dialect, req: AgentSearchReq): Promise<AgentSearchRes> {
  const limit = req.limit ?? 20;
  const offset = req.offset ?? 0;
  if (!Number.isInteger(limit) || limit < 0 || limit > MAX_LIMIT) {
    throw new SearchRequestError(["body", "limit"], `Input should be an integer from 0 to ${MAX_LIMIT}`, "less_than_equal");
  }
  if (!Number.isInteger(offset) || offset < 0) {
    throw new SearchRequestError(["body", "offset"], "Input should be an integer greater than or equal to 0", "greater_than_equal");
  }
  const parsed = parseQuery(req.query ?? "");
  const where = matchConditions(dialect, req, parsed, await planQuery(db, dialect, req, parsed));

  const page = await db.raw<unknown>(
    `SELECT m.conversation_key AS conversation_key, MAX(m.started_us) AS last_us, COUNT(*) OVER () AS total
       FROM search_messages m WHERE ${where.sql}
      GROUP BY m.conversation_key
      ORDER BY MAX(m.started_us) DESC, m.conversation_key ASC
      LIMIT ? OFFSET ?`,
    [...where.bindings, limit, offset],
  );
  const pageRows = rowsOf<{ conversation_key: string; last_us: number | string; total: number | string }>(page);
  let total: number;
  if (pageRows.length > 0) total = Number(pageRows[0].total);
  else {
    const count = await db.raw<unknown>(`SELECT COUNT(DISTINCT m.conversation_key) AS total FROM search_messages m WHERE ${where.sql}`, where.bindings);
    total = Number(rowsOf<{ total: number | string }>(count)[0]?.total ?? 0);
  }
  if (pageRows.length === 0) return { results: [], total_conversations: total };

  const keys = pageRows.map((row) => row.conversation_key);
  const messages = await pageMessages(db, where, keys, parsed !== null, req.truncate_content ?? true);
  const names = await conversationNames(db, req.project_id, keys);

  const results = pageRows.map((row): AgentSearchConversationResult => ({
    conversation_id: row.conversation_key,
    conversation_name: names.get(row.conversation_key)?.conversation_name ?? "",
    agent_name: names.get(row.conversation_key)?.agent_name ?? "",
    matched_messages: messages.get(row.conversation_key) ?? [],
    last_activity: isoFromMicros(Number(row.last_us)),
  }));
  return { results, total_conversations: total };
}

interface Plan {
  /** SQLite only: drive the query from an indexed filter rather than from the full-text matches. */
  startFromFilter: boolean;
}

/** Above this many matching contents, an indexed filter is the cheaper place to start. */
const COMMON_MATCHES = 10_000;

/**
 * SQLite cannot estimate how many contents a full-text query matches, and always starts from them. For a word
 * found nearly everywhere combined with a selective indexed filter (trace, conversation, agent), starting
 * from the filter is many times cheaper; a bounded count of the matches tells the two cases apart.
 */
async function planQuery(db: Knex, dialect: Dialect, req: AgentSearchReq, parsed: ParsedQuery | null): Promise<Plan> {
  const selective = req.trace_id != null || req.conversation_id != null || req.agent_name != null;
  if (dialect !== "sqlite" || parsed === null || !selective) return { startFromFilter: false };
  const probe = await db.raw<unknown>(
    "SELECT COUNT(*) AS n FROM (SELECT rowid FROM search_content_fts WHERE search_content_fts MATCH ? LIMIT ?)",
    [sqliteMatch(parsed), COMMON_MATCHES],
  );
  return { startFromFilter: Number(rowsOf<{ n: number }>(probe)[0].n) >= COMMON_MATCHES };
}

function sqliteMatch(parsed: ParsedQuery): string {
  return parsed.terms.map((term) => `"${term.join(" ")}"`).join(" AND ");
}

function matchConditions(dialect: Dialect, req: AgentSearchReq, parsed: ParsedQuery | null, plan: Plan): Where {
  const sql: string[] = ["m.project = ?"];
  const bindings: Knex.Value[] = [req.project_id];
  const equal = (column: string, value: string | null | undefined) => {
    if (value === null || value === undefined) return;
    sql.push(`m.${column} = ?`);
    bindings.push(value);
  };
  equal("trace_id", req.trace_id?.toLowerCase());
  equal("conversation_key", req.conversation_id);
  equal("agent_name", req.agent_name);
  equal("provider_name", req.provider_name);
  equal("request_model", req.request_model);
  if (req.roles && req.roles.length > 0) {
    const roles = new Set<string>();
    req.roles.forEach((role, index) => {
      if (!SEARCH_ROLES.includes(role)) {
        throw new SearchRequestError(["body", "roles", index], `Input should be one of ${SEARCH_ROLES.map((r) => `'${r}'`).join(", ")}`, "enum");
      }
      roles.add(role);
      if (role === "tool") ["tool_call", "tool_result"].forEach((r) => roles.add(r));
    });
    sql.push(`m.role IN (${[...roles].map(() => "?").join(", ")})`);
    bindings.push(...roles);
  }
  const after = micros(req.started_after, "started_after");
  if (after !== null) {
    sql.push("m.started_us >= ?");
    bindings.push(after);
  }
  const before = micros(req.started_before, "started_before");
  if (before !== null) {
    sql.push("m.started_us < ?");
    bindings.push(before);
  }
  if (parsed !== null) {
    if (dialect === "sqlite") {
      sql.push(`${plan.startFromFilter ? "+" : ""}m.content_id IN (SELECT rowid FROM search_content_fts WHERE search_content_fts MATCH ?)`);
      bindings.push(sqliteMatch(parsed));
    } else {
      // The GIN index finds contents with every word; phrases are then checked on the word string, whose
      // words are separated by exactly one space (tsvector positions are capped, the string is not).
      const allWords = [...new Set(parsed.terms.flat())];
      const phrases = parsed.terms.filter((term) => term.length > 1);
      const phraseSql = phrases.map(() => " AND strpos(c.search_text, ?) > 0").join("");
      sql.push(`m.content_id IN (SELECT c.id FROM search_content c WHERE c.words @@ ?::tsquery${phraseSql})`);
      bindings.push(allWords.map((word) => `'${word}'`).join(" & "), ...phrases.map((term) => ` ${term.join(" ")} `));
    }
  }
  return { sql: sql.join(" AND "), bindings };
}

interface MessageRow {
  conversation_key: string;
  trace_id: string;
  span_id: string;
  role: SearchRole;
  started_us: number | string;
  digest: string;
  content: string;
}

async function pageMessages(db: Knex, where: Where, keys: string[], dedupe: boolean, truncate: boolean): Promise<Map<string, AgentSearchMatchedMessage[]>> {
  const inKeys = `m.conversation_key IN (${keys.map(() => "?").join(", ")})`;
  // Only the preview leaves the database: PREVIEW_LENGTH code points cover PREVIEW_LENGTH UTF-16 units.
  const content = truncate ? `substr(c.content, 1, ${PREVIEW_LENGTH})` : "c.content";
  const rank = dedupe
    ? ", ROW_NUMBER() OVER (PARTITION BY m.conversation_key, m.role, m.content_id ORDER BY m.started_us DESC, m.id DESC) AS occurrence"
    : ", 1 AS occurrence";
  const result = await db.raw<unknown>(
    `SELECT x.conversation_key, x.trace_id, x.span_id, x.role, x.started_us, c.digest AS digest, ${content} AS content
       FROM (SELECT m.conversation_key, m.trace_id, m.span_id, m.ordinal, m.role, m.started_us, m.content_id${rank}
               FROM search_messages m WHERE ${where.sql} AND ${inKeys}) x
       JOIN search_content c ON c.id = x.content_id
      WHERE x.occurrence = 1
      ORDER BY x.started_us ASC, x.trace_id ASC, x.span_id ASC, x.ordinal ASC`,
    [...where.bindings, ...keys],
  );
  const byConversation = new Map<string, AgentSearchMatchedMessage[]>();
  for (const row of rowsOf<MessageRow>(result)) {
    const list = byConversation.get(row.conversation_key) ?? [];
    byConversation.set(row.conversation_key, list);
    list.push({
      span_id: row.span_id,
      trace_id: row.trace_id,
      role: row.role,
      content_preview: truncate ? preview(row.content) : row.content,
      content_digest: row.digest,
      started_at: isoFromMicros(Number(row.started_us)),
    });
  }
  return byConversation;
}

async function conversationNames(db: Knex, project: string, keys: string[]): Promise<Map<string, { conversation_name: string; agent_name: string }>> {
  const result = await db.raw<unknown>(
    `SELECT conversation_key, conversation_name, agent_name FROM search_conversations WHERE project = ? AND conversation_key IN (${keys.map(() => "?").join(", ")})`,
    [project, ...keys],
  );
  const names = new Map<string, { conversation_name: string; agent_name: string }>();
  for (const row of rowsOf<{ conversation_key: string; conversation_name: string; agent_name: string }>(result)) names.set(row.conversation_key, row);
  return names;
}

function micros(value: string | null | undefined, field: string): number | null {
  if (value === null || value === undefined) return null;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new SearchRequestError(["body", field], "Input should be a valid datetime", "datetime_parsing");
  return ms * 1000;
}

function isoFromMicros(us: number): string {
  return new Date(Math.floor(us / 1000)).toISOString();
}

/** knex.raw returns an array of rows on SQLite and a pg Result (`.rows`) on PostgreSQL. */
function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return (result as { rows: T[] }).rows;
}
