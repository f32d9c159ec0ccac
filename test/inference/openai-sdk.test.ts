import OpenAI from "openai";
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inferenceClient } from "../helpers/contract.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

/** The official OpenAI SDK, unmodified, against the inference service on the built-in tiny model. */
describe("inference service with the OpenAI SDK", () => {
  let s: TestServer;
  let client: OpenAI;
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "Say something." },
  ];

  beforeAll(async () => {
    s = await startTestServer({ env: { GYRE_THREADS: "1", GYRE_WORKER: "off" } });
    client = new OpenAI({ apiKey: s.key, baseURL: `${s.url("inference")}/v1`, project: "local/agents", maxRetries: 0 });
  });
  afterAll(async () => s?.close());

  it("lists the models with their architecture and context length", async () => {
    const page = await client.models.list();
    const tiny = page.data.find((m) => m.id === "tiny-chat") as OpenAI.Model & { architecture?: string; context_length?: number };
    expect(tiny).toMatchObject({ object: "model", owned_by: "gyre", architecture: "llama", context_length: 2048 });
  });

  it("completes a chat with exact usage, and the same seed gives the same answer", async () => {
    const ask = () => client.chat.completions.create({ model: "tiny-chat", messages, max_completion_tokens: 12, seed: 11, temperature: 0.9 });
    const a = await ask();
    const b = await ask();
    expect(a.object).toBe("chat.completion");
    expect(a.model).toBe("tiny-chat");
    expect(a.choices[0].message.role).toBe("assistant");
    expect(typeof a.choices[0].message.content).toBe("string");
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
    expect(a.usage!.completion_tokens).toBeGreaterThan(0);
    expect(a.usage!.completion_tokens).toBeLessThanOrEqual(12);
    expect(a.usage!.total_tokens).toBe(a.usage!.prompt_tokens + a.usage!.completion_tokens);
    if (a.usage!.completion_tokens === 12) expect(a.choices[0].finish_reason).toBe("length");
  });

  it("streams chunks that add up to the same answer, with usage last when asked", async () => {
    const whole = await client.chat.completions.create({ model: "tiny-chat", messages, max_tokens: 16, temperature: 0 });
    const stream = await client.chat.completions.create({ model: "tiny-chat", messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let usage: OpenAI.CompletionUsage | undefined;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta.content ?? "";
        finish = c.finish_reason ?? finish;
      }
    }
    expect(text).toBe(whole.choices[0].message.content);
    expect(finish).toBe(whole.choices[0].finish_reason);
    expect(usage).toEqual(whole.usage);
  });

  it("returns n choices", async () => {
    const r = await client.chat.completions.create({ model: "tiny-chat", messages, max_tokens: 6, n: 3, seed: 5 });
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
  });

  it("returns the model's log-probabilities", async () => {
    const r = await client.chat.completions.create({ model: "tiny-chat", messages, max_tokens: 5, logprobs: true, top_logprobs: 3, temperature: 1 });
    const content = r.choices[0].logprobs!.content!;
    expect(content.length).toBe(r.usage!.completion_tokens);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.top_logprobs).toHaveLength(3);
      const sorted = [...t.top_logprobs].sort((x, y) => y.logprob - x.logprob);
      expect(t.top_logprobs).toEqual(sorted);
      expect(Buffer.from(t.bytes!).toString("utf8")).toBe(t.token);
    }
  });

  it("calls a named tool with arguments that parse", async () => {
    const r = await client.chat.completions.create({
      model: "tiny-chat",
      messages: [{ role: "user", content: "Weather in Paris?" }],
      max_tokens: 80,
      tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 } }, required: ["city"] } } }],
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const call = r.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(r.choices[0].finish_reason).toBe("tool_calls");
    expect(call.function.name).toBe("get_weather");
    expect(typeof JSON.parse(call.function.arguments).city).toBe("string");
  });

  it("follows a JSON schema", async () => {
    const schema = { type: "object", properties: { answer: { type: "string", maxLength: 10 }, score: { type: "integer" } }, required: ["answer", "score"], additionalProperties: false };
    const r = await client.chat.completions.create({
      model: "tiny-chat",
      messages,
      max_tokens: 60,
      response_format: { type: "json_schema", json_schema: { name: "verdict", schema, strict: true } },
    });
    const value = JSON.parse(r.choices[0].message.content!);
    const ajv = new Ajv();
    expect(ajv.validate(schema, value), `${r.choices[0].message.content} ${ajv.errorsText()}`).toBe(true);
  });

  it("attributes usage to the project and reports totals", async () => {
    const { data, response } = await inferenceClient(s.url("inference"), s.key).GET("/v1/usage", { params: { query: { project: "local/agents" } } });
    expect(response.status).toBe(200);
    const row = data!.data.find((r) => r.model === "tiny-chat")!;
    expect(row.project).toBe("local/agents");
    expect(row.requests).toBeGreaterThanOrEqual(7);
    expect(row.total_tokens).toBe(row.prompt_tokens + row.completion_tokens);
  });

  describe("error statuses, as the SDK raises them", () => {
    it("401 for a bad key", async () => {
      const bad = new OpenAI({ apiKey: "gyre_wrong", baseURL: `${s.url("inference")}/v1`, maxRetries: 0 });
      await expect(bad.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    });
    it("403 for a project of another entity", async () => {
      const other = new OpenAI({ apiKey: s.key, baseURL: `${s.url("inference")}/v1`, project: "someone-else/agents", maxRetries: 0 });
      await expect(other.chat.completions.create({ model: "tiny-chat", messages })).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
    });
    it("404 for an unknown model", async () => {
      const err = await client.chat.completions.create({ model: "no-such-model", messages }).catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.NotFoundError);
      expect(err.code).toBe("model_not_found");
    });
    it("400 for an invalid request, naming the parameter", async () => {
      const err = await client.chat.completions.create({ model: "tiny-chat", messages, top_logprobs: 50 }).catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.param).toBe("top_logprobs");
    });
    it("400 for a logit_bias on an end-of-generation token, which llama.cpp would ignore", async () => {
      const imEnd = 1049; // <|im_end|> of the built-in model
      const err = await client.chat.completions.create({ model: "tiny-chat", messages, logit_bias: { [imEnd]: -100 } }).catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.param).toBe("logit_bias");
      const ok = await client.chat.completions.create({ model: "tiny-chat", messages, max_tokens: 4, logit_bias: { 300: -100 } });
      expect(ok.choices).toHaveLength(1);
    });
    it("400 for what the engine cannot honour", async () => {
      const err = await client.chat.completions.create({
        model: "tiny-chat",
        messages,
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", pattern: "^a+$" } } },
      }).catch((e) => e);
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    });
  });
});

