import { context, trace, type Tracer } from "@opentelemetry/api";
import { OTLPTraceExporter as OTLPHttpJsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as OTLPProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { searchClient } from "../helpers/contract.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/**
 * A multi-turn agent with a tool call, instrumented the way GenAI instrumentations emit it today: an invoke_agent
 * span, chat spans with input/output messages as JSON strings, and an execute_tool span.
 */
function runAgent(tracer: Tracer, conversationId: string, city: string): string {
  let traceId = "";
  tracer.startActiveSpan("invoke_agent travel-agent", { attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel-agent", "gen_ai.conversation.id": conversationId } }, (agent) => {
    traceId = agent.spanContext().traceId;
    // No context manager is registered, so children name their parent explicitly.
    const parent = trace.setSpan(context.active(), agent);
    const chat = (input: unknown[], output: unknown[]) =>
      tracer
        .startSpan("chat tiny-chat", {
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "gyre",
            "gen_ai.request.model": "tiny-chat",
            "gen_ai.conversation.id": conversationId,
            "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: "You plan trips." }]),
            "gen_ai.input.messages": JSON.stringify(input),
            "gen_ai.output.messages": JSON.stringify(output),
          },
        }, parent)
        .end();
    const ask = { role: "user", parts: [{ type: "text", content: `What is the weather in ${city} tomorrow?` }] };
    const call = { role: "assistant", parts: [{ type: "tool_call", id: "call_1", name: "get_weather", arguments: { city } }], finish_reason: "tool_calls" };
    chat([ask], [call]);
    tracer
      .startSpan("execute_tool get_weather", {
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "get_weather",
          "gen_ai.tool.call.id": "call_1",
          "gen_ai.conversation.id": conversationId,
          "gen_ai.tool.call.arguments": JSON.stringify({ city }),
          "gen_ai.tool.call.result": JSON.stringify({ forecast: "drizzle", celsius: 14 }),
        },
      }, parent)
      .end();
    const result = { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: { forecast: "drizzle", celsius: 14 } }] };
    chat([ask, call, result], [{ role: "assistant", parts: [{ type: "text", content: `Expect drizzle in ${city}, around 14 degrees.` }], finish_reason: "stop" }]);
    agent.end();
  });
  return traceId;
}

async function exportWith(exporter: SpanExporter, resource: Record<string, string>, fn: (tracer: Tracer) => string): Promise<string> {
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ "service.name": "travel-bot", ...resource }), spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const traceId = context.with(context.active(), () => fn(provider.getTracer("agent-test")));
  await provider.forceFlush();
  await provider.shutdown();
  return traceId;
}

describe("OpenTelemetry SDK exporters into message search", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { GYRE_WORKER: "off" } });
  });
  afterAll(async () => s?.close());

  it("protobuf exporter: spans land, and the agent's messages are found by words, phrases and trace", async () => {
    const exporter = new OTLPProtoExporter({ url: `${s.url("search")}/agents/otel/v1/traces`, headers: { Authorization: `Bearer ${s.key}`, project_id: "local/travel" } });
    const traceId = await exportWith(exporter, {}, (tracer) => runAgent(tracer, "conv-lisbon", "Lisbon"));
    const api = searchClient(s.url("search"), s.key);

    const found = await api.POST("/agents/search", { body: { project_id: "local/travel", query: "drizzle lisbon" } });
    expect(found.response.status).toBe(200);
    expect(found.data!.total_conversations).toBe(1);
    const conversation = found.data!.results[0];
    expect(conversation).toMatchObject({ conversation_id: "conv-lisbon", agent_name: "travel-agent" });
    expect(conversation.matched_messages.map((m) => m.role)).toContain("assistant");

    const phrase = await api.POST("/agents/search", { body: { project_id: "local/travel", query: '"weather in lisbon"', roles: ["user"] } });
    expect(phrase.data!.results[0].matched_messages).toHaveLength(1);

    const tools = await api.POST("/agents/search", { body: { project_id: "local/travel", query: "get_weather", roles: ["tool"] } });
    expect(new Set(tools.data!.results[0].matched_messages.map((m) => m.role))).toEqual(new Set(["tool_call"]));

    const all = await api.POST("/agents/search", { body: { project_id: "local/travel", trace_id: traceId, truncate_content: false } });
    const roles = all.data!.results[0].matched_messages.map((m) => m.role);
    expect(roles).toEqual(expect.arrayContaining(["system", "user", "assistant", "tool_call", "tool_result"]));
    expect(all.data!.results[0].matched_messages.every((m) => m.trace_id === traceId)).toBe(true);
  });

  it("JSON exporter with the project in resource attributes", async () => {
    const exporter = new OTLPHttpJsonExporter({ url: `${s.url("search")}/otel/v1/traces`, headers: { Authorization: `Bearer ${s.key}` } });
    await exportWith(exporter, { "gyre.entity": "local", "gyre.project": "travel-json" }, (tracer) => runAgent(tracer, "conv-oslo", "Oslo"));
    const found = await searchClient(s.url("search"), s.key).POST("/agents/search", { body: { project_id: "local/travel-json", query: "oslo" } });
    expect(found.data!.results.map((r) => r.conversation_id)).toEqual(["conv-oslo"]);
  });

  it("refuses spans of another entity's project, and malformed bodies, storing nothing", async () => {
    const post = (body: BodyInit, headers: Record<string, string>) =>
      fetch(`${s.url("search")}/agents/otel/v1/traces`, { method: "POST", headers: { Authorization: `Bearer ${s.key}`, ...headers }, body });
    const foreign = await post(JSON.stringify({ resourceSpans: [] }), { "content-type": "application/json", project_id: "other/travel" });
    expect(foreign.status).toBe(403);
    const garbage = await post(Buffer.from([0x0a, 0xff, 0xff, 0xff]), { "content-type": "application/x-protobuf" });
    expect(garbage.status).toBe(400);
    expect((await garbage.json()).detail).toMatch(/OTLP|protobuf|malformed/i);
    const search = await searchClient(s.url("search"), s.key).POST("/agents/search", { body: { project_id: "other/travel", query: "x" } });
    expect(search.response.status).toBe(403);
  });
});
