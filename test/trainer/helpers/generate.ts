import type { ControlledEvaluateInputItem, LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";

async function withSequence<T>(model: LlamaModel, adapterPath: string | undefined, fn: (seq: LlamaContextSequence) => Promise<T>): Promise<T> {
  const context = await model.createContext({
    contextSize: 512,
    sequences: 1,
    // One thread: token-by-token decoding of a tiny model gains nothing from more, and busy-waiting threads crawl
    // when the machine is oversubscribed.
    threads: 1,
    lora: adapterPath ? { adapters: [{ filePath: adapterPath }] } : undefined,
  });
  try {
    return await fn(context.getSequence());
  } finally {
    await context.dispose();
  }
}

function logSoftmax(logits: Map<Token, number>): Map<number, number> {
  let max = -Infinity;
  for (const v of logits.values()) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits.values()) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  const out = new Map<number, number>();
  for (const [t, v] of logits) out.set(Number(t), v - lse);
  return out;
}

export interface Sampled {
  tokens: number[];
  logprobs: number[];
  text: string;
}

/**
 * Decodes token by token through llama.cpp, reading the raw logits at each step: greedy when rng is absent,
 * otherwise sampled at temperature 1 from the full distribution, with the exact log-probability of each token.
 */
export async function decode(
  model: LlamaModel,
  adapterPath: string | undefined,
  prompt: number[],
  maxTokens: number,
  rng?: () => number,
): Promise<Sampled> {
  return withSequence(model, adapterPath, async (seq) => {
    const tokens: number[] = [];
    const logprobs: number[] = [];
    let input: number[] = prompt;
    for (let i = 0; i < maxTokens; i++) {
      const items: ControlledEvaluateInputItem[] = input.map((t, k) =>
        k === input.length - 1 ? [t as Token, { generateNext: { logits: true } }] : (t as Token),
      );
      const out = await seq.controlledEvaluate(items);
      const logits = out[out.length - 1]?.next?.logits;
      if (!logits) throw new Error("no logits");
      const lp = logSoftmax(logits);
      let chosen = -1;
      if (!rng) {
        let best = -Infinity;
        for (const [t, v] of lp) if (v > best) [best, chosen] = [v, t];
      } else {
        let u = rng();
        for (const [t, v] of lp) {
          u -= Math.exp(v);
          chosen = t;
          if (u <= 0) break;
        }
      }
      tokens.push(chosen);
      logprobs.push(lp.get(chosen)!);
      if (model.isEogToken(chosen as Token)) break;
      input = [chosen];
    }
    const content = tokens.filter((t) => !model.isEogToken(t as Token));
    return { tokens, logprobs, text: model.detokenize(content as Token[]) };
  });
}

export { mulberry32 as seededRandom } from "../../../src/inference/random.js";
