/** OpenAI chat-completion shapes (CONTRACT §4) as the engine takes and returns them, plus the engine interface. */
import type { components } from "../../generated/inference.js";

export interface ChatTextPart {
  type: "text";
  text: string;
}

export type ChatContent = string | ChatTextPart[] | null;

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: "system" | "developer" | "user"; content: ChatContent; name?: string }
  | { role: "assistant"; content?: ChatContent; name?: string; tool_calls?: ChatToolCall[] }
  | { role: "tool"; content: ChatContent; tool_call_id: string; name?: string };

export type JsonSchema = { [key: string]: unknown };

export interface ChatTool {
  type: "function";
  function: { name: string; description?: string; parameters?: JsonSchema; strict?: boolean | null };
}

export type ToolChoice = "none" | "auto" | "required" | { type: "function"; function: { name: string } };

export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; json_schema: { name: string; description?: string; schema?: JsonSchema; strict?: boolean | null } };

/**
 * The spec's request (spec/components/chat.yaml), with the parts the engine reads structurally narrowed to the
 * unions above; every sampling option keeps the spec's own type.
 */
export type ChatCompletionRequest = Omit<components["schemas"]["ChatCompletionRequest"], "model" | "messages" | "tools" | "tool_choice" | "response_format"> & {
  model: string;
  messages: ChatMessage[];
  tools?: ChatTool[] | null;
  tool_choice?: ToolChoice | null;
  response_format?: ResponseFormat | null;
};

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface ChoiceLogprobs {
  content: (TokenLogprob & { top_logprobs: TokenLogprob[] })[];
}

export type FinishReason = "stop" | "length" | "tool_calls";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatCompletionChoice {
  index: number;
  message: { role: "assistant"; content: string | null; tool_calls?: ChatToolCall[] };
  logprobs: ChoiceLogprobs | null;
  finish_reason: FinishReason;
}

export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: ChatCompletionChoice[];
  usage: Usage;
}

export interface ChatCompletionChunkChoice {
  index: number;
  delta: {
    role?: "assistant";
    content?: string;
    tool_calls?: { index: number; id: string; type: "function"; function: { name: string; arguments: string } }[];
  };
  logprobs: ChoiceLogprobs | null;
  finish_reason: FinishReason | null;
}

export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: ChatCompletionChunkChoice[];
  usage?: Usage | null;
}

/** Per-call options that do not come from the request body. */
export interface GenerateOptions {
  /** Aborting stops the generation and frees its sequence. */
  signal?: AbortSignal;
  /** A GGUF LoRA adapter to apply (a trained checkpoint); contexts are kept per adapter. */
  lora?: { path: string; scale?: number };
}

export interface Engine {
  /** A non-streamed completion with all `n` choices. */
  complete(request: ChatCompletionRequest, options?: GenerateOptions): Promise<ChatCompletion>;
  /** Streamed completion chunks; the last one carries `usage` when `stream_options.include_usage` is set. */
  stream(request: ChatCompletionRequest, options?: GenerateOptions): AsyncIterable<ChatCompletionChunk>;
  /** Renders and tokenizes the prompt exactly as a completion would. */
  countPromptTokens(request: ChatCompletionRequest): Promise<number>;
  close(): Promise<void>;
}
