import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ingestSpans } from "../../src/search/message-store.js";
import { QueryError } from "../../src/search/query.js";
import { searchMessages, type AgentSearchReq, type AgentSearchRes } from "../../src/search/search.js";
import { contentDigest, SEARCH_TEXT_MAX_BYTES } from "../../src/search/text.js";
import { DIALECTS, openTestDatabase, type TestDatabase } from "../helpers/db.js";
import { corpus, iso, LONG_TOOL_OUTPUT, SYSTEM_PROMPT, span, traceId } from "./corpus.js";

const PROJECT = "acme/bot";
const T1 = traceId(1);
const T3 = traceId(3);
const T4 = traceId(4);

/** Conversation ids of a result page, in order. */
const ids = (res: AgentSearchRes) => res.results.map((r) => r.conversation_id);
const previews = (res: AgentSearchRes, conversation: string) =>
  res.results.find((r) => r.conversation_id === conversation)?.matched_messages.map((m) => `${m.role}: ${m.content_preview}`);

describe.each(DIALECTS)("message search on %s", (dialect) => {
  let t: TestDatabase;
  const search = (req: Omit<AgentSearchReq, "project_id">) => searchMessages(t.db, { project_id: PROJECT, ...req });

  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    const { spans, other } = corpus();
    const first = await ingestSpans(t.db, spans, { project: PROJECT });
    expect(first).toEqual({ accepted: 6, rejected: 0, errorMessage: "", messages: 17 });
    await ingestSpans(t.db, other, { project: "other/bot" });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("finds words, newest conversation first, counting every match", async () => {
    const res = await search({ query: "refund" });
    expect(ids(res)).toEqual([`trace:${T4}`, "conv-b", "conv-a"]);
    expect(res.total_conversations).toBe(3);
    expect(res.results[0].last_activity).toBe(iso(30));
    expect(res.results[2].last_activity).toBe(iso(3));
  });

  it("shows repeated content once per role and conversation, at its newest occurrence", async () => {
    const res = await search({ query: "refund", conversation_id: "conv-a" });
    const messages = res.results[0].matched_messages;
    expect(messages.map((m) => [m.role, m.content_preview, m.started_at])).toEqual([
      ["user", "I want a refund for order 1234", iso(3)],
      ["assistant", "Your refund is approved", iso(3)],
    ]);
    expect(messages[0].content_digest).toBe(contentDigest("I want a refund for order 1234"));
    expect(messages[0].trace_id).toBe(T1);
  });

  it("returns every occurrence in chronological order for structured retrieval", async () => {
    const res = await search({ trace_id: T1.toUpperCase(), truncate_content: false });
    expect(res.total_conversations).toBe(1);
    expect(previews(res, "conv-a")).toEqual([
      `system: ${SYSTEM_PROMPT}`,
      "user: I want a refund for order 1234",
      "assistant: Let me check order 1234",
      'tool_call: get_order({"id":1234})',
      'tool_call: get_order({"id":1234})',
      `tool_result: ${LONG_TOOL_OUTPUT}`,
      `system: ${SYSTEM_PROMPT}`,
      "user: I want a refund for order 1234",
      'tool_result: {"status":"broken"}',
      "assistant: Your refund is approved",
    ]);
  });

  it("matches phrases in order and adjacent, case-insensitively", async () => {
    const res = await search({ query: '"ORDER 1234"' });
    expect(ids(res)).toEqual([`trace:${T3}`, "conv-a"]);
    // the repeated user message is shown at its newest occurrence (3 s), after the assistant's (1 s)
    expect(previews(res, "conv-a")).toEqual(["assistant: Let me check order 1234", "user: I want a refund for order 1234"]);
    expect(previews(res, `trace:${T3}`)).toEqual(["assistant: Order 1234 shipped"]);
    expect((await search({ query: '"1234 order"' })).total_conversations).toBe(0);
    expect((await search({ query: '"refund order"' })).total_conversations).toBe(0);
  });

  it("requires every word and term", async () => {
    expect(ids(await search({ query: "price refund" }))).toEqual(["conv-b"]);
    expect(ids(await search({ query: "Price" }))).toEqual(["conv-b"]);
    expect(previews(await search({ query: 'refund "order 1234"' }), "conv-a")).toEqual(["user: I want a refund for order 1234"]);
    // all terms must match in one message, not across a conversation
    expect((await search({ query: 'refund "order 1234" approved' })).total_conversations).toBe(0);
    expect((await search({ query: "refund nosuchword" })).total_conversations).toBe(0);
    // get_order is two words, searched as a phrase
    expect(previews(await search({ query: "get_order" }), "conv-a")).toEqual(['tool_call: get_order({"id":1234})']);
  });

  it("filters by role, with tool as an umbrella", async () => {
    const tool = await search({ roles: ["tool"] });
    expect(previews(tool, "conv-a")).toEqual([
      'tool_call: get_order({"id":1234})',
      'tool_call: get_order({"id":1234})',
      `tool_result: ${LONG_TOOL_OUTPUT.slice(0, 499)}`,
      'tool_result: {"status":"broken"}',
    ]);
    expect(tool.total_conversations).toBe(1);
    const results = await search({ roles: ["tool_result"], query: "broken" });
    expect(previews(results, "conv-a")).toEqual(['tool_result: {"status":"broken"}']);
    const system = await search({ roles: ["system", "user"], query: "order" });
    expect(ids(system)).toEqual([`trace:${T3}`, "conv-a"]);
    expect(previews(system, `trace:${T3}`)).toEqual(["user: order status please"]);
  });

  it("filters by agent, provider, model, conversation and time", async () => {
    expect(ids(await search({ agent_name: "sales" }))).toEqual(["conv-b"]);
    expect(ids(await search({ agent_name: "planner" }))).toEqual([`trace:${T3}`]);
    expect(ids(await search({ provider_name: "anthropic" }))).toEqual(["conv-b"]);
    expect(ids(await search({ request_model: "gpt-4o" }))).toEqual([`trace:${T3}`, "conv-a"]);
    expect(ids(await search({ conversation_id: `trace:${T4}` }))).toEqual([`trace:${T4}`]);
    expect(ids(await search({ started_after: iso(10) }))).toEqual([`trace:${T4}`, `trace:${T3}`, "conv-b"]);
    expect(ids(await search({ started_before: iso(10) }))).toEqual(["conv-a"]);
    expect(ids(await search({ started_after: iso(2), started_before: iso(3) }))).toEqual(["conv-a"]);
    const window = await search({ started_after: iso(2), started_before: iso(3), truncate_content: false });
    expect(window.results[0].matched_messages.map((m) => m.role)).toEqual(["tool_call", "tool_result"]);
    expect(window.results[0].last_activity).toBe(iso(2));
  });

  it("names conversations with the newest non-empty values of their spans", async () => {
    const res = await search({});
    expect(ids(res)).toEqual([`trace:${T4}`, `trace:${T3}`, "conv-b", "conv-a"]);
    const byId = Object.fromEntries(res.results.map((r) => [r.conversation_id, [r.conversation_name, r.agent_name]]));
    expect(byId).toEqual({
      "conv-a": ["Refund for order 1234", "support"],
      "conv-b": ["", "sales"],
      [`trace:${T3}`]: ["", "planner"],
      [`trace:${T4}`]: ["", ""],
    });
  });

  it("pages over conversations and always counts them all", async () => {
    const page = await search({ query: "refund", limit: 1, offset: 1 });
    expect(ids(page)).toEqual(["conv-b"]);
    expect(page.total_conversations).toBe(3);
    expect(await search({ query: "refund", limit: 0 })).toEqual({ results: [], total_conversations: 3 });
    expect(await search({ query: "refund", offset: 10 })).toEqual({ results: [], total_conversations: 3 });
    expect(ids(await search({ limit: 2, offset: 2 }))).toEqual(["conv-b", "conv-a"]);
  });

  it("truncates previews to 500 code units without splitting a surrogate pair", async () => {
    const res = await search({ query: "tail words" });
    const message = res.results[0].matched_messages[0];
    expect(message.content_preview).toBe("x".repeat(499));
    expect(message.content_digest).toBe(contentDigest(LONG_TOOL_OUTPUT));
    const full = await search({ query: "tail words", truncate_content: false });
    expect(full.results[0].matched_messages[0].content_preview).toBe(LONG_TOOL_OUTPUT);
  });

  it("only searches the given project", async () => {
    expect(ids(await search({ query: "elsewhere" }))).toEqual([]);
    const other = await searchMessages(t.db, { project_id: "other/bot", query: "refund" });
    expect(ids(other)).toEqual(["conv-x"]);
  });

  it("stores a span sent twice once", async () => {
    const before = await search({ truncate_content: false });
    const again = await ingestSpans(t.db, corpus().spans, { project: PROJECT });
    expect(again).toEqual({ accepted: 6, rejected: 0, errorMessage: "", messages: 0 });
    expect(await search({ truncate_content: false })).toEqual(before);
    const counts = await t.db("search_spans").where({ project: PROJECT }).count({ n: "*" });
    expect(Number(counts[0].n)).toBe(6);
  });

  it("rejects spans with bad ids or no project and stores the rest", async () => {
    const good = span(9, 50, { "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content: "zebra crossing" }] }] });
    const badTrace = { ...span(9, 50, {}), traceId: "00".repeat(16) };
    const badSpan = { ...span(9, 50, {}), spanId: "abc" };
    const result = await ingestSpans(t.db, [good, badTrace, badSpan]);
    expect(result.accepted).toBe(0);
    expect(result.rejected).toBe(3);
    expect(result.errorMessage).toContain("trace_id must be 16 bytes");
    expect(result.errorMessage).toContain("span_id must be 8 bytes");
    expect(result.errorMessage).toContain("no project");
    const stored = await ingestSpans(t.db, [{ ...good, resource: { "wandb.entity": "acme", "wandb.project": "bot" } }, badSpan]);
    expect(stored).toMatchObject({ accepted: 1, rejected: 1, messages: 1 });
    expect(ids(await search({ query: "zebra" }))).toEqual([`trace:${traceId(9)}`]);
  });

  it("matches Unicode words the same way, and indexes the first SEARCH_TEXT_MAX_BYTES of a huge content", async () => {
    const project = "acme/unicode";
    const filler = "lorem ".repeat(Math.ceil(SEARCH_TEXT_MAX_BYTES / 6));
    const message = (trace: number, content: string) =>
      span(trace, 60, { "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content }] }] });
    await ingestSpans(t.db, [message(20, "Grüße aus KÖLN, ｆｕｌｌｗｉｄｔｈ text and 東京タワー"), message(21, `needle start ${filler} needle end`)], { project });
    const find = async (query: string) => ids(await searchMessages(t.db, { project_id: project, query }));
    const unicode = [`trace:${traceId(20)}`];
    expect(await find("köln")).toEqual(unicode);
    expect(await find("GRÜSSE")).toEqual([]); // no case folding beyond lowercasing: ß stays ß
    expect(await find('"grüße aus köln"')).toEqual(unicode);
    expect(await find("fullwidth")).toEqual(unicode);
    expect(await find("東京タワー")).toEqual(unicode);
    expect(await find("東京")).toEqual([]); // runs of letters are words; no dictionary segmentation
    expect(await find('"needle start"')).toEqual([`trace:${traceId(21)}`]);
    expect(await find('"needle end"')).toEqual([]);
  });

  it("rejects queries without words or with an unclosed quote", async () => {
    await expect(search({ query: "!!! ..." })).rejects.toBeInstanceOf(QueryError);
    await expect(search({ query: '"refund' })).rejects.toThrow(/Unclosed/);
    await expect(search({ query: "refund", limit: 1001 })).rejects.toMatchObject({ loc: ["body", "limit"] });
  });
});
