import { createHash } from "node:crypto";
import type { Knex } from "knex";
import { dialectOf, type Dialect } from "../store/db.js";
import { insertRows, rowsOf, type Columns } from "./rows.js";

/**
 * The words each conversation contains, kept as delta rows: an ingestion adds, per conversation, one row with only
 * the words new to it. A word is thus in exactly one row of a conversation, and the number of rows holding a word
 * is the number of conversations containing it: one full-text count (FTS5 on SQLite, GIN on PostgreSQL) instead of
 * visiting every matching message.
 */

/** A conversation and the words of its new messages (as in search_content.search_text). */
export interface ConversationWords {
  project: string;
  conversationKey: string;
  words: Set<string>;
}

const DELTA_COLUMNS: Columns = [["project", "text"], ["conversation_key", "text"], ["words", "text"]];

/**
 * SQLite: the token naming the project in each delta document, as the projects share one index. Words never
 * contain `_` (text.ts splits on it), and the index counts `_` as part of a token.
 */
function projectToken(project: string): string {
  return `_${createHash("sha256").update(project, "utf8").digest("hex")}`;
}

/** Records the words not yet recorded for each conversation. */
export async function addConversationWords(trx: Knex.Transaction, conversations: ConversationWords[]): Promise<void> {
  if (conversations.length === 0) return;
  const dialect = dialectOf(trx);
  const id = (project: string, key: string) => `${project}\u0000${key}`;
  // Ingestion has locked these conversations' rows: a concurrent writer's words are committed before this reads.
  const known = await trx.raw<unknown>(
    dialect === "sqlite"
      ? `SELECT project, conversation_key, words FROM search_conversation_words WHERE (project, conversation_key) IN (${pairs(dialect)})`
      : `SELECT project, conversation_key, array_to_string(tsvector_to_array(words), ' ') AS words FROM search_conversation_words
          WHERE (project, conversation_key) IN (${pairs(dialect)})`,
    [JSON.stringify(conversations.map((c) => [c.project, c.conversationKey]))],
  );
  const recorded = new Map<string, Set<string>>();
  for (const row of rowsOf<{ project: string; conversation_key: string; words: string }>(known)) {
    const set = recorded.get(id(row.project, row.conversation_key)) ?? new Set<string>();
    recorded.set(id(row.project, row.conversation_key), set);
    addWords(set, row.words);
  }
  const deltas: string[][] = [];
  for (const conversation of conversations) {
    const old = recorded.get(id(conversation.project, conversation.conversationKey));
    const fresh = old === undefined ? [...conversation.words] : [...conversation.words].filter((word) => !old.has(word));
    for (const words of pieces(fresh)) deltas.push([conversation.project, conversation.conversationKey, words]);
  }
  if (deltas.length === 0) return;
  if (dialect === "postgres") {
    await trx.raw(
      `INSERT INTO search_conversation_words (project, conversation_key, words)
       SELECT r ->> 0, r ->> 1, array_to_tsvector(string_to_array(r ->> 2, ' ')) FROM json_array_elements(?::json) r`,
      [JSON.stringify(deltas)],
    );
    return;
  }
  const inserted = await insertRows<{ id: number; project: string; words: string }>(trx, "search_conversation_words", DELTA_COLUMNS, deltas, "RETURNING id, project, words");
  const tokens = new Map<string, string>();
  const documents = inserted.map((row) => {
    const token = tokens.get(row.project) ?? projectToken(row.project);
    tokens.set(row.project, token);
    return [row.id, `${token} ${row.words}`];
  });
  await trx.raw("INSERT INTO search_conversation_words_fts (rowid, words) SELECT value ->> 0, value ->> 1 FROM json_each(?)", [JSON.stringify(documents)]);
}

/**
 * How many of the project's conversations have a message containing `word`, counting no further than `cap`
 * (a bounded count tells a rare word from a common one cheaply).
 */
