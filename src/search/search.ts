import type { Knex } from "knex";
import type { components } from "../../generated/search.js";
import { dialectOf, type Dialect } from "../store/db.js";
import { SearchRequestError } from "./errors.js";
import { conversationsWithWord } from "./conversation-words.js";
import { parseQuery, type ParsedQuery } from "./query.js";
import { rowsOf } from "./rows.js";
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
  const filters = filterConditions(req);

  // A single word with no filter is counted per conversation; otherwise the rarest word bounds the conversations
  // that can match, which tells where to start.
  const single = parsed !== null && parsed.terms.length === 1 && parsed.terms[0].length === 1 && filters.sql.length === 1;
  const cap = single ? Infinity : dialect === "sqlite" && req.agent_name != null ? LISTED_CONVERSATIONS : COMMON_CONVERSATIONS;
  const bound = parsed === null ? null : await rarestWord(db, req.project_id, parsed, cap);
  if (bound === 0) return { results: [], total_conversations: 0 };

  let pageRows: PageRow[] | null = null;
  let total = single ? bound : null;
  if (parsed !== null && filters.onlyTime && limit > 0 && (bound ?? 0) >= WALK_MIN_CONVERSATIONS) {
    // A short walk fills most pages; a longer one the rest.
    for (const rows of new Set([Math.min(WALK_ROWS, 25 * (offset + limit)), WALK_ROWS])) {
      const walked = await newestByWalk(db, dialect, filters, parsed, offset + limit, rows);
      if (walked === null) continue;
      pageRows = walked.rows.slice(offset, offset + limit);
      total ??= walked.total;
      break;
    }
  }
  const where = parsed === null ? joinWhere(filters) : joinWhere(filters, textCondition(dialect, parsed, startOf(dialect, req, bound ?? 0)));
  if (pageRows === null && (total === null || (limit > 0 && offset < total))) {
    const page = await db.raw<unknown>(
      `SELECT m.conversation_key AS conversation_key, MAX(m.started_us) AS last_us, COUNT(*) OVER () AS total
         FROM search_messages m WHERE ${where.sql}
        GROUP BY m.conversation_key
        ORDER BY MAX(m.started_us) DESC, m.conversation_key ASC
        LIMIT ? OFFSET ?`,
      [...where.bindings, limit, offset],
    );
    pageRows = rowsOf<PageRow & { total: number | string }>(page);
    if (pageRows.length > 0) total = Number((pageRows[0] as PageRow & { total: number | string }).total);
  }
  total ??= await countConversations(db, where);
  if (pageRows === null || pageRows.length === 0) return { results: [], total_conversations: total };

  const keys = pageRows.map((row) => row.conversation_key);
  const messages = await pageMessages(db, dialect, filters, parsed, keys, req.truncate_content ?? true);
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

interface PageRow {
  conversation_key: string;
  last_us: number | string;
}

async function countConversations(db: Knex, where: Where): Promise<number> {
  const count = await db.raw<unknown>(`SELECT COUNT(DISTINCT m.conversation_key) AS total FROM search_messages m WHERE ${where.sql}`, where.bindings);
  return Number(rowsOf<{ total: number | string }>(count)[0]?.total ?? 0);
}

/** Messages read from the newest when a query's matches are common: enough to fill most pages, cheap to check. */
const WALK_ROWS = 2000;
/** Below this many matching conversations, starting from the full-text matches is cheaper than a walk. */
const WALK_MIN_CONVERSATIONS = 1000;

/**
 * The newest conversations by their newest matching message, found by reading the newest `rows` messages and
 * checking their words: a word in most messages fills a page from the first few hundred. The answer is exact
 * when every message was read, or when the last wanted conversation matched after the oldest message read
 * (every message not read is older); otherwise null. `total` is known only when every message was read.
 */
async function newestByWalk(
  db: Knex,
  dialect: Dialect,
  filters: Filters,
  parsed: ParsedQuery,
  wanted: number,
  rows: number,
): Promise<{ rows: PageRow[]; total: number | null } | null> {
  const check = wordCheck(dialect, parsed.terms);
  const result = await db.raw<unknown>(
    `SELECT w.conversation_key AS conversation_key, w.started_us AS started_us, CASE WHEN ${check.sql} THEN 1 ELSE 0 END AS hit
       FROM (SELECT m.conversation_key, m.started_us, m.content_id FROM search_messages m WHERE ${filters.sql.join(" AND ")}
              ORDER BY m.started_us DESC LIMIT ?) w
       JOIN search_content c ON c.id = w.content_id`,
    [...check.bindings, ...filters.bindings, rows],
  );
  const walked = rowsOf<{ conversation_key: string; started_us: number | string; hit: number | string }>(result);
  const newest = new Map<string, number>();
  let oldest = Infinity;
  for (const row of walked) {
    const us = Number(row.started_us);
    oldest = Math.min(oldest, us);
    if (Number(row.hit) === 1 && (newest.get(row.conversation_key) ?? -Infinity) < us) newest.set(row.conversation_key, us);
  }
  const found = [...newest.entries()]
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
    .map(([conversation_key, us]) => ({ conversation_key, last_us: us }));
  if (walked.length < rows) return { rows: found, total: found.length };
  if (found.length >= wanted && Number(found[wanted - 1].last_us) > oldest) return { rows: found, total: null };
  return null;
}

/** The fewest conversations any word of the query is found in, counting no further than `cap`. */
async function rarestWord(db: Knex, project: string, parsed: ParsedQuery, cap: number): Promise<number> {
  let fewest = cap;
  for (const word of new Set(parsed.terms.flat())) fewest = Math.min(fewest, await conversationsWithWord(db, project, word, fewest));
  return fewest;
}

