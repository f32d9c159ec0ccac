import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderChat } from "../../src/inference/chat-render.js";
import { CHATML_TOOLS_TEMPLATE } from "../../src/inference/chat-template.js";
import type { ChatMessage, ChatTool, Choice } from "../../src/training/trainer/chat-types.js";
import { tokenizeSftConversation, tokenizeTrajectory, type TokenizeOptions } from "../../src/training/trainer/chat-tokens.js";
import { openModelChat, type ModelChat } from "../../src/training/trainer/model-tokenizer.js";
import { tempDir, tinyModel } from "./helpers/models.js";

let chat: ModelChat;
let cleanup: () => Promise<void>;
let options: TokenizeOptions;

beforeAll(async () => {
  const t = await tempDir("gyre-chat-");
  cleanup = t.cleanup;
  chat = await openModelChat(await tinyModel(t.dir, "qwen2", 1));
  options = { renderer: chat.renderer, tokenizer: chat.tokenizer, maxLength: 4096, overflow: "truncate" };
});
afterAll(async () => {
  await chat?.dispose();
  await cleanup?.();
});

const tools: ChatTool[] = [
  { type: "function", function: { name: "get_weather", description: "Weather now", parameters: { type: "object", properties: { city: { type: "string" } } } } },
];
const conversation: ChatMessage[] = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Weather in Oslo?" },
  { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
  { role: "tool", tool_call_id: "c1", content: "rain, 4C" },
  { role: "assistant", content: [{ type: "text", text: "Rainy and 4C." }] },
];

function trainedText(tokens: number[], trainable: Uint8Array): string[] {
  const runs: string[] = [];
  let run: number[] = [];
  tokens.forEach((t, i) => {
    if (trainable[i]) run.push(t);
    else if (run.length) {
      runs.push(chat.tokenizer.detokenize(run));
      run = [];
    }
  });
  if (run.length) runs.push(chat.tokenizer.detokenize(run));
  return runs;
}

describe("conversations to tokens", () => {
  it("renders with the model's template and trains every assistant turn up to its end token", () => {
    const r = tokenizeSftConversation(conversation, tools, "all", options);
    if (!r.ok) throw new Error(r.reason);
    const full = renderChat(CHATML_TOOLS_TEMPLATE, { messages: conversation, tools, addGenerationPrompt: false });
    expect(chat.tokenizer.detokenize(r.sequence.tokens)).toBe(full);
    expect(trainedText(r.sequence.tokens, r.sequence.trainable)).toEqual([
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>',
      "Rainy and 4C.<|im_end|>",
    ]);
  });

  it("with assistant_turns last, the context is exactly the prompt inference tokenizes", () => {
    const r = tokenizeSftConversation(conversation, tools, "last", options);
    if (!r.ok) throw new Error(r.reason);
    const prompt = renderChat(CHATML_TOOLS_TEMPLATE, { messages: conversation.slice(0, 4), tools, addGenerationPrompt: true });
    const promptTokens = chat.tokenizer.tokenize(prompt);
    expect(r.sequence.tokens.slice(0, promptTokens.length)).toEqual(promptTokens);
    expect(Array.from(r.sequence.trainable.slice(0, promptTokens.length)).every((v) => v === 0)).toBe(true);
    expect(trainedText(r.sequence.tokens, r.sequence.trainable)).toEqual(["Rainy and 4C.<|im_end|>"]);
  });

  it("truncates or rejects long sequences by rule", () => {
    const full = tokenizeSftConversation(conversation, tools, "all", options);
    if (!full.ok) throw new Error(full.reason);
    const n = full.sequence.tokens.length;
    const cut = tokenizeSftConversation(conversation, tools, "all", { ...options, maxLength: n - 3 });
    if (!cut.ok) throw new Error(cut.reason);
    expect(cut.sequence.tokens).toEqual(full.sequence.tokens.slice(0, n - 3));
    expect(cut.sequence.truncated).toBe(true);
    expect(tokenizeSftConversation(conversation, tools, "all", { ...options, maxLength: n - 3, overflow: "reject" })).toEqual({
      ok: false,
      reason: "too_long",
    });
    // Truncation that leaves no trained token drops the sequence.
    expect(tokenizeSftConversation(conversation, tools, "last", { ...options, maxLength: 20 })).toEqual({ ok: false, reason: "too_long" });
    expect(tokenizeSftConversation(conversation.slice(0, 2), tools, "all", options)).toEqual({ ok: false, reason: "nothing_to_train" });
  });

  it("trains only Choice tokens of a trajectory, using the sampled tokens and their logprobs", () => {
    const ids = chat.tokenizer.tokenize("Sunny, 20C.");
    const choice: Choice = {
      index: 0,
      finish_reason: "stop",
      message: { role: "assistant", content: "Sunny, 20C." },
      logprobs: { content: ids.map((id, k) => ({ token: `token_id:${id}`, logprob: -0.1 * (k + 1), bytes: null })) },
    };
    const items: (ChatMessage | Choice)[] = [
      { role: "user", content: "Weather?" },
      { role: "assistant", content: "Which city?" },
      { role: "user", content: "Rome" },
      choice,
    ];
    const r = tokenizeTrajectory(items, undefined, options);
    if (!r.ok) throw new Error(r.reason);
    expect(trainedText(r.sequence.tokens, r.sequence.trainable)).toEqual(["Sunny, 20C.<|im_end|>"]);
    const trainedAt = [...r.sequence.trainable.keys()].filter((i) => r.sequence.trainable[i]);
    const old = trainedAt.map((i) => r.sequence.oldLogprobs[i]);
    expect(old.slice(0, ids.length).map((v) => Number(v.toFixed(4)))).toEqual(ids.map((_, k) => Number((-0.1 * (k + 1)).toFixed(4))));
    // The end-of-turn token was not in the logprobs: its old logprob is unknown.
    expect(Number.isNaN(old[ids.length])).toBe(true);
  });
});