export async function conversationsWithWord(db: Knex, project: string, word: string, cap = Infinity): Promise<number> {
  const limit = Number.isFinite(cap) ? `LIMIT ${Math.floor(cap)}` : "";
  if (dialectOf(db) === "sqlite") {
    const result = await db.raw<unknown>(
      `SELECT COUNT(*) AS n FROM (SELECT rowid FROM search_conversation_words_fts WHERE search_conversation_words_fts MATCH ? ${limit})`,
      [`"${projectToken(project)}" AND "${word}"`],
    );
    return Number(rowsOf<{ n: number }>(result)[0].n);
  }
  // A word in most rows would make a sequential scan look cheaper than the index, yet it would read every row's
  // words; the index alone answers (a plain word needs no recheck), so only the rows' project is read.
  await db.raw("SET LOCAL enable_seqscan = off");
  const result = await db.raw<unknown>(
    `SELECT COUNT(*) AS n FROM (SELECT 1 FROM search_conversation_words WHERE project = ? AND words @@ ?::tsquery ${limit}) x`,
    [project, `'${word}'`],
  );
  await db.raw("SET LOCAL enable_seqscan TO DEFAULT");
  return Number(rowsOf<{ n: number | string }>(result)[0].n);
}

/** Fills the structure from the messages already stored, a slice of conversations at a time. */
export async function recordStoredConversationWords(trx: Knex.Transaction): Promise<void> {
  const dialect = dialectOf(trx);
  let after: [string, string] = ["", ""];
  for (;;) {
    const slice = rowsOf<{ project: string; conversation_key: string }>(
      await trx.raw<unknown>(
        "SELECT project, conversation_key FROM search_conversations WHERE (project, conversation_key) > (?, ?) ORDER BY project, conversation_key LIMIT 500",
        after,
      ),
    );
    if (slice.length === 0) return;
    after = [slice[slice.length - 1].project, slice[slice.length - 1].conversation_key];
    const texts = await trx.raw<unknown>(
      `SELECT DISTINCT m.project, m.conversation_key, c.search_text FROM search_messages m JOIN search_content c ON c.id = m.content_id
        WHERE (m.project, m.conversation_key) IN (${pairs(dialect)})`,
      [JSON.stringify(slice.map((row) => [row.project, row.conversation_key]))],
    );
    const byConversation = new Map<string, ConversationWords>();
    for (const row of rowsOf<{ project: string; conversation_key: string; search_text: string }>(texts)) {
      const key = `${row.project}\u0000${row.conversation_key}`;
      const entry = byConversation.get(key) ?? { project: row.project, conversationKey: row.conversation_key, words: new Set<string>() };
      byConversation.set(key, entry);
      addWords(entry.words, row.search_text);
    }
    await addConversationWords(trx, [...byConversation.values()]);
  }
}

/** Under PostgreSQL's limit on a tsvector (1 MB), whatever the words: a row never holds more than this many bytes of them. */
const PIECE_BYTES = 256_000;

/** The words as strings of at most PIECE_BYTES: the pieces of one conversation never share a word. */
function pieces(words: string[]): string[] {
  const out: string[] = [];
  let piece: string[] = [];
  let bytes = 0;
  for (const word of words) {
    // At most 4 bytes a UTF-16 unit, and a separator.
    const size = word.length * 4 + 1;
    if (bytes + size > PIECE_BYTES && piece.length > 0) {
      out.push(piece.join(" "));
      piece = [];
      bytes = 0;
    }
    piece.push(word);
    bytes += size;
  }
  if (piece.length > 0) out.push(piece.join(" "));
  return out;
}

/** Adds the words of a string of words separated by spaces. */
export function addWords(set: Set<string>, words: string): void {
  for (const word of words.split(" ")) if (word !== "") set.add(word);
}

/** (project, conversation_key) pairs from a JSON array parameter. */
function pairs(dialect: Dialect): string {
  return dialect === "sqlite" ? "SELECT value ->> 0, value ->> 1 FROM json_each(?)" : "SELECT r ->> 0, r ->> 1 FROM json_array_elements(?::json) r";
}
