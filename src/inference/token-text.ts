import type { LlamaModel, Token } from "node-llama-cpp";
import { byteToChar } from "./byte-level-bpe.js";

/** Exact bytes of each token, from the vocabulary in the GGUF metadata, for logprobs' `bytes`. */
export class TokenBytes {
  private readonly charToByte = new Map<string, number>();
  private readonly cache = new Map<Token, number[]>();

  constructor(
    private readonly model: LlamaModel,
    private readonly tokenizerModel: string,
    private readonly vocab: readonly string[],
  ) {
    byteToChar().forEach((c, b) => this.charToByte.set(c, b));
  }

  bytes(token: Token): number[] {
    let cached = this.cache.get(token);
    if (!cached) {
      cached = this.compute(token);
      this.cache.set(token, cached);
    }
    return cached;
  }

  private compute(token: Token): number[] {
    const text = this.vocab[token];
    if (text !== undefined && !this.model.isSpecialToken(token)) {
      if (this.tokenizerModel === "gpt2") {
        // Byte-level BPE: every character of a normal token stands for one byte.
        const out: number[] = [];
        for (const c of text) {
          const b = this.charToByte.get(c);
          if (b === undefined) return [...Buffer.from(text, "utf-8")];
          out.push(b);
        }
        return out;
      }
      if (this.tokenizerModel === "llama") {
        const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
        if (m) return [parseInt(m[1], 16)];
        return [...Buffer.from(text.replace(/\u2581/g, " "), "utf-8")];
      }
    }
    return [...Buffer.from(this.model.detokenize([token], true), "utf-8")];
  }
}

/**
 * Turns generated tokens into text as they arrive, holding back an incomplete UTF-8 sequence (a token can end in the
 * middle of a character) until the next token completes it.
 */
export class IncrementalDetokenizer {
  private pending: Token[] = [];
  private readonly history: Token[] = [];

  constructor(private readonly model: LlamaModel, private readonly specialTokens: boolean) {}

  /** Text that became final with this token. */
  push(token: Token): string {
    this.pending.push(token);
    const text = this.model.detokenize(this.pending, this.specialTokens, this.history.slice(-4));
    if (text.endsWith("\uFFFD") && this.pending.length < 8) return "";
    this.history.push(...this.pending);
    this.pending = [];
    return text;
  }

  /** Whatever is still held back, at the end of the generation. */
  flush(): string {
    if (!this.pending.length) return "";
    const text = this.model.detokenize(this.pending, this.specialTokens, this.history.slice(-4));
    this.history.push(...this.pending);
    this.pending = [];
    return text;
  }
}

/**
 * Finds stop strings across token boundaries. `push` returns text that can be emitted safely (no suffix of it could
 * still become a stop string) and whether a stop string was found, in which case the text before it is final.
 */
export class StopMatcher {
  private buffer = "";
  private readonly longest: number;

  constructor(private readonly stops: readonly string[]) {
    this.longest = stops.reduce((m, s) => Math.max(m, s.length), 0);
  }

  push(text: string): { emit: string; stopped: boolean } {
    this.buffer += text;
    if (!this.stops.length) {
      const emit = this.buffer;
      this.buffer = "";
      return { emit, stopped: false };
    }
    let first = -1;
    for (const s of this.stops) {
      const i = this.buffer.indexOf(s);
      if (i >= 0 && (first < 0 || i < first)) first = i;
    }
    if (first >= 0) {
      const emit = this.buffer.slice(0, first);
      this.buffer = "";
      return { emit, stopped: true };
    }
    const hold = this.heldSuffixLength();
    const emit = this.buffer.slice(0, this.buffer.length - hold);
    this.buffer = this.buffer.slice(this.buffer.length - hold);
    return { emit, stopped: false };
  }

  flush(): string {
    const rest = this.buffer;
    this.buffer = "";
    return rest;
  }

  /** Length of the longest buffer suffix that is a proper prefix of some stop string. */
  private heldSuffixLength(): number {
    const max = Math.min(this.longest - 1, this.buffer.length);
    for (let len = max; len > 0; len--) {
      const suffix = this.buffer.slice(this.buffer.length - len);
      if (this.stops.some((s) => s.startsWith(suffix))) return len;
    }
    return 0;
  }
}
