import { TokenBias, type LlamaModel, type Token } from "node-llama-cpp";

/**
 * Keeps the bytes of a generation well-formed UTF-8 by banning, before each token is sampled, every token whose bytes
 * would make them ill-formed. Byte-level vocabularies have tokens that hold part of a character, and llama.cpp's grammar
 * decodes token bytes as if they were valid UTF-8 (it neither checks continuation bytes inside a token nor rejects
 * overlong forms, surrogates or values above U+10FFFF), so without this a grammar-valid JSON string can decode to
 * U+FFFD replacement characters, or lose its closing quote to a truncated sequence.
 */

/** Decoder states between tokens: 0 between characters, otherwise inside one (Unicode Table 3-7). */
const STATES: readonly { remaining: number; lo: number; hi: number }[] = [
  { remaining: 0, lo: 0, hi: 0 },
  { remaining: 1, lo: 0x80, hi: 0xbf },
  { remaining: 2, lo: 0x80, hi: 0xbf },
  { remaining: 2, lo: 0xa0, hi: 0xbf }, // after E0: no overlong forms
  { remaining: 2, lo: 0x80, hi: 0x9f }, // after ED: no surrogates
  { remaining: 3, lo: 0x80, hi: 0xbf },
  { remaining: 3, lo: 0x90, hi: 0xbf }, // after F0: no overlong forms
  { remaining: 3, lo: 0x80, hi: 0x8f }, // after F4: nothing above U+10FFFF
];
const INVALID = 0xff;

function stepByte(state: number, byte: number): number {
  if (state === 0) {
    if (byte < 0x80) return 0;
    if (byte >= 0xc2 && byte <= 0xdf) return 1;
    if (byte === 0xe0) return 3;
    if (byte === 0xed) return 4;
    if (byte >= 0xe1 && byte <= 0xef) return 2;
    if (byte === 0xf0) return 6;
    if (byte >= 0xf1 && byte <= 0xf3) return 5;
    if (byte === 0xf4) return 7;
    return INVALID;
  }
  const { remaining, lo, hi } = STATES[state];
  if (byte < lo || byte > hi) return INVALID;
  return remaining === 3 ? 2 : remaining === 2 ? 1 : 0;
}

/** Per-model transition table of every token from every decoder state, and the tokens banned in each state. */
export class Utf8TokenFilter {
  private readonly next: Uint8Array;
  private readonly bans: Token[][];
  private readonly shared = new Map<number, TokenBias>();

  constructor(private readonly model: LlamaModel, vocabSize: number, bytesOf: (token: Token) => readonly number[]) {
    const n = STATES.length;
    this.next = new Uint8Array(vocabSize * n);
    for (let t = 0; t < vocabSize; t++) {
      const bytes = bytesOf(t as Token);
      for (let s = 0; s < n; s++) {
        let state = s;
        for (const b of bytes) {
          state = stepByte(state, b);
          if (state === INVALID) break;
        }
        this.next[t * n + s] = state;
      }
    }
    // A state is live when some token leads from it to a live state, 0 being live: banning tokens that lead elsewhere
    // means a generation never enters a character that the vocabulary cannot finish.
    const live = new Array<boolean>(n).fill(false);
    live[0] = true;
    for (let changed = true; changed; ) {
      changed = false;
      for (let s = 1; s < n; s++) {
        if (live[s]) continue;
        for (let t = 0; t < vocabSize; t++) {
          const to = this.next[t * n + s];
          if (to !== INVALID && live[to]) {
            live[s] = changed = true;
            break;
          }
        }
      }
    }
    this.bans = STATES.map((_, s) => {
      const out: Token[] = [];
      for (let t = 0; t < vocabSize; t++) {
        const to = this.next[t * n + s];
        if (to === INVALID || !live[to]) out.push(t as Token);
      }
      return out;
    });
  }

  /** Decoder state after `token`; a banned token is a broken invariant. */
  advance(state: number, token: Token): number {
    const to = this.next[token * STATES.length + state];
    if (to === INVALID) throw new Error(`token ${token} makes the output ill-formed UTF-8 although it was banned`);
    return to;
  }

  /** Tokens that may not follow in a decoder state. */
  banned(state: number): readonly Token[] {
    return this.bans[state];
  }

  /** Token bias for a state: the bans plus the request's logit_bias (token id -> logit added). */
  bias(state: number, logitBias: ReadonlyMap<number, number>): TokenBias {
    if (!logitBias.size) {
      let shared = this.shared.get(state);
      if (!shared) {
        shared = this.build(state, logitBias);
        this.shared.set(state, shared);
      }
      return shared;
    }
    return this.build(state, logitBias);
  }

  private build(state: number, logitBias: ReadonlyMap<number, number>): TokenBias {
    const bias = new TokenBias(this.model.tokenizer);
    for (const [token, logit] of logitBias) bias.set(token as Token, { logit });
    for (const token of this.bans[state]) bias.set(token, "never");
    return bias;
  }
}

/** One generation's decoder state, giving node-llama-cpp the bias to sample each next token with. */
export class Utf8Guard {
  private state = 0;
  private readonly biases = new Map<number, TokenBias>();

  constructor(private readonly filter: Utf8TokenFilter, private readonly logitBias: ReadonlyMap<number, number>) {}

  /** Called by node-llama-cpp before each token is sampled. */
  readonly tokenBias = (): TokenBias => {
    let bias = this.biases.get(this.state);
    if (!bias) {
      bias = this.filter.bias(this.state, this.logitBias);
      this.biases.set(this.state, bias);
    }
    return bias;
  };

  /** Must see every sampled token before the next one is sampled. */
  accept(token: Token): void {
    this.state = this.filter.advance(this.state, token);
  }
}
