import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mulberry32 } from "../../src/inference/random.js";
import { recordStoredConversationWords } from "../../src/search/conversation-words.js";
import { ingestSpans } from "../../src/search/message-store.js";
import { parseQuery } from "../../src/search/query.js";
import { searchMessages, type AgentSearchReq, type AgentSearchRes } from "../../src/search/search.js";
import { contentDigest, searchText } from "../../src/search/text.js";
import type { OtlpSpan } from "../../src/search/otlp-types.js";
import { DIALECTS, openTestDatabase, type TestDatabase } from "../helpers/db.js";
import { iso, span, T0_MS } from "./corpus.js";

const PROJECT = "acme/many";
const CONVERSATIONS = 1200;

interface Occurrence {
  conversation: string;
  role: string;
  agent: string;
  digest: string;
  text: string;
  us: number;
}

/**
 * Enough conversations for every way a query can run (counted per conversation, read from the newest messages,
 * or from the full-text matches): a word in nearly every conversation, frequent phrases, rare words, many
 * equal start times, conversations whose spans arrive in different requests.
 */
function manyConversations(): { first: OtlpSpan[]; second: OtlpSpan[]; occurrences: Occurrence[] } {
  const random = mulberry32(11);
  const word = () => {
    const x = random();
    return x < 0.3 ? "alpha" : x < 0.45 ? "beta" : x < 0.55 ? "gamma" : `rare${Math.floor(random() * 400)}`;
  };
  const sentence = (length: number) => Array.from({ length }, word).join(" ");
  const first: OtlpSpan[] = [];
  const second: OtlpSpan[] = [];
  const occurrences: Occurrence[] = [];
  for (let i = 0; i < CONVERSATIONS; i++) {
    // Seconds from a narrow range, so that many conversations share their newest time.
    const seconds = Math.floor(random() * 500);
    const conversation = i % 7 === 0 ? null : `c-${i}`;
    const agent = `agent-${i % 3}`;
    const question = `${sentence(6)} Question`;
    const chat = (at: number, answer: string) =>
      span(i + 1, at, {
        ...(conversation !== null ? { "gen_ai.conversation.id": conversation } : {}),
        "gen_ai.agent.name": agent,
        "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content: question }] }],
        "gen_ai.output.messages": [{ role: "assistant", parts: [{ type: "text", content: answer }] }],
      });
    const answers = [sentence(8), sentence(8)];
    first.push(chat(seconds, answers[0]));
    second.push(chat(seconds + 1 + (i % 2), answers[1]));
    const key = conversation ?? `trace:${(i + 1).toString(16).padStart(32, "0")}`;
    [seconds, seconds + 1 + (i % 2)].forEach((at, turn) => {
      const us = (T0_MS + at * 1000) * 1000;
      occurrences.push({ conversation: key, role: "user", agent, digest: contentDigest(question), text: searchText(question), us });
      occurrences.push({ conversation: key, role: "assistant", agent, digest: contentDigest(answers[turn]), text: searchText(answers[turn]), us });
    });
  }
  return { first, second, occurrences };
}

/** What a search must answer, computed plainly from the occurrences. */
function expected(occurrences: Occurrence[], req: Omit<AgentSearchReq, "project_id">): { ids: string[]; last: string[]; counts: number[]; total: number } {
  const terms = parseQuery(req.query ?? "")?.terms ?? [];
  const after = req.started_after ? Date.parse(req.started_after) * 1000 : -Infinity;
  const matching = occurrences.filter(
    (o) => terms.every((term) => o.text.includes(` ${term.join(" ")} `)) && o.us >= after && (req.agent_name == null || o.agent === req.agent_name),
  );
  const byConversation = new Map<string, { last: number; distinct: Set<string> }>();
  for (const o of matching) {
    const entry = byConversation.get(o.conversation) ?? { last: -1, distinct: new Set<string>() };
    byConversation.set(o.conversation, entry);
    entry.last = Math.max(entry.last, o.us);
    entry.distinct.add(`${o.role} ${o.digest}`);
  }
  const ordered = [...byConversation.entries()].sort(([a, x], [b, y]) => y.last - x.last || (a < b ? -1 : 1));
  const page = ordered.slice(req.offset ?? 0, (req.offset ?? 0) + (req.limit ?? 20));
  return {
    ids: page.map(([id]) => id),
    last: page.map(([, c]) => new Date(c.last / 1000).toISOString()),
    counts: page.map(([, c]) => c.distinct.size),
    total: ordered.length,
  };
}

const observed = (res: AgentSearchRes) => ({
  ids: res.results.map((r) => r.conversation_id),
  last: res.results.map((r) => r.last_activity),
  counts: res.results.map((r) => r.matched_messages.length),
  total: res.total_conversations,
});

describe.each(DIALECTS)("search over many conversations on %s", (dialect) => {
  let t: TestDatabase;
  const corpus = manyConversations();

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    // The second turn of every conversation arrives in later requests than the first.
    for (const spans of [corpus.first, corpus.second]) {
      for (let i = 0; i < spans.length; i += 250) await ingestSpans(t.db, spans.slice(i, i + 250), { project: PROJECT });
    }
    await ingestSpans(t.db, corpus.first.slice(0, 5), { project: "acme/other" });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  const cases: [string, Omit<AgentSearchReq, "project_id">][] = [
    ["a word in nearly every conversation", { query: "alpha" }],
    ["a frequent word", { query: "Gamma" }],
    ["a rare word", { query: "rare7" }],
    ["a frequent phrase", { query: '"alpha beta"' }],
    ["two words", { query: "alpha question" }],
    ["a frequent word after a time", { query: "alpha", started_after: iso(400) }],
    ["a frequent word of one agent", { query: "alpha", agent_name: "agent-1" }],
  ];
  const pageThrough = async (req: Omit<AgentSearchReq, "project_id">) => {
    for (const [offset, limit] of [[0, 20], [20, 30], [500, 20], [1130, 100], [0, 0]]) {
      const page = { ...req, offset, limit };
      expect(observed(await searchMessages(t.db, { project_id: PROJECT, ...page })), JSON.stringify(page)).toEqual(expected(corpus.occurrences, page));
    }
  };
  for (const [name, req] of cases) it(`pages exactly through ${name}`, () => pageThrough(req));

  it("fills the conversations' words from the messages stored before the migration that added them", async () => {
    const rows = async () => Number((await t.db("search_conversation_words").count({ n: "*" }))[0].n);
    const before = await rows();
    await t.db("search_conversation_words").delete();
    if (dialect === "sqlite") await t.db.raw("INSERT INTO search_conversation_words_fts (search_conversation_words_fts) VALUES ('delete-all')");
    await t.db.transaction((trx) => recordStoredConversationWords(trx));
    // One row per conversation now, where ingestion had added one per request that brought new words.
    expect(await rows()).toBe(CONVERSATIONS + 5);
    expect(before).toBeGreaterThan(CONVERSATIONS + 5);
    await pageThrough({ query: "alpha" });
    await pageThrough({ query: "Gamma" });
  });
});
