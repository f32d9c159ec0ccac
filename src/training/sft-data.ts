import { readFileSync } from "node:fs";
import path from "node:path";
import { Ajv, type ValidateFunction } from "ajv";
import YAML from "yaml";
import { invalid } from "../errors.js";
import { SPEC_DIR } from "../paths.js";

export interface SftDataSummary {
  numExamples: number;
}

const MAX_REPORTED_ERRORS = 20;

let validator: ValidateFunction | undefined;

/** One line of SFT data, checked with the same message and tool schemas the chat endpoints use. */
function exampleValidator(): ValidateFunction {
  if (validator) return validator;
  const chat = YAML.parse(readFileSync(path.join(SPEC_DIR, "components/chat.yaml"), "utf8")) as { components: { schemas: Record<string, unknown> } };
  // The spec's local refs point into components/schemas; here the same schemas live under a `chat` schema id.
  const definitions = JSON.parse(JSON.stringify(chat.components.schemas).replace(/"#\/components\/schemas\//g, '"chat#/definitions/')) as object;
  const ajv = new Ajv({ allErrors: false, strict: false });
  ajv.addSchema({ $id: "chat", definitions });
  validator = ajv.compile({
    type: "object",
    required: ["messages"],
    properties: {
      messages: { type: "array", minItems: 1, items: { $ref: "chat#/definitions/ChatMessage" } },
      tools: { type: ["array", "null"], items: { $ref: "chat#/definitions/ChatTool" } },
    },
  });
  return validator;
}

/**
 * Checks a JSON Lines training file: every non-blank line is `{"messages": [...], "tools"?: [...]}` with at least one
 * assistant message to learn from. Errors name the line (1-based), as `["body", <line>, ...]`.
 */
export function validateSftData(text: string, locPrefix: (string | number)[] = ["body"]): SftDataSummary {
  const validate = exampleValidator();
  const issues: { loc: (string | number)[]; msg: string }[] = [];
  let numExamples = 0;
  const lines = text.split("\n");
  for (let i = 0; i < lines.length && issues.length < MAX_REPORTED_ERRORS; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    const lineNo = i + 1;
    let example: unknown;
    try {
      example = JSON.parse(line);
    } catch (err) {
      issues.push({ loc: [...locPrefix, lineNo], msg: `Line ${lineNo} is not valid JSON: ${(err as Error).message}` });
      continue;
    }
    if (!validate(example)) {
      const e = validate.errors?.[0];
      const where = e?.instancePath ? e.instancePath.slice(1).split("/").map((p) => (/^\d+$/.test(p) ? Number(p) : p)) : [];
      issues.push({ loc: [...locPrefix, lineNo, ...where], msg: `Line ${lineNo}${e?.instancePath ? ` at ${e.instancePath}` : ""}: ${e?.message ?? "invalid example"}` });
      continue;
    }
    const messages = (example as { messages: { role: string }[] }).messages;
    if (!messages.some((m) => m.role === "assistant")) {
      issues.push({ loc: [...locPrefix, lineNo, "messages"], msg: `Line ${lineNo} has no assistant message to train on.` });
      continue;
    }
    numExamples++;
  }
  if (issues.length) {
    const first = issues[0];
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more problem${issues.length > 2 ? "s" : ""}: ${issues.slice(1).map((x) => x.msg).join("; ")})` : "";
    throw invalid(first.msg + more, first.loc, "invalid_training_data");
  }
  if (numExamples === 0) throw invalid("The training data has no examples.", locPrefix, "empty_training_data");
  return { numExamples };
}
