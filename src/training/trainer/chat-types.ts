import type { ChatMessage, ChatTool } from "../../inference/types.js";

export type { ChatMessage, ChatTool };

export type AssistantMessage = Extract<ChatMessage, { role: "assistant" }>;

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes?: number[] | null;
}

/** A completion choice as chat completions return it; its tokens are what the policy produced. */
export interface Choice {
  index?: number;
  finish_reason: string;
  message: AssistantMessage;
  logprobs?: { content?: TokenLogprob[] | null } | null;
}

export function isChoice(item: ChatMessage | Choice): item is Choice {
  return !("role" in item) && typeof (item as Choice).message === "object" && (item as Choice).message !== null;
}
