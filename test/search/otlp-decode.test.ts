import zlib from "node:zlib";
import { describe, expect, it } from "vitest";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { context, SpanKind, trace } from "@opentelemetry/api";
import { decodeJsonTraceRequest, decodeTraceRequest } from "../../src/search/otlp-decode.js";
import { encodeTraceResponse } from "../../src/search/otlp-response.js";
import { OtlpDecodeError } from "../../src/search/otlp-types.js";

/** Spans recorded by the real OpenTelemetry SDK. */
function recordSpans(): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "agent", "gyre.entity": "acme", "gyre.project": "bot" }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("agent-lib", "1.2.3");
  const parent = tracer.startSpan("invoke_agent helper");
  const attributes = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.max_tokens": 200,
    "gen_ai.request.temperature": 0.5,
    "gen_ai.request.stop_sequences": ["END", "STOP"],
    "gen_ai.input.messages": JSON.stringify([{ role: "user", parts: [{ type: "text", content: "héllo 世界" }] }]),
    streaming: true,
  };
  const startTime = new Date("2026-01-01T00:00:01.000Z");
  const child = tracer.startSpan("chat gpt-4o", { kind: SpanKind.CLIENT, startTime, attributes }, trace.setSpan(context.active(), parent));
  child.addEvent("gen_ai.user.message", { content: "old style" }, new Date("2026-01-01T00:00:01.500Z"));
  child.end(new Date("2026-01-01T00:00:02.000Z"));
  parent.end();
  return exporter.getFinishedSpans();
}

