import type { AttrMap, AttrValue, OtlpEvent, OtlpSpan } from "./otlp-types.js";

/** Roles a stored message can have (the search API's Role enum). */
export type MessageRole = "" | "user" | "assistant" | "system" | "tool" | "tool_call" | "tool_result";

export interface ExtractedMessage {
  role: MessageRole;
  content: string;
}

/** GenAI attributes of a span that search filters and groups on; "" when absent. */
export interface SpanGenAi {
  operationName: string;
  providerName: string;
  requestModel: string;
  responseModel: string;
  agentName: string;
  conversationId: string;
  conversationName: string;
}

export function spanGenAi(span: OtlpSpan): SpanGenAi {
  const a = span.attributes;
  const invokeAgent = /^invoke_agent\s+(.+)$/s.exec(span.name);
  return {
    operationName: str(a["gen_ai.operation.name"]),
    providerName: str(a["gen_ai.provider.name"]) || str(a["gen_ai.system"]),
    requestModel: str(a["gen_ai.request.model"]),
    responseModel: str(a["gen_ai.response.model"]),
    agentName: str(a["gen_ai.agent.name"]) || (invokeAgent ? invokeAgent[1].trim() : ""),
    conversationId: str(a["gen_ai.conversation.id"]),
    // Not an OpenTelemetry attribute, but producers send it.
    conversationName: str(a["gen_ai.conversation.name"]),
  };
}

/**
 * Every message a span carries, in this order: system instructions, input messages, output messages (the
 * current semantic conventions, structured or JSON strings), tool-call arguments and result (execute_tool),
 * the older per-message span events, then the older indexed `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`.
 *
 * How parts become text: text and reasoning parts contribute their content; blob, file and uri parts a short
 * bracketed description (`[image blob image/png, 5120 bytes]`, never the data); other part types their
 * `content` when it is a string, else `[type]`. The text parts of one message form one row with the message's
 * role. Each tool_call part is its own `tool_call` row (`name(arguments)`), each tool_call_response part its
 * own `tool_result` row (the response, JSON when structured).
 */
export function extractMessages(span: OtlpSpan): ExtractedMessage[] {
  const out: ExtractedMessage[] = [];
  const a = span.attributes;

  if (a["gen_ai.system_instructions"] !== undefined) systemInstructions(a["gen_ai.system_instructions"], out);
  if (a["gen_ai.input.messages"] !== undefined) messageList(a["gen_ai.input.messages"], "user", out);
  if (a["gen_ai.output.messages"] !== undefined) messageList(a["gen_ai.output.messages"], "assistant", out);

  if (a["gen_ai.tool.call.arguments"] !== undefined) {
    push(out, "tool_call", toolCallText(str(a["gen_ai.tool.name"]), a["gen_ai.tool.call.arguments"]));
  }
  if (a["gen_ai.tool.call.result"] !== undefined) push(out, "tool_result", valueText(a["gen_ai.tool.call.result"]));

  for (const event of span.events) eventMessages(event, out);
  indexedMessages(a, out);
  return out;
}

// ---- current conventions ----------------------------------------------------------------------------------

function systemInstructions(value: AttrValue, out: ExtractedMessage[]): void {
  const parsed = parseJsonString(value);
  if (typeof parsed === "string") {
    push(out, "system", parsed);
    return;
  }
  const parts = Array.isArray(parsed) ? parsed : [parsed];
  messageParts(parts, "system", out);
}

function messageList(value: AttrValue, defaultRole: MessageRole, out: ExtractedMessage[]): void {
  const parsed = parseJsonString(value);
  if (typeof parsed === "string") {
    push(out, defaultRole, parsed);
    return;
  }
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  for (const message of messages) {
    if (isMap(message)) oneMessage(message, defaultRole, out);
    else if (typeof message === "string") push(out, defaultRole, message);
  }
}

