import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaEngine } from "../../src/inference/llama-engine.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Tell me something." }];

describe("a model routed to an upstream OpenAI-compatible engine", () => {
  let upstream: TestServer;
  let front: TestServer;
  beforeAll(async () => {
    upstream = await startTestServer({ env: { GYRE_THREADS: "1", GYRE_WORKER: "off" } });
    front = await startTestServer({ env: { GYRE_THREADS: "1", GYRE_WORKER: "off" } });
    process.env.GYRE_TEST_UPSTREAM_KEY = upstream.key;
    await front.context.registry.addUpstream("remote-tiny", { url: `${upstream.url("inference")}/v1`, model: "tiny-chat", keyEnv: "GYRE_TEST_UPSTREAM_KEY" });
    await front.context.registry.addUpstream("unreachable", { url: "http://127.0.0.1:9/v1", model: "x" });
  });
  afterAll(async () => {
    await front?.close();
    await upstream?.close();
  });

  it("answers plain and streamed requests through the upstream, and records usage the same way", async () => {
    const direct = new OpenAI({ apiKey: upstream.key, baseURL: `${upstream.url("inference")}/v1`, maxRetries: 0 });
    const client = new OpenAI({ apiKey: front.key, baseURL: `${front.url("inference")}/v1`, project: "local/routed", maxRetries: 0 });
    const ask = { messages, max_tokens: 12, seed: 3, temperature: 0.8 };
    const expected = await direct.chat.completions.create({ model: "tiny-chat", ...ask });
    const routed = await client.chat.completions.create({ model: "remote-tiny", ...ask });
    expect(routed.model).toBe("remote-tiny");
    expect(routed.choices[0].message.content).toBe(expected.choices[0].message.content);
    expect(routed.usage).toEqual(expected.usage);

    let streamed = "";
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of await client.chat.completions.create({ model: "remote-tiny", ...ask, stream: true, stream_options: { include_usage: true } })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
      expect(chunk.model).toBe("remote-tiny");
    }
    expect(streamed).toBe(expected.choices[0].message.content);
    expect(usage).toEqual(expected.usage);

    const totals = await (await fetch(`${front.url("inference")}/v1/usage?project=local/routed`, { headers: { Authorization: `Bearer ${front.key}` } })).json();
    expect(totals.data).toEqual([expect.objectContaining({ model: "remote-tiny", requests: 2, total_tokens: 2 * expected.usage!.total_tokens })]);
    expect((await client.models.list()).data.map((m) => m.id)).toContain("remote-tiny");
  });

  it("answers 503 when the upstream cannot be reached", async () => {
    const client = new OpenAI({ apiKey: front.key, baseURL: `${front.url("inference")}/v1`, maxRetries: 0 });
    const err = await client.chat.completions.create({ model: "unreachable", messages }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err.status).toBe(503);
  });
});

describe("a client that goes away", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { GYRE_THREADS: "1", GYRE_WORKER: "off", GYRE_PARALLEL: "1" } });
  });
  afterAll(async () => s?.close());

  it("cancels its generation and frees the sequence", async () => {
    const engine = (await s.context.engines.engineFor((await s.context.registry.get("tiny-chat"))!)) as LlamaEngine;
    const controller = new AbortController();
    const res = await fetch(`${s.url("inference")}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny-chat", messages, max_tokens: 1500, temperature: 1, stream: true }),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    expect(engine.activity.active).toBe(1);
    controller.abort();
    const deadline = Date.now() + 30_000;
    while (engine.activity.active > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(engine.activity).toEqual({ active: 0, queued: 0 });
    // The one sequence is free again: the next request is served.
    const next = await new OpenAI({ apiKey: s.key, baseURL: `${s.url("inference")}/v1`, maxRetries: 0 }).chat.completions.create({ model: "tiny-chat", messages, max_tokens: 4 });
    expect(next.choices[0].message.role).toBe("assistant");
    const usage = await (await fetch(`${s.url("inference")}/v1/usage`, { headers: { Authorization: `Bearer ${s.key}` } })).json();
    expect(usage.data[0].requests).toBe(1);
  });
});