describe("inference limits", () => {
  let s: TestServer;
  afterAll(async () => s?.close());

  it("429 when the engine's queue is full, and 402 when the token quota is used up", async () => {
    s = await startTestServer({ env: { GYRE_THREADS: "1", GYRE_WORKER: "off", GYRE_PARALLEL: "1", GYRE_MAX_QUEUE: "1", GYRE_TOKEN_QUOTA: "400" } });
    const client = new OpenAI({ apiKey: s.key, baseURL: `${s.url("inference")}/v1`, maxRetries: 0 });
    const long = () => client.chat.completions.create({ model: "tiny-chat", messages: [{ role: "user", content: "go" }], max_tokens: 150, temperature: 1, seed: 1 });
    const results = await Promise.allSettled([long(), long(), long(), long()]);
    const limited = results.filter((r) => r.status === "rejected" && r.reason instanceof OpenAI.RateLimitError);
    expect(limited.length).toBeGreaterThan(0);
    expect(results.some((r) => r.status === "fulfilled")).toBe(true);
    // The fulfilled requests used at least 150 tokens each of the 400; a few more use it up.
    let quotaError: unknown;
    for (let i = 0; i < 5 && !quotaError; i++) await long().catch((e) => (quotaError = e));
    expect(quotaError).toBeInstanceOf(OpenAI.APIError);
    expect((quotaError as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
  });
});
