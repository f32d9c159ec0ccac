import { Ajv } from "ajv";
import addFormats from "ajv-formats";
import type { Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readGgufHeader } from "../src/gguf/reader.js";
import { byteToChar } from "../src/inference/byte-level-bpe.js";
import { UnsupportedRequestError } from "../src/inference/errors.js";
import { jsonSchemaGrammar, MAX_GRAMMAR_BOUND } from "../src/inference/json-schema-grammar.js";
import { LlamaEngine } from "../src/inference/llama-engine.js";
import { toolCallGrammar } from "../src/inference/tool-calls.js";
import type { ChatCompletion, ChatCompletionRequest, JsonSchema } from "../src/inference/types.js";
import { Utf8TokenFilter } from "../src/inference/utf8-token-filter.js";
import { tinyModelPath } from "./helpers/tiny-model.js";

let engine: LlamaEngine;
let vocab: string[];

beforeAll(async () => {
  const modelPath = await tinyModelPath("llama");
  vocab = (await readGgufHeader(modelPath)).metadata["tokenizer.ggml.tokens"] as string[];
  engine = await LlamaEngine.load({ modelPath, gpu: false, contextSize: 1024, parallel: 3, maxQueue: 8, threads: 1 });
});
afterAll(async () => {
  await engine?.close();
});

// Ajv counts string lengths in code points (unicode: true, its default), as the grammar does.
function validator(): Ajv {
  const ajv = new Ajv({ strict: true });
  addFormats.default(ajv);
  return ajv;
}

const MAX_TOKENS = 80;
const SEEDS = 60;
const PER_REQUEST = 6;

function request(extra: Partial<ChatCompletionRequest>): ChatCompletionRequest {
  return {
    model: "tiny",
    messages: [{ role: "user", content: "Answer in JSON." }],
    max_tokens: MAX_TOKENS,
    n: PER_REQUEST,
    logprobs: true,
    ...extra,
  };
}

/** Completions for seeds 0..seeds-1, PER_REQUEST choices (each sampled with its own seed) per request. */
async function manySeeds(extra: Partial<ChatCompletionRequest>, seeds = SEEDS): Promise<ChatCompletion["choices"]> {
  const choices: ChatCompletion["choices"] = [];
  for (let seed = 0; seed < seeds; seed += PER_REQUEST) choices.push(...(await engine.complete(request({ seed, ...extra }))).choices);
  return choices;
}

/** A choice either finished its JSON (and stopped) or ran out of tokens mid-way with exactly max_tokens tokens. */
function checkFinishes(choices: ChatCompletion["choices"], errors: (value: unknown) => string | null): string[] {
  const finished: string[] = [];
  for (const c of choices) {
    const text = c.message.content ?? "";
    if (c.finish_reason === "length") {
      expect(c.logprobs?.content).toHaveLength(MAX_TOKENS);
      continue;
    }
    expect(c.finish_reason).toBe("stop");
    expect(text, "ill-formed UTF-8 decodes to U+FFFD").not.toContain("\uFFFD");
    expect(errors(JSON.parse(text)), text).toBeNull();
    finished.push(text);
  }
  expect(finished.length).toBeGreaterThan(0);
  return finished;
}

