import { SearchRequestError } from "./errors.js";
import { words } from "./text.js";

/** A query that cannot be run (422 at loc ["body","query"]). */
export class QueryError extends SearchRequestError {
  constructor(message: string, type: string) {
    super(["body", "query"], message, type);
    this.name = "QueryError";
  }
}

/** Every term must match. A term of one word matches that word; a longer term matches as a phrase. */
export interface ParsedQuery {
  terms: string[][];
}

/**
 * Parses the full-text query syntax: words (all must match), double-quoted phrases, and `\"` for a literal
 * quote. Words are normalised like indexed text (see text.ts). An unquoted chunk that normalises to several
 * words, such as `get_weather` or `e-mail`, is a phrase: that is what its writer means.
 * Returns null for an empty (or blank) query, which means structured retrieval.
 */
export function parseQuery(query: string): ParsedQuery | null {
  if (query.trim() === "") return null;
  const chunks: { text: string; quoted: boolean }[] = [];
  let current = "";
  let quoted = false;
  for (let i = 0; i < query.length; i++) {
    const ch = query[i];
    if (ch === "\\" && query[i + 1] === '"') {
      current += '"';
      i++;
    } else if (ch === '"') {
      chunks.push({ text: current, quoted });
      current = "";
      quoted = !quoted;
    } else {
      current += ch;
    }
  }
  if (quoted) throw new QueryError("Unclosed double quote in query; close the phrase or escape the quote as \\\".", "value_error.query.unclosed_quote");
  chunks.push({ text: current, quoted: false });

  const terms: string[][] = [];
  const seen = new Set<string>();
  const add = (term: string[]) => {
    const key = term.join(" ");
    if (term.length > 0 && !seen.has(key)) {
      seen.add(key);
      terms.push(term);
    }
  };
  for (const chunk of chunks) {
    if (chunk.quoted) add(words(chunk.text));
    else for (const piece of chunk.text.split(/\s+/u)) add(words(piece));
  }
  if (terms.length === 0) {
    throw new QueryError("Query has no word to search for (words are letters and digits); send an empty query for structured retrieval.", "value_error.query.no_word");
  }
  return { terms };
}
