import { gbnfLiteral, JsonGrammarBuilder } from "./json-schema-grammar.js";
import type { JsonSchema, ChatTool } from "./types.js";

/** Tool-call syntax of ChatML templates in the Hermes/Qwen style, which the built-in template uses too. */
export const TOOL_CALL_OPEN = "<tool_call>";
export const TOOL_CALL_CLOSE = "</tool_call>";

export interface ParsedToolCall {
  name: string;
  arguments: string;
}

export interface ParsedAssistantText {
  content: string | null;
  calls: ParsedToolCall[];
}

/** Whether a chat template writes tool calls in the `<tool_call>` syntax this engine parses. */
export function templateUsesToolCallTags(template: string): boolean {
  return template.includes(TOOL_CALL_OPEN);
}

/**
 * Splits generated text into content and `<tool_call>{"name", "arguments"}</tool_call>` blocks. A block that is not valid
 * JSON naming one of the offered tools stays in the content, as the model wrote it.
 */
export function parseToolCalls(text: string, toolNames: ReadonlySet<string>): ParsedAssistantText {
  const calls: ParsedToolCall[] = [];
  let content = "";
  let pos = 0;
  while (pos < text.length) {
    const open = text.indexOf(TOOL_CALL_OPEN, pos);
    if (open < 0) break;
    const close = text.indexOf(TOOL_CALL_CLOSE, open + TOOL_CALL_OPEN.length);
    if (close < 0) break;
    const body = text.slice(open + TOOL_CALL_OPEN.length, close).trim();
    const call = parseCall(body, toolNames);
    if (call) {
      content += text.slice(pos, open);
      calls.push(call);
    } else {
      content += text.slice(pos, close + TOOL_CALL_CLOSE.length);
    }
    pos = close + TOOL_CALL_CLOSE.length;
  }
  content += text.slice(pos);
  const trimmed = calls.length ? content.trim() : content;
  return { content: trimmed.length ? trimmed : null, calls };
}

function parseCall(body: string, toolNames: ReadonlySet<string>): ParsedToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const { name, arguments: args } = value as { name?: unknown; arguments?: unknown };
  if (typeof name !== "string" || !toolNames.has(name)) return undefined;
  const argumentsJson = typeof args === "string" ? args : JSON.stringify(args ?? {});
  return { name, arguments: argumentsJson };
}

/**
 * GBNF of one `{"name": ..., "arguments": {...}}` call to one of the tools, wrapped in the tool-call tags so the reply
 * reads as the template renders it. Each tool's parameters are their own schema document for `$ref`.
 */
export function toolCallGrammar(tools: ChatTool[]): string {
  const builder = new JsonGrammarBuilder("tools");
  const ws = builder.whitespace();
  const calls = tools.map((t, i) => {
    const parameters: JsonSchema = t.function.parameters && Object.keys(t.function.parameters).length
      ? t.function.parameters
      : { type: "object", properties: {} };
    const args = builder.document(parameters, `tools[${i}].function.parameters`);
    const name = gbnfLiteral(JSON.stringify(t.function.name));
    const key = (k: string): string => `${gbnfLiteral(JSON.stringify(k))} ${ws} ":" ${ws}`;
    return `"{" ${ws} ${key("name")} ${name} ${ws} "," ${ws} ${key("arguments")} ${args} ${ws} "}"`;
  });
  const call = `(${calls.join(" | ")})`;
  return builder.grammar(`${gbnfLiteral(`${TOOL_CALL_OPEN}\n`)} ${call} ${gbnfLiteral(`\n${TOOL_CALL_CLOSE}`)}`);
}