describe("OTLP decoding", () => {
  const sdkSpans = recordSpans();

  for (const [label, serialize, contentType] of [
    ["protobuf", (s: ReadableSpan[]) => ProtobufTraceSerializer.serializeRequest(s), "application/x-protobuf"],
    ["JSON", (s: ReadableSpan[]) => JsonTraceSerializer.serializeRequest(s), "application/json; charset=utf-8"],
  ] as const) {
    it(`decodes what the SDK's ${label} serializer writes`, () => {
      const body = serialize(sdkSpans) as Uint8Array;
      const { spans, encoding } = decodeTraceRequest(body, { contentType });
      expect(encoding).toBe(label === "protobuf" ? "protobuf" : "json");
      expect(spans).toHaveLength(2);
      const chat = spans.find((s) => s.name === "chat gpt-4o")!;
      const agent = spans.find((s) => s.name === "invoke_agent helper")!;
      const sdkChat = sdkSpans.find((s) => s.name === "chat gpt-4o")!;
      expect(chat.traceId).toBe(sdkChat.spanContext().traceId);
      expect(chat.spanId).toBe(sdkChat.spanContext().spanId);
      expect(chat.parentSpanId).toBe(agent.spanId);
      expect(agent.parentSpanId).toBe("");
      expect(chat.kind).toBe(3); // OTLP SPAN_KIND_CLIENT
      expect(chat.startTimeUnixNano).toBe(BigInt(Date.parse("2026-01-01T00:00:01.000Z")) * 1_000_000n);
      expect(chat.endTimeUnixNano).toBe(BigInt(Date.parse("2026-01-01T00:00:02.000Z")) * 1_000_000n);
      expect(chat.resource).toMatchObject({ "service.name": "agent", "gyre.entity": "acme", "gyre.project": "bot" });
      expect(chat.scope).toEqual({ name: "agent-lib", version: "1.2.3" });
      expect(chat.attributes).toEqual({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.max_tokens": 200,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.stop_sequences": ["END", "STOP"],
        "gen_ai.input.messages": JSON.stringify([{ role: "user", parts: [{ type: "text", content: "héllo 世界" }] }]),
        streaming: true,
      });
      expect(chat.events).toEqual([
        { name: "gen_ai.user.message", timeUnixNano: BigInt(Date.parse("2026-01-01T00:00:01.500Z")) * 1_000_000n, attributes: { content: "old style" } },
      ]);
    });
  }

  it("decompresses gzip and both forms of deflate", () => {
    const body = ProtobufTraceSerializer.serializeRequest(sdkSpans) as Uint8Array;
    for (const [encoding, compressed] of [
      ["gzip", zlib.gzipSync(body)],
      ["deflate", zlib.deflateSync(body)],
      ["deflate", zlib.deflateRawSync(body)],
    ] as const) {
      expect(decodeTraceRequest(compressed, { contentType: "application/x-protobuf", contentEncoding: encoding }).spans).toHaveLength(2);
    }
  });

  it("reads hand-written OTLP JSON: snake_case, enum names, int64 strings, nested AnyValues", () => {
    const json = {
      resource_spans: [
        {
          resource: { attributes: [{ key: "wandb.entity", value: { stringValue: "acme" } }] },
          scope_spans: [
            {
              scope: { name: "s" },
              spans: [
                {
                  trace_id: "5B8EFFF798038103D269B633813FC60C",
                  span_id: "EEE19B7EC3C1B174",
                  name: "x",
                  kind: "SPAN_KIND_SERVER",
                  start_time_unix_nano: "1767225600123456789",
                  endTimeUnixNano: 1767225601000000000,
                  attributes: [
                    { key: "big", value: { intValue: "9007199254740993" } },
                    { key: "small", value: { intValue: "42" } },
                    { key: "nan", value: { doubleValue: "NaN" } },
                    { key: "bytes", value: { bytesValue: "AAEC" } },
                    { key: "empty", value: {} },
                    {
                      key: "msgs",
                      value: {
                        arrayValue: {
                          values: [{ kvlistValue: { values: [{ key: "role", value: { stringValue: "user" } }, { key: "n", value: { intValue: 1 } }] } }],
                        },
                      },
                    },
                  ],
                },
              ],
            },
          ],
        },
      ],
    };
    const [span] = decodeTraceRequest(new TextEncoder().encode(JSON.stringify(json)), { contentType: "application/json" }).spans;
    expect(span.traceId).toBe("5b8efff798038103d269b633813fc60c");
    expect(span.spanId).toBe("eee19b7ec3c1b174");
    expect(span.kind).toBe(2);
    expect(span.startTimeUnixNano).toBe(1767225600123456789n);
    expect(span.resource).toEqual({ "wandb.entity": "acme" });
    expect(span.attributes).toEqual({ big: "9007199254740993", small: 42, nan: NaN, bytes: "AAEC", empty: null, msgs: [{ role: "user", n: 1 }] });
    // A body the HTTP layer has already parsed decodes the same way.
    expect(decodeJsonTraceRequest(json)).toEqual([span]);
  });

  it("turns malformed bodies into typed errors", () => {
    const bad: [Uint8Array, string, string | undefined, string][] = [
      [new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), "application/x-protobuf", undefined, "malformed"],
      [new Uint8Array([0x0a, 0x05, 0x12, 0x03]), "application/x-protobuf", undefined, "malformed"],
      [new Uint8Array([0x0b]), "application/x-protobuf", undefined, "malformed"],
      [new TextEncoder().encode("{nope"), "application/json", undefined, "malformed"],
      [new TextEncoder().encode('{"resourceSpans": 3}'), "application/json", undefined, "malformed"],
      [new TextEncoder().encode('{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"soon"}]}]}]}'), "application/json", undefined, "malformed"],
      [new Uint8Array([1, 2, 3]), "application/x-protobuf", "gzip", "malformed"],
      [new Uint8Array([1, 2, 3]), "text/plain", undefined, "unsupported_media_type"],
      [new Uint8Array([1, 2, 3]), "application/json", "br", "unsupported_media_type"],
      [zlib.gzipSync(Buffer.alloc(2048)), "application/x-protobuf", "gzip", "too_large"],
    ];
    for (const [body, contentType, contentEncoding, kind] of bad) {
      let error: unknown;
      try {
        decodeTraceRequest(body, { contentType, contentEncoding, maxBytes: 1024 });
      } catch (err) {
        error = err;
      }
      expect(error, `${contentType} ${Buffer.from(body).toString("hex")}`).toBeInstanceOf(OtlpDecodeError);
      expect((error as OtlpDecodeError).kind).toBe(kind);
    }
  });

  it("accepts an empty request", () => {
    expect(decodeTraceRequest(new Uint8Array(), { contentType: "application/x-protobuf" }).spans).toEqual([]);
    expect(decodeTraceRequest(new TextEncoder().encode("{}"), { contentType: "application/json" }).spans).toEqual([]);
  });
});

describe("OTLP response encoding", () => {
  it("writes partial_success that the SDK reads back", () => {
    const proto = encodeTraceResponse({ rejected: 2, errorMessage: "span 0: bad id" }, "protobuf");
    expect(proto.contentType).toBe("application/x-protobuf");
    const decoded = ProtobufTraceSerializer.deserializeResponse(proto.body);
    expect(Number(decoded.partialSuccess?.rejectedSpans)).toBe(2);
    expect(decoded.partialSuccess?.errorMessage).toBe("span 0: bad id");
    expect(ProtobufTraceSerializer.deserializeResponse(encodeTraceResponse({ rejected: 0, errorMessage: "" }, "protobuf").body)).toEqual({});

    const json = encodeTraceResponse({ rejected: 1, errorMessage: "no project" }, "json");
    expect(JSON.parse(new TextDecoder().decode(json.body))).toEqual({ partialSuccess: { rejectedSpans: "1", errorMessage: "no project" } });
    expect(JSON.parse(new TextDecoder().decode(encodeTraceResponse({ rejected: 0, errorMessage: "" }, "json").body))).toEqual({});
  });
});
