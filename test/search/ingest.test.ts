import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ingestSpans } from "../../src/search/message-store.js";
import { searchMessages } from "../../src/search/search.js";
import { DIALECTS, openTestDatabase, type TestDatabase } from "../helpers/db.js";
import { span, spanId } from "./corpus.js";

const PROJECT = "acme/ingest";
const say = (content: string) => ({ "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content }] }] });

describe.each(DIALECTS)("ingestion on %s", (dialect) => {
  let t: TestDatabase;
  const search = (query: string, conversation_id?: string) => searchMessages(t.db, { project_id: PROJECT, query, conversation_id, truncate_content: false });

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("keeps the newest non-empty conversation and agent names whatever order the spans arrive in", async () => {
    const named = (seconds: number, id: number, name: string, agent: string) =>
      span(30, seconds, { ...say(`turn at ${seconds}`), "gen_ai.conversation.id": "conv-late", "gen_ai.conversation.name": name, "gen_ai.agent.name": agent }, { spanId: spanId(1000 + id) });
    await ingestSpans(t.db, [named(20, 1, "newest", "")], { project: PROJECT });
    await ingestSpans(t.db, [named(10, 2, "older", "first agent"), named(5, 3, "oldest", "")], { project: PROJECT });
    // same start time: the higher span id is the newer one, as within one batch
    await ingestSpans(t.db, [named(10, 4, "", "tied agent")], { project: PROJECT });
    const res = await search("turn");
    expect(res.results.map((r) => [r.conversation_id, r.conversation_name, r.agent_name])).toEqual([["conv-late", "newest", "tied agent"]]);
    expect(res.results[0].matched_messages.map((m) => m.content_preview)).toEqual(["turn at 5", "turn at 10", "turn at 20"]);
  });

  it("stores a lone surrogate as U+FFFD and keeps the rest of the text searchable", async () => {
    const result = await ingestSpans(t.db, [span(31, 1, say("broken \ud800 surrogate and a pair 😀 kept"))], { project: PROJECT });
    expect(result).toMatchObject({ accepted: 1, messages: 1 });
    const res = await search("surrogate");
    expect(res.results[0].matched_messages[0].content_preview).toBe("broken \ufffd surrogate and a pair 😀 kept");
  });

  it("counts a conversation once when requests add to it concurrently", async () => {
    const turns = Array.from({ length: 12 }, (_, i) =>
      ingestSpans(t.db, [span(60, 200 + i, { ...say(`racing turn ${i}`), "gen_ai.conversation.id": "conv-race" })], { project: PROJECT }),
    );
    await Promise.all(turns);
    expect((await search("racing")).total_conversations).toBe(1);
    expect((await search("turn")).total_conversations).toBe(2);
  });

  it("stores a large export request in one go", async () => {
    const spans = Array.from({ length: 3000 }, (_, i) => span(40 + (i % 50), 100 + i, { ...say(`bulk message ${i} shared words`), "gen_ai.conversation.id": `bulk-${i % 50}` }));
    const result = await ingestSpans(t.db, spans, { project: PROJECT });
    expect(result).toEqual({ accepted: 3000, rejected: 0, errorMessage: "", messages: 3000 });
    const res = await searchMessages(t.db, { project_id: PROJECT, query: '"shared words"', limit: 1000 });
    expect(res.total_conversations).toBe(50);
    expect(res.results.reduce((n, r) => n + r.matched_messages.length, 0)).toBe(3000);
    expect((await search('"message 2999 shared"')).results.map((r) => r.conversation_id)).toEqual(["bulk-49"]);
  });
});
