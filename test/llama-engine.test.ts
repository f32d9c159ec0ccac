import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ControlledEvaluateInputItem } from "node-llama-cpp";
import { writeLoraAdapter } from "../src/gguf/lora-adapter.js";
import { readGgufHeader } from "../src/gguf/reader.js";
import { renderChat } from "../src/inference/chat-render.js";
import { GenerationAbortedError, QueueFullError, UnsupportedRequestError } from "../src/inference/errors.js";
import { LlamaEngine } from "../src/inference/llama-engine.js";
import { SeededRandom } from "../src/inference/random.js";
import { StopMatcher } from "../src/inference/token-text.js";
import { parseToolCalls } from "../src/inference/tool-calls.js";
import { ToolCallHoldback } from "../src/inference/tool-holdback.js";
import type { ChatCompletionChunk, ChatCompletionRequest } from "../src/inference/types.js";
import { tinyModelPath } from "./helpers/tiny-model.js";

let dir: string;
let modelPath: string;
let engine: LlamaEngine;

// One thread: llama.cpp's spinning thread pool slows to a crawl when the machine's cores are shared with other work.
const ENGINE = { gpu: false as const, contextSize: 1024, parallel: 3, maxQueue: 4, threads: 1 };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "llama-engine-test-"));
  modelPath = await tinyModelPath("llama");
  engine = await LlamaEngine.load({ modelPath, ...ENGINE });
});
afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

function request(extra: Partial<ChatCompletionRequest> = {}): ChatCompletionRequest {
  return { model: "tiny", messages: [{ role: "user", content: "What is the weather in Paris today?" }], max_tokens: 16, ...extra };
}

