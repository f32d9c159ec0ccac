/**
 * Byte-level BPE as GPT-2 defines it: every byte maps to a printable unicode character, tokens are strings of those
 * characters, and merges are "left right" pairs ranked by order. This is what llama.cpp's "gpt2" tokenizer model reads.
 */

let byteToCharTable: string[] | undefined;

export function byteToChar(): readonly string[] {
  if (byteToCharTable) return byteToCharTable;
  const table: string[] = new Array(256);
  const printable = (b: number): boolean => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let extra = 0;
  for (let b = 0; b < 256; b++) table[b] = String.fromCodePoint(printable(b) ? b : 256 + extra++);
  byteToCharTable = table;
  return table;
}

/** GPT-2's pre-tokenisation: contractions, letter runs, digit runs, punctuation runs, whitespace. */
const PRE_TOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

export interface BpeVocabulary {
  /** 256 byte tokens first (in byte order), then one token per merge. */
  tokens: string[];
  merges: string[];
}

/** Learns up to `maxMerges` merges from a corpus (most frequent pair first, ties broken by string order, so the result is deterministic). */
export function trainByteLevelBpe(corpus: string, maxMerges: number): BpeVocabulary {
  const table = byteToChar();
  const wordCounts = new Map<string, number>();
  for (const m of corpus.matchAll(PRE_TOKENIZE)) wordCounts.set(m[0], (wordCounts.get(m[0]) ?? 0) + 1);
  const words: { symbols: string[]; count: number }[] = [];
  for (const [word, count] of [...wordCounts].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    words.push({ symbols: [...Buffer.from(word, "utf-8")].map((b) => table[b]), count });
  }
  const tokens = [...table];
  const known = new Set(tokens);
  const merges: string[] = [];
  while (merges.length < maxMerges) {
    const pairs = new Map<string, number>();
    for (const w of words) {
      for (let i = 0; i + 1 < w.symbols.length; i++) {
        const key = `${w.symbols[i]} ${w.symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + w.count);
      }
    }
    let best: string | undefined;
    let bestCount = 0;
    for (const [pair, count] of pairs) {
      if (count > bestCount || (count === bestCount && best !== undefined && pair < best)) {
        best = pair;
        bestCount = count;
      }
    }
    if (best === undefined) break;
    const [left, right] = best.split(" ");
    const merged = left + right;
    merges.push(best);
    // Two merge paths can spell the same string; the vocabulary keeps one token for it.
    if (!known.has(merged)) {
      known.add(merged);
      tokens.push(merged);
    }
    for (const w of words) {
      const out: string[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (i + 1 < w.symbols.length && w.symbols[i] === left && w.symbols[i + 1] === right) {
          out.push(merged);
          i++;
        } else {
          out.push(w.symbols[i]);
        }
      }
      w.symbols = out;
    }
  }
  return { tokens, merges };
}
