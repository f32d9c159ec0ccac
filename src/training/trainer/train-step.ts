import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { tf } from "./backend.js";
import { AdamW, clipByGlobalNorm, globalNorm } from "./optimizer.js";

/** Numbers reported after every optimizer step (the `gradient_step` event's data). */
export type StepMetrics = Record<string, number> & {
  step: number;
  loss: number;
  grad_norm: number;
  learning_rate: number;
  num_tokens: number;
  num_trainable_tokens: number;
  tokens_per_second: number;
};

export type OnStep = (metrics: StepMetrics) => void | Promise<void>;

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error("training was cancelled");
}

/**
 * Gradient accumulation: each part is one micro-batch whose loss is already divided by the step's token count,
 * so the summed gradients are those of the whole step while only one micro-batch's activations live at a time.
 */
export async function accumulateGradients(
  vars: tf.Variable[],
  parts: (() => tf.Scalar)[],
  signal: AbortSignal | undefined,
): Promise<{ grads: tf.Tensor[]; loss: number }> {
  let acc: tf.Tensor[] = vars.map((v) => tf.zerosLike(v));
  let loss = 0;
  for (const part of parts) {
    throwIfAborted(signal);
    const { value, grads } = tf.variableGrads(part, vars);
    loss += value.dataSync()[0];
    const next = vars.map((v, i) => {
      const g = grads[v.name];
      return g ? acc[i].add(g) : acc[i].clone();
    });
    tf.dispose([value, ...Object.values(grads), ...acc]);
    acc = next;
    // Lets cancellation and other callbacks run between micro-batches.
    await yieldToEventLoop();
  }
  return { grads: acc, loss };
}

/** Clips, applies AdamW and frees the gradients; returns the pre-clipping global norm. */
export function applyGradients(optimizer: AdamW, grads: tf.Tensor[], learningRate: number, maxGradNorm: number): number {
  const norm = globalNorm(grads);
  if (!Number.isFinite(norm)) {
    tf.dispose(grads);
    throw new Error("gradient norm is not finite; lower the learning rate");
  }
  const clipped = clipByGlobalNorm(grads, norm, maxGradNorm);
  optimizer.step(clipped, learningRate);
  tf.dispose(clipped === grads ? grads : [...grads, ...clipped]);
  return norm;
}

/** Splits sequences into optimizer steps: fixed counts, or greedy filling of a token budget (at least one each). */
export function planSteps<S extends { tokens: readonly number[] }>(
  sequences: S[],
  batchSize: number | "auto",
  tokensPerStep: number,
): S[][] {
  const steps: S[][] = [];
  let current: S[] = [];
  let tokens = 0;
  for (const s of sequences) {
    const full = batchSize === "auto" ? current.length > 0 && tokens + s.tokens.length > tokensPerStep : current.length >= batchSize;
    if (full) {
      steps.push(current);
      current = [];
      tokens = 0;
    }
    current.push(s);
    tokens += s.tokens.length;
  }
  if (current.length > 0) steps.push(current);
  return steps;
}

/** Deterministic shuffle (mulberry32), so a seeded run replays exactly. */
export function shuffled<T>(items: T[], seed: number): T[] {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
