import { createHash } from "node:crypto";

/**
 * How text becomes searchable, shared by indexing and querying so both engines see the same words.
 *
 * A word is a run of Unicode letters, digits and combining marks, after NFKC normalisation and lowercasing
 * (search is case-insensitive and full-width forms match their plain forms). Each word is cut to
 * MAX_WORD_LENGTH code points, so that base64 or hex blobs do not blow up the index.
 */
const WORD = /[\p{L}\p{N}\p{M}]+/gu;
export const MAX_WORD_LENGTH = 100;

/**
 * Only the first SEARCH_TEXT_MAX_BYTES of a content's words are indexed. PostgreSQL caps a tsvector at
 * 1 MB; at this size even a text made only of distinct two-letter words stays under it. Both engines index
 * the same prefix, so they return the same results for huge tool outputs too.
 */
export const SEARCH_TEXT_MAX_BYTES = 400_000;

const ASCII = /^[\x00-\x7f]*$/;
const ASCII_WORD = /[a-z0-9]+/g;

export function words(text: string): string[] {
  // Most agent text is ASCII: NFKC is the identity there and the Unicode classes reduce to [a-z0-9].
  if (ASCII.test(text)) return capWords(text.toLowerCase().match(ASCII_WORD) ?? []);
  return capWords(text.normalize("NFKC").toLowerCase().match(WORD) ?? []);
}

function capWords(found: string[]): string[] {
  for (let i = 0; i < found.length; i++) {
    if (found[i].length > MAX_WORD_LENGTH) found[i] = cutCodePoints(found[i], MAX_WORD_LENGTH);
  }
  return found;
}

/**
 * The normalised word string stored beside each content: words separated by single spaces, with a space at
 * both ends so that a phrase is exactly the substring " w1 w2 ".
 */
export function searchText(text: string): string {
  const all = words(text);
  const joined = ` ${all.join(" ")} `;
  if (joined.length * 3 <= SEARCH_TEXT_MAX_BYTES || Buffer.byteLength(joined) <= SEARCH_TEXT_MAX_BYTES) return all.length === 0 ? " " : joined;
  let bytes = 1;
  let count = 0;
  for (const word of all) {
    const size = Buffer.byteLength(word) + 1;
    if (bytes + size > SEARCH_TEXT_MAX_BYTES) break;
    bytes += size;
    count++;
  }
  return count === 0 ? " " : ` ${all.slice(0, count).join(" ")} `;
}

/** Lowercase hex SHA-256 of the UTF-8 content: stable across spans, processes and engines. */
export function contentDigest(content: string): string {
  return createHash("sha256").update(content, "utf8").digest("hex");
}

export const PREVIEW_LENGTH = 500;

/** At most PREVIEW_LENGTH UTF-16 code units, never ending between the two halves of a surrogate pair. */
export function preview(content: string): string {
  if (content.length <= PREVIEW_LENGTH) return content;
  const last = content.charCodeAt(PREVIEW_LENGTH - 1);
  const cut = last >= 0xd800 && last <= 0xdbff ? PREVIEW_LENGTH - 1 : PREVIEW_LENGTH;
  return content.slice(0, cut);
}

function cutCodePoints(word: string, length: number): string {
  return Array.from(word).slice(0, length).join("");
}
