import type { GbnfJsonSchema } from "node-llama-cpp";
import { UnsupportedRequestError } from "./errors.js";
import type { JsonSchema } from "./types.js";

/** Keywords llama.cpp's JSON-schema grammar (as node-llama-cpp generates it) enforces. */
const ENFORCED = new Set([
  "type", "enum", "const", "oneOf", "properties", "required", "additionalProperties", "items", "prefixItems",
  "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties", "format", "$ref", "$defs",
]);
/** Keywords that only describe and never constrain, so dropping them changes nothing. */
const ANNOTATIONS = new Set([
  "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly",
]);
const FORMATS = new Set(["date-time", "time", "date"]);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function convert(node: unknown, path: string, param: string): unknown {
  if (node === true || (isRecord(node) && Object.keys(node).length === 0)) {
    throw new UnsupportedRequestError(`JSON schema at ${path} accepts any value, which a grammar cannot bound; give it a type`, param);
  }
  if (!isRecord(node)) throw new UnsupportedRequestError(`JSON schema at ${path} is not an object`, param);
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (ANNOTATIONS.has(key)) {
      if (key === "description" && typeof value === "string") out.description = value;
      continue;
    }
    // A grammar that accepts any alternative enforces anyOf exactly as oneOf would be generated.
    const target = key === "anyOf" ? "oneOf" : key;
    if (!ENFORCED.has(target)) {
      throw new UnsupportedRequestError(`JSON schema keyword "${key}" at ${path} cannot be enforced by the grammar`, param);
    }
    if (target === "format" && !(typeof value === "string" && FORMATS.has(value))) {
      throw new UnsupportedRequestError(`JSON schema format "${String(value)}" at ${path} cannot be enforced`, param);
    }
    if (target === "properties" || target === "$defs") {
      if (!isRecord(value)) throw new UnsupportedRequestError(`"${key}" at ${path} must be an object`, param);
      out[target] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, convert(v, `${path}.${key}.${k}`, param)]));
    } else if (target === "oneOf" || target === "prefixItems") {
      if (!Array.isArray(value)) throw new UnsupportedRequestError(`"${key}" at ${path} must be an array`, param);
      out[target] = value.map((v, i) => convert(v, `${path}.${key}[${i}]`, param));
    } else if (target === "items" || (target === "additionalProperties" && isRecord(value))) {
      out[target] = convert(value, `${path}.${key}`, param);
    } else {
      out[target] = value;
    }
  }
  return out;
}

/** Checks that every constraint of a JSON schema can be enforced by grammar and returns it in node-llama-cpp's dialect. */
export function toGrammarSchema(schema: JsonSchema, param: string): GbnfJsonSchema {
  return convert(schema, "#", param) as GbnfJsonSchema;
}