describe("LlamaEngine", () => {
  it("is deterministic for a seed and greedy decoding, and varies with the seed", async () => {
    const a = await engine.complete(request({ seed: 11, temperature: 1 }));
    const b = await engine.complete(request({ seed: 11, temperature: 1 }));
    const c = await engine.complete(request({ seed: 12, temperature: 1 }));
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
    expect(c.choices[0].message.content).not.toBe(a.choices[0].message.content);
    const g1 = await engine.complete(request({ temperature: 0 }));
    const g2 = await engine.complete(request({ temperature: 0, seed: 99 }));
    expect(g1.choices[0].message.content).toBe(g2.choices[0].message.content);
    expect(a.object).toBe("chat.completion");
    expect(engine.info).toMatchObject({ architecture: "llama", trainContextSize: 2048, contextSize: 1024 });
    expect(engine.info.parameters).toBeGreaterThan(1_000_000);
    expect(a.id).toMatch(/^chatcmpl-/);
  });

  it("counts tokens exactly and stops at max_tokens with finish_reason length", async () => {
    const r = await engine.complete(request({ max_tokens: 7, temperature: 0 }));
    expect(r.choices[0].finish_reason).toBe("length");
    expect(r.usage.completion_tokens).toBe(7);
    expect(r.usage.prompt_tokens).toBe(await engine.countPromptTokens(request()));
    const rendered = renderChat(engine.template, { messages: request().messages });
    expect(r.usage.prompt_tokens).toBe(engine.model.tokenize(rendered, true).length);
    expect(r.usage.total_tokens).toBe(r.usage.prompt_tokens + 7);
  });

  it("cuts the text before a stop string", async () => {
    const base = await engine.complete(request({ temperature: 0, max_tokens: 24 }));
    const text = base.choices[0].message.content ?? "";
    expect(text.length).toBeGreaterThan(8);
    const stop = text.slice(4, 7);
    const expected = text.slice(0, text.indexOf(stop));
    const r = await engine.complete(request({ temperature: 0, max_tokens: 24, stop: [stop] }));
    expect(r.choices[0].message.content).toBe(expected);
    expect(r.choices[0].finish_reason).toBe("stop");
  });

  it("returns n choices, each sampled with its own seed", async () => {
    const r = await engine.complete(request({ n: 3, seed: 5, temperature: 1 }));
    expect(r.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(new Set(r.choices.map((c) => c.message.content)).size).toBe(3);
    const again = await engine.complete(request({ n: 3, seed: 5, temperature: 1 }));
    expect(again.choices.map((c) => c.message.content)).toEqual(r.choices.map((c) => c.message.content));
    const completion = r.usage.completion_tokens;
    expect(completion).toBeGreaterThanOrEqual(3);
    expect(r.usage.total_tokens).toBe(r.usage.prompt_tokens + completion);
  });

  it("reports the model's log-probabilities with sorted top_logprobs and token bytes", async () => {
    const r = await engine.complete(request({ temperature: 0, max_tokens: 6, logprobs: true, top_logprobs: 5 }));
    const content = r.choices[0].logprobs?.content ?? [];
    expect(content.length).toBe(r.usage.completion_tokens);
    for (const entry of content) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(5);
      const tops = entry.top_logprobs.map((t) => t.logprob);
      expect([...tops].sort((x, y) => y - x)).toEqual(tops);
      // Greedy decoding picks the most probable token.
      expect(entry.top_logprobs[0].token).toBe(entry.token);
      expect(entry.logprob).toBeCloseTo(tops[0], 6);
      expect(tops.reduce((s, l) => s + Math.exp(l), 0)).toBeLessThanOrEqual(1 + 1e-6);
      expect(entry.bytes.length).toBeGreaterThan(0);
    }
    const ascii = content.find((e) => /^[\x20-\x7e]+$/.test(e.token));
    if (ascii) expect(Buffer.from(ascii.bytes).toString("latin1")).toBe(ascii.token);

    // Check against llama.cpp's raw logits for the first generated token: greedy logprobs are their log-softmax.
    const withIds = await engine.complete(request({ temperature: 0, max_tokens: 1, logprobs: true, top_logprobs: 5, return_tokens_as_token_ids: true }));
    const first = withIds.choices[0].logprobs!.content[0];
    const idOf = (t: string): number => Number(t.slice("token_id:".length));
    expect(first.logprob).toBeCloseTo(content[0].logprob, 6);
    const prompt = engine.model.tokenize(renderChat(engine.template, { messages: request().messages }), true);
    const context = await engine.model.createContext({ contextSize: 256, threads: 1 });
    try {
      const sequence = context.getSequence();
      const items: ControlledEvaluateInputItem[] = prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: { logits: true } }] : t));
      const out = await sequence.controlledEvaluate(items);
      const logits = out[prompt.length - 1]?.next.logits as Map<number, number>;
      expect(logits.size).toBe(((await readGgufHeader(modelPath)).metadata["tokenizer.ggml.tokens"] as string[]).length);
      const values = [...logits.values()];
      const max = Math.max(...values);
      const logSum = max + Math.log(values.reduce((acc, v) => acc + Math.exp(v - max), 0));
      expect(first.logprob).toBeCloseTo(logits.get(idOf(first.token))! - logSum, 4);
      for (const top of first.top_logprobs) expect(top.logprob).toBeCloseTo(logits.get(idOf(top.token))! - logSum, 4);
      expect(idOf(first.top_logprobs[0].token)).toBe([...logits.entries()].sort((x, y) => y[1] - x[1])[0][0]);
    } finally {
      await context.dispose();
    }

    const ids = await engine.complete(request({ temperature: 0, max_tokens: 3, logprobs: true, return_tokens_as_token_ids: true }));
    for (const e of ids.choices[0].logprobs?.content ?? []) expect(e.token).toMatch(/^token_id:\d+$/);
  });

  it("enforces a JSON schema by grammar", async () => {
    const schema = {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 12 },
        days: { type: "integer" },
        unit: { enum: ["celsius", "fahrenheit"] },
        rain: { type: "boolean" },
      },
      required: ["city", "days", "unit", "rain"],
      additionalProperties: false,
    };
    const validate = new Ajv().compile(schema);
    for (const seed of [1, 2]) {
      const r = await engine.complete(request({
        seed,
        max_tokens: 300,
        response_format: { type: "json_schema", json_schema: { name: "forecast", schema, strict: true } },
      }));
      expect(r.choices[0].finish_reason).toBe("stop");
      const value: unknown = JSON.parse(r.choices[0].message.content ?? "");
      expect(validate(value), JSON.stringify(validate.errors)).toBe(true);
    }
    // json_object only bounds the syntax, so a random model may run out of tokens inside a string; what ends, parses.
    const objects = await engine.complete(request({ n: 6, seed: 1, max_tokens: 120, response_format: { type: "json_object" } }));
    const finished = objects.choices.filter((c) => c.finish_reason === "stop");
    expect(finished.length).toBeGreaterThan(0);
    for (const c of finished) expect(typeof JSON.parse(c.message.content ?? "")).toBe("object");
    await expect(engine.complete(request({
      response_format: { type: "json_schema", json_schema: { name: "p", schema: { type: "string", pattern: "^a+$" } } },
    }))).rejects.toBeInstanceOf(UnsupportedRequestError);
  });

  it("parses a tool call that the grammar forces", async () => {
    const tools = [
      {
        type: "function" as const,
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string", maxLength: 10 } }, required: ["city"] },
        },
      },
      { type: "function" as const, function: { name: "get_time", parameters: { type: "object", properties: {} } } },
    ];
    const r = await engine.complete(request({
      seed: 3,
      max_tokens: 200,
      tools,
      tool_choice: { type: "function", function: { name: "get_weather" } },
    }));
    const choice = r.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0];
    expect(call.type).toBe("function");
    expect(call.id).toMatch(/^call_/);
    expect(call.function.name).toBe("get_weather");
    expect(typeof (JSON.parse(call.function.arguments) as { city: unknown }).city).toBe("string");

    const required = await engine.complete(request({ seed: 4, max_tokens: 200, tools, tool_choice: "required" }));
    expect(required.choices[0].finish_reason).toBe("tool_calls");
    expect(["get_weather", "get_time"]).toContain(required.choices[0].message.tool_calls?.[0].function.name);
  });

  it("streams deltas that add up to the non-streamed completion, with usage last", async () => {
    const req = request({ seed: 21, temperature: 1, n: 2, max_tokens: 10, logprobs: true });
    const whole = await engine.complete(req);
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of engine.stream({ ...req, stream: true, stream_options: { include_usage: true } })) chunks.push(chunk);
    for (const i of [0, 1]) {
      const mine = chunks.filter((c) => c.choices[0]?.index === i);
      expect(mine[0].choices[0].delta.role).toBe("assistant");
      expect(mine.map((c) => c.choices[0].delta.content ?? "").join("")).toBe(whole.choices[i].message.content);
      expect(mine.at(-1)?.choices[0].finish_reason).toBe(whole.choices[i].finish_reason);
      const streamedLogprobs = mine.flatMap((c) => c.choices[0].logprobs?.content ?? []);
      expect(streamedLogprobs.map((e) => e.token)).toEqual(whole.choices[i].logprobs?.content.map((e) => e.token));
    }
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual(whole.usage);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it("cancels a generation on abort and frees its sequence", async () => {
    const controller = new AbortController();
    const seen: string[] = [];
    const run = (async () => {
      for await (const chunk of engine.stream(request({ max_tokens: 500 }), { signal: controller.signal })) {
        seen.push(chunk.choices[0]?.delta.content ?? "");
        if (seen.length === 3) controller.abort();
      }
    })();
    await expect(run).rejects.toBeInstanceOf(GenerationAbortedError);
    expect(seen.length).toBeLessThan(10);
    expect(engine.activity).toEqual({ active: 0, queued: 0 });
    const after = await engine.complete(request({ max_tokens: 3 }));
    expect(after.choices[0].message).toBeDefined();

    const early = new AbortController();
    early.abort();
    await expect(engine.complete(request(), { signal: early.signal })).rejects.toBeInstanceOf(GenerationAbortedError);
  });

  it("refuses requests when every sequence is busy and the queue is full", async () => {
    const small = await LlamaEngine.load({ modelPath, ...ENGINE, parallel: 1, maxQueue: 1 });
    const controller = new AbortController();
    try {
      const long = request({ max_tokens: 800 });
      const inFlight = Promise.allSettled([
        small.complete(long, { signal: controller.signal }),
        small.complete(long, { signal: controller.signal }),
      ]);
      await expect(small.complete(request())).rejects.toBeInstanceOf(QueueFullError);
      await expect(small.complete(request({ n: 2 }))).rejects.toBeInstanceOf(QueueFullError);
      // A stream is refused before its first chunk, so the caller can still answer 429.
      await expect(small.stream(request()).next()).rejects.toBeInstanceOf(QueueFullError);
      controller.abort();
      for (const result of await inFlight) {
        expect(result.status).toBe("rejected");
        expect((result as PromiseRejectedResult).reason).toBeInstanceOf(GenerationAbortedError);
      }
      expect(small.activity).toEqual({ active: 0, queued: 0 });
      const ok = await small.complete(request({ max_tokens: 2 }));
      expect(ok.usage.completion_tokens).toBeGreaterThan(0);
    } finally {
      await small.close();
    }
  });

  it("starts a new prompt on a used sequence while other streams keep generating", async () => {
    const engine3 = await LlamaEngine.load({ modelPath, ...ENGINE, parallel: 3 });
    const controller = new AbortController();
    try {
      // Every sequence holds cached tokens, so the next prompt on any of them must first erase some.
      const asks = ["Hi", "Hello there", "Good morning"];
      await Promise.all(asks.map((content) => engine3.complete(request({ max_tokens: 4, messages: [{ role: "user", content }] }))));
      // 20 strings of 1000 characters: the grammar forbids an early end, so these streams run to max_tokens.
      const long = request({
        max_tokens: 900,
        response_format: { type: "json_schema", json_schema: { name: "long", schema: { type: "array", minItems: 20, items: { type: "string", minLength: 1000 } } } },
      });
      const chunks = [0, 0];
      let ended = 0;
      const longRuns = chunks.map(async (_, i) => {
        try {
          for await (const _chunk of engine3.stream(long, { signal: controller.signal })) chunks[i]++;
          ended++;
        } catch (err) {
          if (!(err instanceof GenerationAbortedError)) throw err;
        }
      });
      while (chunks.some((n) => n < 5) && ended === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const short = await engine3.complete(request({ max_tokens: 3, messages: [{ role: "user", content: "A different question entirely?" }] }));
      expect(short.usage.completion_tokens).toBeGreaterThan(0);
      // Erasing the cached tokens of the short request's sequence must not wait for the long streams to end.
      expect(ended).toBe(0);
      controller.abort();
      await Promise.all(longRuns);
    } finally {
      controller.abort();
      await engine3.close();
    }
  });

  it("applies a LoRA adapter per request", async () => {
    const header = await readGgufHeader(modelPath);
    const rank = 4;
    const rng = new SeededRandom(1234);
    const randn = (n: number, std: number): Float32Array => Float32Array.from({ length: n }, () => rng.normal() * std);
    const pairs = header.tensors
      .filter((t) => /^blk\.\d+\.(attn_q|attn_v|ffn_down)\.weight$/.test(t.name))
      .map((t) => ({ base: t.name, inFeatures: t.dims[0], outFeatures: t.dims[1], a: randn(rank * t.dims[0], 0.5), b: randn(t.dims[1] * rank, 0.5) }));
    const adapterPath = join(dir, "adapter.gguf");
    await writeLoraAdapter(adapterPath, { architecture: "llama", rank, alpha: 8, pairs });
    const otherPath = join(dir, "other-adapter.gguf");
    await writeLoraAdapter(otherPath, { architecture: "llama", rank, alpha: 8, pairs: pairs.map((p) => ({ ...p, a: randn(p.a.length, 0.5) })) });

    const greedy = request({ temperature: 0, max_tokens: 12 });
    const base = await engine.complete(greedy);
    const adapted = await engine.complete(greedy, { lora: { path: adapterPath } });
    const adaptedAgain = await engine.complete(greedy, { lora: { path: adapterPath } });
    const zeroScale = await engine.complete(greedy, { lora: { path: adapterPath, scale: 0 } });
    const baseAgain = await engine.complete(greedy);
    expect(adapted.choices[0].message.content).not.toBe(base.choices[0].message.content);
    expect(adaptedAgain.choices[0].message.content).toBe(adapted.choices[0].message.content);
    expect(zeroScale.choices[0].message.content).toBe(base.choices[0].message.content);
    expect(baseAgain.choices[0].message.content).toBe(base.choices[0].message.content);
    // A third adapter context exceeds maxContexts (3): the least recently used idle one is disposed and rebuilt on demand.
    const other = await engine.complete(greedy, { lora: { path: otherPath } });
    expect(other.choices[0].message.content).not.toBe(adapted.choices[0].message.content);
    expect((await engine.complete(greedy, { lora: { path: adapterPath } })).choices[0].message.content).toBe(adapted.choices[0].message.content);
  });

  it("applies logit_bias and frequency/presence/repetition penalties", async () => {
    const [the] = engine.model.tokenize("The", false);
    const forced = await engine.complete(request({ temperature: 0, max_tokens: 5, logit_bias: { [String(the)]: 100 } }));
    expect(forced.choices[0].message.content).toBe("The".repeat(5));
    const count = (text: string | null): number => (text ?? "").split("The").length - 1;
    const favoured = { temperature: 0, max_tokens: 12, logit_bias: { [String(the)]: 8 } };
    const free = await engine.complete(request(favoured));
    expect(count(free.choices[0].message.content)).toBe(12);
    for (const penalty of [{ frequency_penalty: 2 }, { presence_penalty: 2 }, { repetition_penalty: 5 }]) {
      const penalised = await engine.complete(request({ ...favoured, ...penalty }));
      expect(count(penalised.choices[0].message.content), JSON.stringify(penalty)).toBeLessThan(count(free.choices[0].message.content));
    }
  });

  it("rejects what it cannot honour with typed errors", async () => {
    await expect(engine.complete(request({ top_logprobs: 3 }))).rejects.toThrow(/top_logprobs requires logprobs/);
    await expect(engine.complete(request({ logit_bias: { "999999": 1 } }))).rejects.toThrow(/not a token id/);
    await expect(engine.complete(request({
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }],
      response_format: { type: "json_object" },
    }))).rejects.toBeInstanceOf(UnsupportedRequestError);
    await expect(engine.complete(request({ messages: [{ role: "user", content: "x ".repeat(3000) }] })))
      .rejects.toThrow(/context/);
  });
});

