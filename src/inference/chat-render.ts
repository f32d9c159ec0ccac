import { Template } from "@huggingface/jinja";
import type { ChatMessage, ChatTool } from "./types.js";

/** A message as chat templates expect it (Hugging Face conventions): string content, tool-call arguments as objects. */
export interface TemplateMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: { id: string; type: "function"; function: { name: string; arguments: unknown } }[];
}

export interface RenderChatOptions {
  messages: ChatMessage[];
  tools?: ChatTool[];
  addGenerationPrompt?: boolean;
  bosToken?: string;
  eosToken?: string;
  /** Extra template variables (e.g. `enable_thinking`), as `chat_template_kwargs`. */
  extra?: Record<string, unknown>;
}

function textOf(content: ChatMessage["content"]): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content.map((part) => part.text).join("");
}

function parseArguments(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

/** Converts OpenAI-shaped messages to template messages: developer becomes system, text parts are joined. */
export function toTemplateMessages(messages: ChatMessage[]): TemplateMessage[] {
  return messages.map((m): TemplateMessage => {
    const role = m.role === "developer" ? "system" : m.role;
    const out: TemplateMessage = { role, content: textOf(m.content) };
    if (m.name !== undefined) out.name = m.name;
    if (m.role === "tool") out.tool_call_id = m.tool_call_id;
    if (m.role === "assistant" && m.tool_calls?.length) {
      // Templates (like Hugging Face's convention) expect arguments as an object, not the JSON string OpenAI sends.
      out.tool_calls = m.tool_calls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.function.name, arguments: parseArguments(c.function.arguments) },
      }));
    }
    return out;
  });
}

const compiled = new Map<string, Template>();

/** Renders a conversation with a model's own Jinja chat template. */
export function renderChat(template: string, options: RenderChatOptions): string {
  let t = compiled.get(template);
  if (!t) {
    t = new Template(template);
    compiled.set(template, t);
  }
  return t.render({
    ...options.extra,
    messages: toTemplateMessages(options.messages),
    tools: options.tools?.length ? options.tools : undefined,
    add_generation_prompt: options.addGenerationPrompt ?? true,
    bos_token: options.bosToken ?? "",
    eos_token: options.eosToken ?? "",
  });
}