describe("JSON output enforced by grammar", () => {
  it("always parses and validates against the schema when it finishes", async () => {
    const schemas: JsonSchema[] = [
      {
        type: "object",
        properties: { answer: { type: "string", maxLength: 10 }, score: { type: "integer" } },
        required: ["answer", "score"],
        additionalProperties: false,
      },
      {
        type: "object",
        properties: {
          items: {
            type: "array",
            minItems: 1,
            maxItems: 3,
            items: {
              type: "object",
              properties: {
                kind: { enum: ["a", "b", "ç"] },
                weight: { type: "number" },
                tags: { type: "array", items: { type: "string", minLength: 1, maxLength: 3 }, maxItems: 2 },
              },
              required: ["kind", "weight"],
              additionalProperties: false,
            },
          },
          when: { type: "string", format: "date" },
          note: { anyOf: [{ type: "string", maxLength: 4 }, { type: "null" }] },
        },
        required: ["items"],
        additionalProperties: false,
      },
      { type: "string", minLength: 2, maxLength: 5 },
    ];
    const ajv = validator();
    const texts: string[] = [];
    for (const schema of schemas) {
      const validate = ajv.compile(schema);
      const choices = await manySeeds({ response_format: { type: "json_schema", json_schema: { name: "s", schema } } });
      texts.push(...checkFinishes(choices, (v) => (validate(v) ? null : ajv.errorsText(validate.errors))));
    }
    // Characters beyond ASCII still come out; only ill-formed byte sequences are kept out.
    expect(texts.some((t) => /[^\x00-\x7f]/.test(t))).toBe(true);
  });

  it("answers a schema whose grammar llama.cpp refuses with an unsupported-request error", async () => {
    const cycle = { $defs: { a: { anyOf: [{ $ref: "#/$defs/a" }, { type: "null" }] } }, $ref: "#/$defs/a" };
    await expect(engine.complete(request({
      n: 1,
      response_format: { type: "json_schema", json_schema: { name: "s", schema: cycle } },
    }))).rejects.toBeInstanceOf(UnsupportedRequestError);
  });

  it("gives a JSON object for json_object", async () => {
    // Any object lets a random model wander in long strings, so fewer seeds finish within the budget; half as many suffice.
    const choices = await manySeeds({ response_format: { type: "json_object" } }, SEEDS / 2);
    checkFinishes(choices, (v) => (typeof v === "object" && v !== null && !Array.isArray(v) ? null : "not an object"));
  });

  it("keeps the bytes valid UTF-8 even when logit_bias pushes towards an overlong sequence", async () => {
    // E0 82 80 is an overlong form that llama.cpp's grammar decodes as the character U+0080; JavaScript sees three U+FFFD.
    const id = (byte: number): number => vocab.indexOf(byteToChar()[byte]);
    const r = await engine.complete(request({
      n: 1,
      temperature: 0,
      logprobs: false,
      max_tokens: 30,
      logit_bias: { [id(0xe0)]: 100, [id(0x82)]: 100, [id(0x80)]: 100 },
      response_format: { type: "json_schema", json_schema: { name: "s", schema: { type: "string", maxLength: 3 } } },
    }));
    const text = r.choices[0].message.content ?? "";
    expect(r.choices[0].finish_reason).toBe("stop");
    expect(text).not.toContain("\uFFFD");
    expect(validator().validate({ type: "string", maxLength: 3 }, JSON.parse(text))).toBe(true);
    expect(text).toMatch(/[\u0800-\u0fff]/); // the biased lead byte E0 still starts well-formed characters
  });

  it("forces tool calls whose arguments validate against the tool's parameters", async () => {
    const weather: JsonSchema = {
      type: "object",
      properties: { city: { type: "string", maxLength: 8 }, days: { type: "integer" }, unit: { $ref: "#/$defs/unit" } },
      required: ["city", "unit"],
      additionalProperties: false,
      $defs: { unit: { enum: ["c", "f"] } },
    };
    const tools = [
      { type: "function" as const, function: { name: "get_weather", parameters: weather } },
      { type: "function" as const, function: { name: "get_time" } },
    ];
    const ajv = validator();
    const validate = { get_weather: ajv.compile(weather), get_time: ajv.compile({ type: "object", additionalProperties: false }) };
    const choices = await manySeeds({ tools, tool_choice: "required", max_tokens: 120, logprobs: false }, 12);
    const calls = choices.filter((c) => c.finish_reason === "tool_calls");
    expect(calls.length).toBeGreaterThan(0);
    for (const c of choices) expect(["tool_calls", "length"]).toContain(c.finish_reason);
    for (const c of calls) {
      const call = c.message.tool_calls?.[0];
      expect(call && call.function.name in validate).toBe(true);
      const check = validate[call!.function.name as keyof typeof validate];
      expect(check(JSON.parse(call!.function.arguments)), call!.function.arguments).toBe(true);
    }
  });
});