/** A message in any of the shapes producers use: `{role, parts}`, or chat-style `{role, content, tool_calls}`. */
function oneMessage(message: AttrMap, defaultRole: MessageRole, out: ExtractedMessage[]): void {
  const role = roleOf(message.role, defaultRole);
  const parts: AttrValue[] = [];
  if (Array.isArray(message.parts)) parts.push(...message.parts);
  // String content is text even when it looks like JSON: users paste JSON into chats.
  const content = message.content ?? null;
  if (typeof content === "string") parts.push({ type: "text", content });
  else if (Array.isArray(content)) parts.push(...content);
  else if (isMap(content)) parts.push(content);
  if (Array.isArray(message.tool_calls)) parts.push(...message.tool_calls.map(chatToolCall));
  messageParts(parts, role, out);
}

function messageParts(parts: AttrValue[], role: MessageRole, out: ExtractedMessage[]): void {
  const texts: string[] = [];
  const toolRows: ExtractedMessage[] = [];
  for (const part of parts) {
    if (typeof part === "string") {
      texts.push(part);
      continue;
    }
    if (!isMap(part)) continue;
    const type = str(part.type);
    switch (type) {
      case "text":
      case "reasoning":
      case "thinking":
        texts.push(str(part.content) || str(part.text) || str(part.thinking));
        break;
      case "tool_call":
      case "function_call":
        toolRows.push({ role: "tool_call", content: toolCallText(str(part.name), part.arguments ?? null) });
        break;
      case "tool_call_response":
      case "tool_result":
        toolRows.push({ role: "tool_result", content: valueText(part.response ?? part.result ?? part.content ?? null) });
        break;
      case "blob":
        texts.push(describe(str(part.modality) || "binary", "blob", str(part.mime_type), `${byteLengthOfBase64(part.content)} bytes`));
        break;
      case "file":
        texts.push(describe(str(part.modality) || "binary", "file", str(part.mime_type), str(part.file_id)));
        break;
      case "uri":
        texts.push(describe(str(part.modality) || "binary", "uri", str(part.mime_type), str(part.uri)));
        break;
      default:
        if (typeof part.content === "string") texts.push(part.content);
        else if (typeof part.text === "string") texts.push(part.text);
        else if (type !== "") texts.push(`[${type}]`);
    }
  }
  const text = texts.filter((t) => t !== "").join("\n");
  if (text !== "") out.push({ role, content: text });
  out.push(...toolRows.filter((row) => row.content !== ""));
}

/** Chat-style `{id, type: "function", function: {name, arguments}}` as a tool_call part. */
function chatToolCall(call: AttrValue): AttrValue {
  if (!isMap(call)) return call;
  const fn = isMap(call.function) ? call.function : call;
  return { type: "tool_call", name: fn.name ?? null, arguments: fn.arguments ?? null };
}

function describe(modality: string, kind: string, mimeType: string, detail: string): string {
  return `[${[modality, kind, mimeType].filter((x) => x !== "").join(" ")}${detail ? `, ${detail}` : ""}]`;
}

function byteLengthOfBase64(value: AttrValue | undefined): number {
  if (typeof value !== "string") return 0;
  const clean = value.replace(/[^A-Za-z0-9+/_-]/g, "");
  return Math.floor((clean.length * 3) / 4);
}

// ---- older producers --------------------------------------------------------------------------------------

const EVENT_ROLES: Record<string, MessageRole> = {
  "gen_ai.system.message": "system",
  "gen_ai.user.message": "user",
  "gen_ai.assistant.message": "assistant",
  "gen_ai.tool.message": "tool",
  "gen_ai.choice": "assistant",
};

