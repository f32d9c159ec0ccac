import { describe, expect, it } from "vitest";
import { extractMessages, spanGenAi } from "../../src/search/extract.js";
import type { AttrValue } from "../../src/search/otlp-types.js";
import { event, span } from "./corpus.js";

const rows = (attributes: Parameters<typeof span>[2], extra: Parameters<typeof span>[3] = {}) =>
  extractMessages(span(1, 0, attributes, extra)).map((m) => [m.role, m.content]);

describe("message extraction", () => {
  it("reads structured and JSON-string messages alike", () => {
    const messages: AttrValue[] = [
      { role: "user", parts: [{ type: "text", content: "hi" }] },
      { role: "assistant", parts: [{ type: "text", content: "hello" }], finish_reason: "stop" },
    ];
    const expected = [
      ["user", "hi"],
      ["assistant", "hello"],
    ];
    expect(rows({ "gen_ai.input.messages": messages })).toEqual(expected);
    expect(rows({ "gen_ai.input.messages": JSON.stringify(messages) })).toEqual(expected);
  });

  it("orders system instructions, input and output, with default roles", () => {
    expect(
      rows({
        "gen_ai.output.messages": [{ parts: [{ type: "text", content: "out" }] }],
        "gen_ai.input.messages": [{ parts: [{ type: "text", content: "in" }] }],
        "gen_ai.system_instructions": [
          { type: "text", content: "be brief" },
          { type: "text", content: "be kind" },
        ],
      }),
    ).toEqual([
      ["system", "be brief\nbe kind"],
      ["user", "in"],
      ["assistant", "out"],
    ]);
    expect(rows({ "gen_ai.system_instructions": "plain system text" })).toEqual([["system", "plain system text"]]);
    expect(rows({ "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "json system" }]) })).toEqual([["system", "json system"]]);
  });

  it("turns every part type into searchable text", () => {
    const parts: AttrValue[] = [
      { type: "reasoning", content: "thinking it over" },
      { type: "text", content: "answer" },
      { type: "tool_call", id: "c1", name: "search", arguments: { q: "cats" } },
      { type: "tool_call_response", id: "c1", response: ["a", "b"] },
      { type: "tool_call_response", id: "c2", result: "older result field" },
      { type: "blob", modality: "image", mime_type: "image/png", content: "AAAAAAAA" },
      { type: "file", modality: "audio", file_id: "file-123" },
      { type: "uri", modality: "video", uri: "https://example.com/v.mp4" },
      { type: "server_tool_call", content: "custom content" },
      { type: "mystery" },
    ];
    expect(rows({ "gen_ai.output.messages": [{ role: "assistant", parts }] })).toEqual([
      [
        "assistant",
        "thinking it over\nanswer\n[image blob image/png, 6 bytes]\n[audio file, file-123]\n[video uri, https://example.com/v.mp4]\ncustom content\n[mystery]",
      ],
      ["tool_call", 'search({"q":"cats"})'],
      ["tool_result", '["a","b"]'],
      ["tool_result", "older result field"],
    ]);
  });

  it("keeps producers' roles, maps their synonyms and keeps an explicit empty role", () => {
    const messages = [
      { role: "developer", parts: [{ type: "text", content: "a" }] },
      { role: "model", parts: [{ type: "text", content: "b" }] },
      { role: "tool", parts: [{ type: "text", content: "c" }] },
      { role: "", parts: [{ type: "text", content: "d" }] },
      { role: "System", parts: [{ type: "text", content: "e" }] },
    ];
    expect(rows({ "gen_ai.input.messages": messages })).toEqual([
      ["system", "a"],
      ["assistant", "b"],
      ["tool", "c"],
      ["", "d"],
      ["system", "e"],
    ]);
  });

  it("accepts chat-style messages with string content and tool_calls", () => {
    expect(
      rows({
        "gen_ai.input.messages": [
          { role: "user", content: '{"looks": "like json"}' },
          { role: "assistant", content: null, tool_calls: [{ id: "x", type: "function", function: { name: "f", arguments: '{"a":1}' } }] },
        ],
      }),
    ).toEqual([
      ["user", '{"looks": "like json"}'],
      ["tool_call", 'f({"a":1})'],
    ]);
  });

  it("reads tool-call arguments and results on execute_tool spans", () => {
    expect(
      rows({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_9",
        "gen_ai.tool.call.arguments": { city: "Paris" },
        "gen_ai.tool.call.result": "rainy, 12 C",
      }),
    ).toEqual([
      ["tool_call", 'get_weather({"city":"Paris"})'],
      ["tool_result", "rainy, 12 C"],
    ]);
    // The same arguments as a JSON string give the same text, hence the same digest.
    expect(rows({ "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.arguments": '{ "city": "Paris" }' })).toEqual([["tool_call", 'get_weather({"city":"Paris"})']]);
  });

  it("reads the older per-message span events", () => {
    const events = [
      event("gen_ai.system.message", { content: "sys" }),
      event("gen_ai.user.message", { content: "usr" }),
      event("gen_ai.assistant.message", { content: "asst", tool_calls: [{ id: "1", type: "function", function: { name: "lookup", arguments: { k: 1 } } }] }),
      event("gen_ai.tool.message", { content: "tool output", id: "1" }),
      event("gen_ai.choice", { index: 0, finish_reason: "stop", message: { role: "assistant", content: "final" } }),
      event("gen_ai.choice", { index: 1, "message.content": "flattened choice" }),
      event("gen_ai.content.prompt", { "gen_ai.prompt": JSON.stringify([{ role: "user", content: "first-generation prompt" }]) }),
      event("gen_ai.content.completion", { "gen_ai.completion": "first-generation completion" }),
      event("exception", { "exception.message": "not a message" }),
    ];
    expect(rows({}, { events })).toEqual([
      ["system", "sys"],
      ["user", "usr"],
      ["assistant", "asst"],
      ["tool_call", 'lookup({"k":1})'],
      ["tool", "tool output"],
      ["assistant", "final"],
      ["assistant", "flattened choice"],
      ["user", "first-generation prompt"],
      ["assistant", "first-generation completion"],
    ]);
  });

  it("reads indexed gen_ai.prompt.N and gen_ai.completion.N attributes in numeric order", () => {
    expect(
      rows({
        "gen_ai.prompt.10.role": "user",
        "gen_ai.prompt.10.content": "eleventh",
        "gen_ai.prompt.2.content": "third, no role",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "first",
        "gen_ai.completion.0.content": "reply",
        "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.completion.0.tool_calls.0.name": "calc",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"x":2}',
      }),
    ).toEqual([
      ["system", "first"],
      ["user", "third, no role"],
      ["user", "eleventh"],
      ["assistant", "reply"],
      ["tool_call", 'calc({"x":2})'],
    ]);
  });

  it("treats a non-JSON message attribute as one message and skips empty content", () => {
    expect(rows({ "gen_ai.input.messages": "just text", "gen_ai.output.messages": [{ role: "assistant", parts: [{ type: "text", content: "" }] }] })).toEqual([
      ["user", "just text"],
    ]);
    expect(rows({ "http.method": "GET" })).toEqual([]);
  });
});

describe("span GenAI metadata", () => {
  it("reads current attributes", () => {
    const meta = spanGenAi(
      span(1, 0, {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "ignored",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.agent.name": "helper",
        "gen_ai.conversation.id": "c1",
        "gen_ai.conversation.name": "Trip",
      }),
    );
    expect(meta).toEqual({
      operationName: "chat",
      providerName: "openai",
      requestModel: "gpt-4o",
      responseModel: "gpt-4o-2024-08-06",
      agentName: "helper",
      conversationId: "c1",
      conversationName: "Trip",
    });
  });

  it("falls back to gen_ai.system and to the invoke_agent span name", () => {
    const meta = spanGenAi(span(1, 0, { "gen_ai.system": "anthropic" }, { name: "invoke_agent Travel Planner" }));
    expect(meta.providerName).toBe("anthropic");
    expect(meta.agentName).toBe("Travel Planner");
    expect(spanGenAi(span(1, 0, {}, { name: "chat gpt-4o" })).agentName).toBe("");
  });
});