describe("JSON schema grammar compiler", () => {
  const refused = (schema: JsonSchema): void => {
    expect(() => jsonSchemaGrammar(schema, "response_format"), JSON.stringify(schema)).toThrow(UnsupportedRequestError);
  };

  it("refuses keywords and combinations a grammar cannot enforce exactly", () => {
    refused({ type: "string", pattern: "^a+$" });
    refused({ type: "integer", minimum: 0 });
    refused({ type: "number", multipleOf: 2 });
    refused({ type: "array", items: { type: "string" }, uniqueItems: true });
    refused({ allOf: [{ type: "string" }] });
    refused({ not: { type: "string" } });
    refused({ type: "string", format: "email" });
    refused({ type: "string", maxLength: MAX_GRAMMAR_BOUND + 1 });
    refused({ type: "string", minLength: 3, maxLength: 2 });
    refused({ enum: ["ab", "abc"], maxLength: 2 });
    refused({ type: "integer", enum: ["a"] });
    // 1 is both an integer and a number, so "exactly one" cannot be guaranteed.
    refused({ oneOf: [{ type: "integer" }, { type: "number" }] });
    refused({ oneOf: [{ const: "a" }, { type: "string" }] });
    refused({ type: "object", properties: { a: { type: "string" } }, additionalProperties: { type: "number" } });
    refused({ type: "object", properties: { a: { type: "string" } }, required: ["b"] });
    refused({ type: "object", additionalProperties: { type: "string" }, minProperties: 2 });
    refused({ $ref: "#/$defs/missing" });
    refused({ $ref: "https://example.com/schema.json" });
  });

  it("accepts what it enforces", () => {
    const accepted: JsonSchema[] = [
      { oneOf: [{ type: "string" }, { type: "integer" }] },
      {
        oneOf: [
          { type: "object", properties: { kind: { const: "a" }, x: { type: "number" } }, required: ["kind"] },
          { type: "object", properties: { kind: { const: "b" } }, required: ["kind"] },
        ],
      },
      { type: ["string", "null"], maxLength: 3 },
      { type: "array", prefixItems: [{ type: "integer" }, { type: "boolean" }], items: false },
      { type: "string", format: "date-time" },
      { $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } } } }, $ref: "#/$defs/node" },
      { type: "object", additionalProperties: { type: "integer" }, maxProperties: 3 },
      { title: "anything" },
    ];
    for (const schema of accepted) expect(jsonSchemaGrammar(schema, "response_format")).toMatch(/^root ::= /);
    expect(toolCallGrammar([{ type: "function", function: { name: "f" } }])).toContain('"\\"f\\""');
  });
});

describe("UTF-8 token filter", () => {
  const filterFor = (tokens: number[][]): Utf8TokenFilter => new Utf8TokenFilter(engine.model, tokens.length, (t) => tokens[t]);
  const ids = (list: readonly Token[]): number[] => [...list];

  it("bans tokens that would make the bytes ill-formed in each decoder state", () => {
    const tokens = [
      [0x41], // 0 ASCII
      [0xc3], // 1 lead of a two-byte character
      [0xa9], // 2 continuation
      [0xe0], // 3 lead whose next byte must be A0..BF
      [0x82], // 4 continuation below A0
      [0xa0, 0x80], // 5 two continuations
      [0xc3, 0x22], // 6 lead followed by a quote inside one token
      [0xc1, 0x81], // 7 overlong "A"
      [0xed, 0xa0, 0x80], // 8 surrogate U+D800
      [0xf4, 0x90, 0x80, 0x80], // 9 above U+10FFFF
      [0xc3, 0xa9, 0x41], // 10 "éA"
    ];
    const filter = filterFor(tokens);
    expect(ids(filter.banned(0))).toEqual([2, 4, 5, 6, 7, 8, 9]);
    const afterC3 = filter.advance(0, 1 as Token);
    expect(ids(filter.banned(afterC3))).toEqual([0, 1, 3, 5, 6, 7, 8, 9, 10]);
    expect(filter.advance(afterC3, 2 as Token)).toBe(0);
    const afterE0 = filter.advance(0, 3 as Token);
    expect(ids(filter.banned(afterE0))).not.toContain(5);
    expect(ids(filter.banned(afterE0))).toContain(4);
    expect(() => filter.advance(afterE0, 4 as Token)).toThrow(/ill-formed/);
    expect(filter.advance(filter.advance(0, 3 as Token), 5 as Token)).toBe(0);
  });

  it("bans a lead byte the vocabulary has no continuation for", () => {
    // F4 needs 80..8F next, which no token starts with.
    const filter = filterFor([[0x41], [0xf4], [0xa9]]);
    expect(ids(filter.banned(0))).toEqual([1, 2]);
  });
});