function eventMessages(event: OtlpEvent, out: ExtractedMessage[]): void {
  const a = event.attributes;
  const defaultRole = EVENT_ROLES[event.name];
  if (defaultRole !== undefined) {
    // gen_ai.choice nests the message; some producers flatten it into `message.*` attributes.
    const nested = parseJsonString(a.message ?? null);
    const message: AttrMap = isMap(nested)
      ? nested
      : { role: a.role ?? a["message.role"] ?? null, content: a.content ?? a["message.content"] ?? null, tool_calls: a.tool_calls ?? a["message.tool_calls"] ?? null };
    oneMessage(message, defaultRole, out);
    return;
  }
  // The first GenAI conventions put whole prompts and completions on these two events.
  if (event.name === "gen_ai.content.prompt" && a["gen_ai.prompt"] !== undefined) messageList(a["gen_ai.prompt"], "user", out);
  if (event.name === "gen_ai.content.completion" && a["gen_ai.completion"] !== undefined) messageList(a["gen_ai.completion"], "assistant", out);
}

const INDEXED = /^gen_ai\.(prompt|completion)\.(\d+)\.(role|content|tool_calls\.(\d+)\.(name|arguments))$/;

function indexedMessages(attributes: AttrMap, out: ExtractedMessage[]): void {
  const groups = { prompt: new Map<number, AttrMap>(), completion: new Map<number, AttrMap>() };
  for (const [key, value] of Object.entries(attributes)) {
    const m = INDEXED.exec(key);
    if (!m) continue;
    const kind = m[1] as "prompt" | "completion";
    const index = Number(m[2]);
    const message = groups[kind].get(index) ?? { tool_calls: [] };
    groups[kind].set(index, message);
    if (m[3] === "role" || m[3] === "content") message[m[3]] = value;
    else {
      const calls = message.tool_calls as AttrValue[];
      const callIndex = Number(m[4]);
      const call = (calls[callIndex] as AttrMap | undefined) ?? { name: null, arguments: null };
      call[m[5]] = value;
      calls[callIndex] = call;
    }
  }
  for (const [kind, defaultRole] of [["prompt", "user"], ["completion", "assistant"]] as const) {
    const ordered = [...groups[kind].entries()].sort(([x], [y]) => x - y);
    for (const [, message] of ordered) {
      message.tool_calls = (message.tool_calls as AttrValue[]).filter((call) => call != null).map((call) => ({ type: "tool_call", ...(call as AttrMap) }));
      oneMessage(message, defaultRole, out);
    }
  }
}

// ---- helpers ----------------------------------------------------------------------------------------------

/**
 * Producers' roles mapped onto the search roles: `developer` is a system prompt, `model` (Gemini) the
 * assistant, `function`/`ipython` the older names for tool results. An unknown role falls back to the
 * direction's default; an explicitly empty role stays "".
 */
function roleOf(value: AttrValue | undefined, defaultRole: MessageRole): MessageRole {
  if (value === undefined || value === null) return defaultRole;
  const role = str(value).trim().toLowerCase();
  switch (role) {
    case "":
      return "";
    case "user":
    case "human":
      return "user";
    case "assistant":
    case "model":
    case "ai":
      return "assistant";
    case "system":
    case "developer":
      return "system";
    case "tool":
    case "function":
    case "ipython":
      return "tool";
    case "tool_call":
      return "tool_call";
    case "tool_result":
      return "tool_result";
    default:
      return defaultRole;
  }
}

function toolCallText(name: string, args: AttrValue): string {
  const argText = valueText(parseJsonString(args));
  if (name === "") return argText;
  return `${name}(${argText})`;
}

/** Strings as they are; structured values as compact JSON. */
function valueText(value: AttrValue): string {
  if (value === null) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** Attributes may carry JSON text instead of structured values; plain text stays a string. */
function parseJsonString(value: AttrValue): AttrValue {
  if (typeof value !== "string") return value;
  const trimmed = value.trim();
  if (!(trimmed.startsWith("[") || trimmed.startsWith("{"))) return value;
  try {
    return JSON.parse(trimmed) as AttrValue;
  } catch {
    return value;
  }
}

function isMap(value: AttrValue | undefined): value is AttrMap {
  return value !== null && value !== undefined && typeof value === "object" && !Array.isArray(value);
}

function str(value: AttrValue | undefined): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return "";
}

function push(out: ExtractedMessage[], role: MessageRole, content: string): void {
  if (content !== "") out.push({ role, content });
}