/**
 * Where a text query with filters starts: from the full-text matches, or from the messages the filters select,
 * looked up among the matches (SQLite) or checked word by word.
 */
type Start = "matches" | "filtersLookup" | "filtersCheck";

/** From this many conversations with the rarest word on, an agent's messages are the cheaper place to start. */
const COMMON_CONVERSATIONS = 2_000;
/**
 * SQLite reads the matches from FTS5's lists at little cost per match: up to this many conversations, the agent's
 * messages are looked up among them; beyond, checking those messages' words costs less. PostgreSQL reads a row per
 * match, so it checks from COMMON_CONVERSATIONS on.
 */
const LISTED_CONVERSATIONS = 50_000;

/** A trace or a conversation has few messages: checking them beats any full-text lookup. An agent has many. */
function startOf(dialect: Dialect, req: AgentSearchReq, bound: number): Start {
  if (req.trace_id != null || req.conversation_id != null) return "filtersCheck";
  if (req.agent_name == null || bound < COMMON_CONVERSATIONS) return "matches";
  return dialect === "sqlite" && bound < LISTED_CONVERSATIONS ? "filtersLookup" : "filtersCheck";
}

function postgresWords(parsed: ParsedQuery): string {
  return [...new Set(parsed.terms.flat())].map((word) => `'${word}'`).join(" & ");
}

function sqliteMatch(parsed: ParsedQuery): string {
  return parsed.terms.map((term) => `"${term.join(" ")}"`).join(" AND ");
}

/** The conditions on a message's own columns; `sql[0]` is the project. */
interface Filters {
  sql: string[];
  bindings: Knex.Value[];
  /** No condition besides the project and the time range: the time index serves them all. */
  onlyTime: boolean;
}

function joinWhere(filters: Filters, text?: Where): Where {
  return text === undefined
    ? { sql: filters.sql.join(" AND "), bindings: filters.bindings }
    : { sql: [...filters.sql, text.sql].join(" AND "), bindings: [...filters.bindings, ...text.bindings] };
}

function filterConditions(req: AgentSearchReq): Filters {
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
  const onlyTime = sql.length === 1;
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
  return { sql, bindings, onlyTime };
}

/**
 * Whether the content `c` holds every term: its word string has each word or phrase between single spaces,
 * exactly what the full-text indexes match. Cheap for a few thousand rows; the indexes are for more.
 */
function wordCheck(dialect: Dialect, terms: string[][], content = "c"): Where {
  const position = dialect === "sqlite" ? "instr" : "strpos";
  return {
    sql: terms.map(() => `${position}(${content}.search_text, ?) > 0`).join(" AND "),
    bindings: terms.map((term) => ` ${term.join(" ")} `),
  };
}

function textCondition(dialect: Dialect, parsed: ParsedQuery, start: Start): Where {
  if (start === "filtersCheck") {
    const check = wordCheck(dialect, parsed.terms);
    return { sql: `EXISTS (SELECT 1 FROM search_content c WHERE c.id = m.content_id AND ${check.sql})`, bindings: check.bindings };
  }
  if (dialect === "sqlite") {
    // The unary + keeps SQLite from driving the query from the matches.
    const lookup = start === "filtersLookup" ? "+" : "";
    return { sql: `${lookup}m.content_id IN (SELECT rowid FROM search_content_fts WHERE search_content_fts MATCH ?)`, bindings: [sqliteMatch(parsed)] };
  }
  // The GIN index finds contents with every word; phrases are then checked on the word string, whose
  // words are separated by exactly one space (tsvector positions are capped, the string is not).
  const phrases = parsed.terms.filter((term) => term.length > 1);
  const phraseCheck = phrases.length > 0 ? wordCheck(dialect, phrases) : { sql: "true", bindings: [] };
  return {
    sql: `m.content_id IN (SELECT c.id FROM search_content c WHERE c.words @@ ?::tsquery AND ${phraseCheck.sql})`,
    bindings: [postgresWords(parsed), ...phraseCheck.bindings],
  };
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

async function pageMessages(
  db: Knex,
  dialect: Dialect,
  filters: Filters,
  parsed: ParsedQuery | null,
  keys: string[],
  truncate: boolean,
): Promise<Map<string, AgentSearchMatchedMessage[]>> {
  const inKeys = `m.conversation_key IN (${keys.map(() => "?").join(", ")})`;
  // Only the preview leaves the database: PREVIEW_LENGTH code points cover PREVIEW_LENGTH UTF-16 units.
  const content = truncate ? `substr(c.content, 1, ${PREVIEW_LENGTH})` : "c.content";
  // A page holds few conversations: their messages' words are checked one by one.
  const check = parsed === null ? null : wordCheck(dialect, parsed.terms, "t");
  const rank = check !== null
    ? ", ROW_NUMBER() OVER (PARTITION BY m.conversation_key, m.role, m.content_id ORDER BY m.started_us DESC, m.id DESC) AS occurrence"
    : ", 1 AS occurrence";
  const matches = check !== null ? `JOIN search_content t ON t.id = m.content_id AND ${check.sql}` : "";
  const result = await db.raw<unknown>(
    `SELECT x.conversation_key, x.trace_id, x.span_id, x.role, x.started_us, c.digest AS digest, ${content} AS content
       FROM (SELECT m.conversation_key, m.trace_id, m.span_id, m.ordinal, m.role, m.started_us, m.content_id${rank}
               FROM search_messages m ${matches} WHERE ${filters.sql.join(" AND ")} AND ${inKeys}) x
       JOIN search_content c ON c.id = x.content_id
      WHERE x.occurrence = 1
      ORDER BY x.started_us ASC, x.trace_id ASC, x.span_id ASC, x.ordinal ASC`,
    [...(check?.bindings ?? []), ...filters.bindings, ...keys],
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