describe("tool-call parsing", () => {
  const names = new Set(["get_weather"]);
  it("extracts calls and keeps the rest as content", () => {
    const text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    expect(parseToolCalls(text, names)).toEqual({ content: "Let me check.", calls: [{ name: "get_weather", arguments: '{"city":"Paris"}' }] });
  });
  it("leaves malformed or unknown calls in the content", () => {
    const text = '<tool_call>{"name": "nope", "arguments": {}}</tool_call> and <tool_call>{broken</tool_call>';
    expect(parseToolCalls(text, names)).toEqual({ content: text, calls: [] });
  });
});

describe("streaming text helpers", () => {
  it("holds back a possible tool-call tag and everything after a real one", () => {
    const hold = new ToolCallHoldback();
    expect(hold.push("Sure <to")).toBe("Sure ");
    expect(hold.push("day")).toBe("<today");
    expect(hold.push(" <tool_")).toBe(" ");
    expect(hold.push('call>{"name"')).toBe("");
    expect(hold.push("}</tool_call>")).toBe("");
    expect(hold.held()).toBe('<tool_call>{"name"}</tool_call>');
  });

  it("finds stop strings split across pieces and never emits part of one", () => {
    const stops = new StopMatcher(["END", "\n\n"]);
    expect(stops.push("abc E")).toEqual({ emit: "abc ", stopped: false });
    expect(stops.push("N")).toEqual({ emit: "", stopped: false });
    expect(stops.push("X")).toEqual({ emit: "ENX", stopped: false });
    expect(stops.push("y\n")).toEqual({ emit: "y", stopped: false });
    expect(stops.push("\nz")).toEqual({ emit: "", stopped: true });
  });
});

