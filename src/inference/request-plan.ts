import { InvalidRequestError, UnsupportedRequestError } from "./errors.js";
import { jsonObjectGrammar, jsonSchemaGrammar } from "./json-schema-grammar.js";
import { toolCallGrammar } from "./tool-calls.js";
import type { ChatCompletionRequest, ChatTool } from "./types.js";

/** Most choices one request may ask for; each takes a sequence. */
export const MAX_CHOICES = 16;
export const MAX_TOP_LOGPROBS = 20;

export interface SamplingPlan {
  /** 0 means greedy. */
  temperature: number;
  topP: number;
  /** 0 means the whole vocabulary. */
  topK: number;
  minP: number;
  /** Base seed; choice i samples with seed + i. Undefined means a fresh random seed per choice. */
  seed?: number;
  penalties?: { repetition: number; frequency: number; presence: number };
  /** Token id -> value added to its logit. */
  logitBias: Map<number, number>;
}

/**
 * What the output must be, with the GBNF grammar that enforces it; a tool_call reply is one call to one of the offered
 * (or the named) tools.
 */
export type OutputConstraint = { kind: "none" } | { kind: "json_object" | "json_schema" | "tool_call"; grammar: string };

export interface GenerationPlan {
  n: number;
  maxTokens?: number;
  stop: string[];
  logprobs: boolean;
  topLogprobs: number;
  tokensAsIds: boolean;
  skipSpecialTokens: boolean;
  sampling: SamplingPlan;
  constraint: OutputConstraint;
  /** Tools rendered into the prompt. */
  tools: ChatTool[];
  /** Whether generated text is parsed for tool calls. */
  parseToolCalls: boolean;
  parallelToolCalls: boolean;
  includeUsage: boolean;
}

function numberIn(req: ChatCompletionRequest, key: keyof ChatCompletionRequest, min: number, max: number): number | undefined {
  const v = req[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) {
    throw new InvalidRequestError(`${key} must be a number between ${min} and ${max}`, key);
  }
  return v;
}

function integerIn(req: ChatCompletionRequest, key: keyof ChatCompletionRequest, min: number, max: number): number | undefined {
  const v = numberIn(req, key, min, max);
  if (v !== undefined && !Number.isInteger(v)) throw new InvalidRequestError(`${key} must be an integer`, key);
  return v;
}

/** Validates a chat-completion request against what llama.cpp can honour and resolves OpenAI defaults. */
export function planRequest(req: ChatCompletionRequest, vocabSize: number): GenerationPlan {
  if (!Array.isArray(req.messages) || req.messages.length === 0) {
    throw new InvalidRequestError("messages must be a non-empty array", "messages");
  }
  const n = integerIn(req, "n", 1, MAX_CHOICES) ?? 1;
  const maxTokens = integerIn(req, "max_completion_tokens", 1, Number.MAX_SAFE_INTEGER) ?? integerIn(req, "max_tokens", 1, Number.MAX_SAFE_INTEGER);
  const stop = req.stop === undefined || req.stop === null ? [] : typeof req.stop === "string" ? [req.stop] : req.stop;
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== "string" || s.length === 0) || stop.length > 16) {
    throw new InvalidRequestError("stop must be a non-empty string or a list of at most 16 non-empty strings", "stop");
  }
  const logprobs = req.logprobs === true;
  const topLogprobs = integerIn(req, "top_logprobs", 0, MAX_TOP_LOGPROBS) ?? 0;
  if (topLogprobs > 0 && !logprobs) throw new InvalidRequestError("top_logprobs requires logprobs: true", "top_logprobs");

  const logitBias = new Map<number, number>();
  for (const [key, value] of Object.entries(req.logit_bias ?? {})) {
    const id = Number(key);
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new InvalidRequestError(`logit_bias key ${key} is not a token id of this model (0..${vocabSize - 1})`, "logit_bias");
    }
    if (typeof value !== "number" || value < -100 || value > 100) {
      throw new InvalidRequestError("logit_bias values must be between -100 and 100", "logit_bias");
    }
    logitBias.set(id, value);
  }

  const repetition = numberIn(req, "repetition_penalty", 0.01, 10) ?? 1;
  const frequency = numberIn(req, "frequency_penalty", -2, 2) ?? 0;
  const presence = numberIn(req, "presence_penalty", -2, 2) ?? 0;
  const sampling: SamplingPlan = {
    temperature: numberIn(req, "temperature", 0, 2) ?? 1,
    topP: numberIn(req, "top_p", 0, 1) ?? 1,
    topK: integerIn(req, "top_k", -1, Number.MAX_SAFE_INTEGER) ?? 0,
    minP: numberIn(req, "min_p", 0, 1) ?? 0,
    seed: integerIn(req, "seed", Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER),
    penalties: repetition !== 1 || frequency !== 0 || presence !== 0 ? { repetition, frequency, presence } : undefined,
    logitBias,
  };
  if (sampling.topK < 0) sampling.topK = 0; // vLLM spells "no top-k" as -1
  if (sampling.topP === 0) throw new InvalidRequestError("top_p must be greater than 0", "top_p");

  const tools = req.tools ?? [];
  for (const t of tools) {
    if (t?.type !== "function" || typeof t.function?.name !== "string" || !t.function.name) {
      throw new InvalidRequestError("each tool must be {type: \"function\", function: {name, ...}}", "tools");
    }
  }
  const choice = req.tool_choice ?? (tools.length ? "auto" : "none");
  let constraint: OutputConstraint = { kind: "none" };
  let parseCalls = false;
  if (choice !== "none") {
    if (!tools.length) throw new InvalidRequestError("tool_choice needs tools", "tool_choice");
    if (choice === "auto") {
      parseCalls = true;
    } else if (choice === "required") {
      constraint = { kind: "tool_call", grammar: toolCallGrammar(tools) };
      parseCalls = true;
    } else if (typeof choice === "object" && choice.type === "function") {
      const named = tools.filter((t) => t.function.name === choice.function?.name);
      if (!named.length) throw new InvalidRequestError(`tool_choice names unknown tool ${choice.function?.name}`, "tool_choice");
      constraint = { kind: "tool_call", grammar: toolCallGrammar(named) };
      parseCalls = true;
    } else {
      throw new InvalidRequestError("tool_choice must be none, auto, required or {type: \"function\", function: {name}}", "tool_choice");
    }
  }

  const format = req.response_format;
  if (format && format.type !== "text") {
    if (parseCalls) {
      throw new UnsupportedRequestError("response_format cannot be combined with tool calls (set tool_choice to none)", "response_format");
    }
    if (format.type === "json_object") {
      constraint = { kind: "json_object", grammar: jsonObjectGrammar() };
    } else if (format.type === "json_schema") {
      const schema = format.json_schema?.schema;
      if (!schema || typeof schema !== "object") throw new InvalidRequestError("json_schema.schema is required", "response_format");
      constraint = { kind: "json_schema", grammar: jsonSchemaGrammar(schema, "response_format") };
    } else {
      throw new InvalidRequestError("response_format.type must be text, json_object or json_schema", "response_format");
    }
  }

  return {
    n,
    maxTokens,
    stop,
    logprobs,
    topLogprobs,
    tokensAsIds: req.return_tokens_as_token_ids === true,
    skipSpecialTokens: req.skip_special_tokens !== false,
    sampling,
    constraint,
    tools,
    parseToolCalls: parseCalls,
    parallelToolCalls: req.parallel_tool_calls !== false,
    includeUsage: req.stream_options?.include_usage === true,
  };
}
