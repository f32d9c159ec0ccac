import { AppError, type ErrorKind } from "../errors.js";
import type { ValidationIssue } from "./validation-errors.js";

/**
 * `detail`: search and training (`{"detail": "..."}`, validation errors as 422 `{"detail": [{loc, msg, type}]}`).
 * `openai`: inference (`{"error": {message, type, param, code}}`, validation errors as 400).
 */
export type ErrorStyle = "detail" | "openai";

export interface ErrorReply {
  status: number;
  body: unknown;
}

const STATUS: Record<ErrorKind, number> = {
  invalid: 422,
  unsupported: 400,
  unauthorized: 401,
  quota_exceeded: 402,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  not_implemented: 501,
  unavailable: 503,
};

const OPENAI_TYPE: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "insufficient_quota",
  403: "permission_error",
  404: "invalid_request_error",
  405: "invalid_request_error",
  409: "invalid_request_error",
  413: "invalid_request_error",
  415: "invalid_request_error",
  429: "rate_limit_error",
};

export function validationReply(style: ErrorStyle, issues: ValidationIssue[]): ErrorReply {
  if (style === "detail") return { status: 422, body: { detail: issues } };
  const first = issues[0];
  const param = first ? paramOf(first.loc) : null;
  const message = issues.map((i) => `${paramOf(i.loc) ?? i.loc[0]}: ${i.msg}`).join("; ");
  return openaiReply(400, message, param, "invalid_value");
}

export function appErrorReply(style: ErrorStyle, err: AppError): ErrorReply {
  if (err.kind === "invalid") {
    return validationReply(style, [{ loc: err.loc ?? ["body"], msg: err.message, type: err.code ?? "value_error" }]);
  }
  const status = STATUS[err.kind];
  if (style === "detail") return { status, body: { detail: err.message } };
  return openaiReply(status, err.message, err.loc ? paramOf(err.loc) : null, err.code ?? null);
}

export function plainReply(style: ErrorStyle, status: number, message: string, code: string | null = null): ErrorReply {
  if (style === "detail") return { status, body: { detail: message } };
  return openaiReply(status, message, null, code);
}

function openaiReply(status: number, message: string, param: string | null, code: string | null): ErrorReply {
  return { status, body: { error: { message, type: OPENAI_TYPE[status] ?? "server_error", param, code } } };
}

/** `["body", "messages", 0, "role"]` → `messages[0].role`, the way OpenAI names a parameter. */
function paramOf(loc: (string | number)[]): string | null {
  const rest = loc[0] === "body" || loc[0] === "query" || loc[0] === "header" || loc[0] === "path" ? loc.slice(1) : loc;
  if (rest.length === 0) return null;
  return rest.reduce<string>((acc, part) => (typeof part === "number" ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
}
