import type { ChatRenderer } from "./chat-render.js";
import { isChoice, type ChatMessage, type Choice, type TokenLogprob, type ChatTool } from "./chat-types.js";

/** The model's own tokenizer, as llama.cpp tokenizes prompts (special tokens in text are parsed). */
export interface ChatTokenizer {
  tokenize(text: string): number[];
  detokenize(tokens: number[]): string;
  isEndOfGeneration(token: number): boolean;
  bos: number | null;
  prependBos: boolean;
}

export interface TokenizedSequence {
  tokens: number[];
  /** trainable[i] = 1 when token i is trained (predicted from the tokens before it). */
  trainable: Uint8Array;
  /** Log-probability of token i under the policy that produced it, NaN where unknown. */
  oldLogprobs: Float32Array;
  truncated: boolean;
}

export type OverflowRule = "truncate" | "reject";

export interface TokenizeOptions {
  renderer: ChatRenderer;
  tokenizer: ChatTokenizer;
  /** Longest sequence kept, in tokens. */
  maxLength: number;
  /**
   * What happens to a longer sequence: "truncate" keeps its first maxLength tokens (and is dropped only when no
   * trained token survives), "reject" drops it whole.
   */
  overflow: OverflowRule;
}

export type TokenizeResult = { ok: true; sequence: TokenizedSequence } | { ok: false; reason: "too_long" | "nothing_to_train" };

/** SFT: assistant messages are trained, all of them or only the last. */
export function tokenizeSftConversation(
  messages: ChatMessage[],
  tools: ChatTool[] | undefined,
  assistantTurns: "all" | "last",
  options: TokenizeOptions,
): TokenizeResult {
  const assistants = messages.flatMap((m, i) => (m.role === "assistant" ? [i] : []));
  const targets = assistantTurns === "last" ? assistants.slice(-1) : assistants;
  return tokenizeTurns(messages, tools, new Map(targets.map((i) => [i, undefined])), options);
}

/** RL: only Choice items are trained; their logprobs, when present, are the old policy. */
export function tokenizeTrajectory(
  items: (ChatMessage | Choice)[],
  tools: ChatTool[] | undefined,
  options: TokenizeOptions,
): TokenizeResult {
  const messages = items.map((it) => (isChoice(it) ? { ...it.message, role: "assistant" as const } : it));
  const targets = new Map<number, TokenLogprob[] | undefined>();
  items.forEach((it, i) => {
    if (isChoice(it)) targets.set(i, it.logprobs?.content ?? undefined);
  });
  return tokenizeTurns(messages, tools, targets, options);
}

/**
 * Renders the conversation turn by turn: the prompt before each trained turn is rendered with the generation
 * prompt, exactly as inference renders it, and the turn's own text is what the template adds after that. Each
 * piece is tokenized on its own, as inference tokenizes the prompt and then emits completion tokens.
 */
function tokenizeTurns(
  messages: ChatMessage[],
  tools: ChatTool[] | undefined,
  targets: Map<number, TokenLogprob[] | undefined>,
  options: TokenizeOptions,
): TokenizeResult {
  const { renderer, tokenizer } = options;
  const tokens: number[] = [];
  const trainable: number[] = [];
  const old: number[] = [];
  const push = (ids: number[], train: boolean, logprobs?: (number | undefined)[]) => {
    ids.forEach((t, k) => {
      tokens.push(t);
      trainable.push(train ? 1 : 0);
      old.push(logprobs?.[k] ?? Number.NaN);
    });
  };
  let text = "";
  const order = [...targets.keys()].sort((a, b) => a - b);
  for (const i of order) {
    const prompt = renderer(messages.slice(0, i), { tools, addGenerationPrompt: true });
    if (!prompt.startsWith(text)) throw notIncremental(i);
    const context = tokenizer.tokenize(prompt.slice(text.length));
    // Same rule as the inference engine: BOS goes first when the model wants one and the template did not write it.
    if (tokens.length === 0 && tokenizer.prependBos && tokenizer.bos !== null && context[0] !== tokenizer.bos) {
      context.unshift(tokenizer.bos);
    }
    push(context, false);
    const full = renderer(messages.slice(0, i + 1), { tools, addGenerationPrompt: false });
    if (!full.startsWith(prompt)) throw notIncremental(i);
    const completion = completionTokens(full.slice(prompt.length), targets.get(i), tokenizer);
    // Generation ends at the first end-of-generation token; whatever the template adds after it is context.
    const end = completion.ids.findIndex((t) => tokenizer.isEndOfGeneration(t));
    const cut = end < 0 ? completion.ids.length : end + 1;
    push(completion.ids.slice(0, cut), true, completion.logprobs);
    push(completion.ids.slice(cut), false);
    text = full;
  }
  if (!trainable.some((v) => v === 1)) return { ok: false, reason: "nothing_to_train" };
  let truncated = false;
  if (tokens.length > options.maxLength) {
    if (options.overflow === "reject") return { ok: false, reason: "too_long" };
    truncated = true;
    tokens.length = trainable.length = old.length = options.maxLength;
    if (!trainable.some((v) => v === 1)) return { ok: false, reason: "too_long" };
  }
  // The first token has no prediction, so it can never be trained.
  trainable[0] = 0;
  return {
    ok: true,
    sequence: { tokens, trainable: Uint8Array.from(trainable), oldLogprobs: Float32Array.from(old), truncated },
  };
}

function notIncremental(index: number): Error {
  return new Error(
    `the chat template does not render this conversation incrementally at message ${index} ` +
      "(an earlier turn renders differently once later turns exist); train with assistant_turns \"last\"",
  );
}

const TOKEN_ID = /^token_id:(\d+)$/;

/**
 * The tokens of one trained turn. When the choice's logprobs name its tokens, those exact tokens are used (they
 * are what the policy sampled, and re-tokenizing the text could split it differently); the rest of the turn
 * (e.g. the end-of-turn marker) is tokenized from the rendered text.
 */
function completionTokens(
  text: string,
  logprobs: TokenLogprob[] | undefined,
  tokenizer: ChatTokenizer,
): { ids: number[]; logprobs?: (number | undefined)[] } {
  if (!logprobs || logprobs.length === 0) return { ids: tokenizer.tokenize(text) };
  const sampled: number[] = [];
  for (const entry of logprobs) {
    const m = TOKEN_ID.exec(entry.token);
    const ids = m ? [Number(m[1])] : tokenizer.tokenize(entry.token);
    if (ids.length !== 1) break;
    sampled.push(ids[0]);
  }
  if (sampled.length === logprobs.length) {
    const sampledText = tokenizer.detokenize(sampled);
    if (text.startsWith(sampledText)) {
      const rest = tokenizer.tokenize(text.slice(sampledText.length));
      return { ids: [...sampled, ...rest], logprobs: logprobs.map((e) => e.logprob) };
    }
  }
  // Fall back to the text's tokens, keeping old logprobs only where they name the same tokens.
  const ids = tokenizer.tokenize(text);
  const aligned: (number | undefined)[] = [];
  for (let k = 0; k < ids.length && k < sampled.length && ids[k] === sampled[k]; k++) aligned.push(logprobs[k].logprob);
  return { ids, logprobs: aligned };
}
