import { renderChat } from "../../inference/chat-render.js";
import type { ChatMessage, ChatTool } from "./chat-types.js";

export interface RenderOptions {
  tools?: ChatTool[];
  addGenerationPrompt: boolean;
}

/** Turns a conversation into the prompt text the model sees. */
export type ChatRenderer = (messages: ChatMessage[], options: RenderOptions) => string;

export interface TemplateTokens {
  bosToken: string;
  eosToken: string;
}

/** Renders with the model's Jinja template through the same function the inference service uses for prompts. */
export function templateRenderer(template: string, tokens: TemplateTokens, extra?: Record<string, unknown>): ChatRenderer {
  return (messages, options) =>
    renderChat(template, {
      messages,
      tools: options.tools,
      addGenerationPrompt: options.addGenerationPrompt,
      bosToken: tokens.bosToken,
      eosToken: tokens.eosToken,
      extra,
    });
}
