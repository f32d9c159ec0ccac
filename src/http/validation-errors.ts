import type { ErrorObject } from "ajv";

/** One validation problem, located like FastAPI does it: `["body", "limit"]`, `["query", "after"]`. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
}

const SECTION: Record<string, string> = { requestBody: "body", query: "query", path: "path", headers: "header" };

/** Turns Ajv errors from openapi-backend into located, human-readable issues. */
export function toValidationIssues(errors: ErrorObject[]): ValidationIssue[] {
  const unions = errors.filter((e) => e.keyword === "anyOf" || e.keyword === "oneOf").map((e) => e.instancePath);
  // Errors inside a union's branches explain why each branch failed; the union's own error says it better.
  const kept = errors.filter(
    (e) => e.keyword === "anyOf" || e.keyword === "oneOf" || !unions.some((p) => e.instancePath.startsWith(p)),
  );
  const seen = new Set<string>();
  const issues: ValidationIssue[] = [];
  for (const e of kept) {
    const issue = describe(e);
    const key = JSON.stringify(issue);
    if (!seen.has(key)) {
      seen.add(key);
      issues.push(issue);
    }
  }
  return issues;
}

function locate(e: ErrorObject): (string | number)[] {
  const parts = e.instancePath
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
  const [section, ...rest] = parts;
  const loc: (string | number)[] = [SECTION[section] ?? section ?? "body"];
  for (const p of rest) loc.push(/^\d+$/.test(p) ? Number(p) : p);
  if (e.keyword === "required") loc.push(String(e.params.missingProperty));
  if (e.keyword === "additionalProperties") loc.push(String(e.params.additionalProperty));
  return loc;
}

function describe(e: ErrorObject): ValidationIssue {
  const loc = locate(e);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case "required":
      return { loc, msg: "Field required", type: "missing" };
    case "additionalProperties":
      return { loc, msg: "Extra inputs are not permitted", type: "extra_forbidden" };
    case "maximum":
      return { loc, msg: `Input should be less than or equal to ${p.limit}`, type: "less_than_equal" };
    case "minimum":
      return { loc, msg: `Input should be greater than or equal to ${p.limit}`, type: "greater_than_equal" };
    case "exclusiveMaximum":
      return { loc, msg: `Input should be less than ${p.limit}`, type: "less_than" };
    case "exclusiveMinimum":
      return { loc, msg: `Input should be greater than ${p.limit}`, type: "greater_than" };
    case "type":
      return { loc, msg: `Input should be of type ${String(p.type).replace(",", " or ")}`, type: `${String(p.type).split(",")[0]}_type` };
    case "enum":
      return {
        loc,
        msg: `Input should be ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`,
        type: "enum",
      };
    case "const":
      return { loc, msg: `Input should be ${JSON.stringify(p.allowedValue)}`, type: "literal_error" };
    case "pattern":
      return { loc, msg: `String should match pattern '${p.pattern}'`, type: "string_pattern_mismatch" };
    case "format":
      return { loc, msg: `Input should be a valid ${p.format}`, type: `${String(p.format).replace("-", "")}_parsing` };
    case "minLength":
      return { loc, msg: `String should have at least ${p.limit} characters`, type: "string_too_short" };
    case "maxLength":
      return { loc, msg: `String should have at most ${p.limit} characters`, type: "string_too_long" };
    case "minItems":
      return { loc, msg: `List should have at least ${p.limit} items`, type: "too_short" };
    case "maxItems":
      return { loc, msg: `List should have at most ${p.limit} items`, type: "too_long" };
    case "uniqueItems":
      return { loc, msg: "List items should be unique", type: "unique_items" };
    case "anyOf":
    case "oneOf":
      return { loc, msg: "Input does not match any of the allowed forms", type: "union_mismatch" };
    default:
      return { loc, msg: e.message ?? "Invalid input", type: e.keyword };
  }
}
