import type { AttrMap, OtlpEvent, OtlpSpan } from "../../src/search/otlp-types.js";

export const T0_MS = Date.parse("2026-01-01T00:00:00.000Z");
export const iso = (seconds: number) => new Date(T0_MS + seconds * 1000).toISOString();
export const traceId = (n: number) => n.toString(16).padStart(32, "0");
export const spanId = (n: number) => n.toString(16).padStart(16, "0");

let counter = 0;

/** A span as the decoder produces it, starting `seconds` after T0. */
export function span(trace: number, seconds: number, attributes: AttrMap, extra: Partial<OtlpSpan> = {}): OtlpSpan {
  counter++;
  const start = BigInt(T0_MS + seconds * 1000) * 1_000_000n;
  return {
    resource: { "service.name": "test" },
    scope: { name: "test", version: "1" },
    traceId: traceId(trace),
    spanId: spanId(counter),
    parentSpanId: "",
    name: "chat",
    kind: 3,
    startTimeUnixNano: start,
    endTimeUnixNano: start + 500_000_000n,
    attributes,
    events: [],
    position: { resource: 0, scope: 0, span: counter },
    ...extra,
  };
}

export function event(name: string, attributes: AttrMap): OtlpEvent {
  return { name, timeUnixNano: 0n, attributes };
}

export const SYSTEM_PROMPT = "You are a helpful support agent.";
export const LONG_TOOL_OUTPUT = "x".repeat(499) + "😀" + " tail words here";

/** The shared corpus: project acme/bot, with a decoy in other/bot. */
export function corpus(): { project: string; spans: OtlpSpan[]; other: OtlpSpan[] } {
  counter = 0;
  const chat = { "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o" };
  const spans = [
    // conversation conv-a, trace 1: structured attributes, then an execute_tool span, then JSON strings
    span(1, 1, {
      ...chat,
      "gen_ai.agent.name": "support",
      "gen_ai.conversation.id": "conv-a",
      "gen_ai.conversation.name": "Refund chat",
      "gen_ai.system_instructions": [{ type: "text", content: SYSTEM_PROMPT }],
      "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content: "I want a refund for order 1234" }] }],
      "gen_ai.output.messages": [
        {
          role: "assistant",
          parts: [
            { type: "text", content: "Let me check order 1234" },
            { type: "tool_call", id: "call_1", name: "get_order", arguments: { id: 1234 } },
          ],
          finish_reason: "tool_call",
        },
      ],
    }),
    span(
      1,
      2,
      {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.conversation.id": "conv-a",
        "gen_ai.tool.name": "get_order",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"id":1234}',
        "gen_ai.tool.call.result": LONG_TOOL_OUTPUT,
      },
      { name: "execute_tool get_order" },
    ),
    span(1, 3, {
      ...chat,
      "gen_ai.agent.name": "support",
      "gen_ai.conversation.id": "conv-a",
      "gen_ai.conversation.name": "Refund for order 1234",
      "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: SYSTEM_PROMPT }]),
      "gen_ai.input.messages": JSON.stringify([
        { role: "user", parts: [{ type: "text", content: "I want a refund for order 1234" }] },
        { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: { status: "broken" } }] },
      ]),
      "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: "Your refund is approved" }] }]),
    }),
    // conversation conv-b, trace 2: another agent, provider and model
    span(2, 10, {
      "gen_ai.operation.name": "chat",
      "gen_ai.system": "anthropic",
      "gen_ai.request.model": "claude-3",
      "gen_ai.agent.name": "sales",
      "gen_ai.conversation.id": "conv-b",
      "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content: "What is the PRICE of the Refund plan?" }] }],
      "gen_ai.output.messages": [{ role: "assistant", parts: [{ type: "text", content: "The price is 10 dollars" }] }],
    }),
    // trace 3, no conversation id: older span events, agent name from the span name
    span(
      3,
      20,
      { "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o" },
      {
        name: "invoke_agent planner",
        events: [
          event("gen_ai.system.message", { content: "Plan carefully." }),
          event("gen_ai.user.message", { content: "order status please" }),
          event("gen_ai.choice", { index: 0, finish_reason: "stop", message: { content: "Order 1234 shipped" } }),
        ],
      },
    ),
    // trace 4, no conversation id: indexed attributes
    span(4, 30, {
      "gen_ai.system": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.prompt.0.role": "user",
      "gen_ai.prompt.0.content": "hello world refund",
      "gen_ai.completion.0.role": "assistant",
      "gen_ai.completion.0.content": "hi there",
    }),
  ];
  const other = [
    span(5, 40, { "gen_ai.conversation.id": "conv-x", "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content: "refund elsewhere" }] }] }),
  ];
  return { project: "acme/bot", spans, other };
}
