import { beforeAll, describe, expect, it } from "vitest";
import { initTensorBackend, tf } from "../../src/training/trainer/backend.js";
import { AdamW, clipByGlobalNorm, globalNorm, learningRateAt } from "../../src/training/trainer/optimizer.js";
import { planSteps } from "../../src/training/trainer/train-step.js";

beforeAll(() => initTensorBackend());

describe("optimisation", () => {
  it("AdamW takes the bias-corrected step and decays weights decoupled from the gradient", () => {
    const x = tf.variable(tf.tensor1d([1, -2]));
    const opt = new AdamW([x], { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weightDecay: 0.1 });
    opt.step([tf.tensor1d([0.5, -4])], 0.01);
    // First step: m̂ = g, v̂ = g², update = g/|g| = ±1.
    const expected = [1 * (1 - 0.001) - 0.01, -2 * (1 - 0.001) + 0.01];
    Array.from(x.dataSync()).forEach((v, i) => expect(v).toBeCloseTo(expected[i], 6));
    opt.dispose();
  });

  it("clips by global norm", () => {
    const grads = [tf.tensor1d([3, 0]), tf.tensor1d([0, 4])];
    const norm = globalNorm(grads);
    expect(norm).toBeCloseTo(5, 5);
    const clipped = clipByGlobalNorm(grads, norm, 1);
    expect(globalNorm(clipped)).toBeCloseTo(1, 4);
    expect(clipByGlobalNorm(grads, norm, 10)).toBe(grads);
  });

  it("schedules: warmup, cosine to a floor, per-step lists", () => {
    const cfg = { learningRate: 1, warmupSteps: 3, schedule: "cosine" as const, minLearningRateRatio: 0.1 };
    expect(learningRateAt(0, 10, cfg)).toBeCloseTo(0.25);
    expect(learningRateAt(2, 10, cfg)).toBeCloseTo(0.75);
    expect(learningRateAt(3, 10, cfg)).toBeCloseTo(1);
    expect(learningRateAt(9, 10, cfg)).toBeCloseTo(0.1);
    expect(learningRateAt(5, 10, { ...cfg, warmupSteps: 0, schedule: "constant" })).toBe(1);
    expect(learningRateAt(5, 10, { ...cfg, learningRate: [3, 2, 1] })).toBe(1);
  });

  it("batches sequences by count or by token budget", () => {
    const seqs = [5, 5, 5, 20, 1].map((n) => ({ tokens: new Array<number>(n).fill(0) }));
    expect(planSteps(seqs, 2, 0).map((s) => s.length)).toEqual([2, 2, 1]);
    expect(planSteps(seqs, "auto", 12).map((s) => s.map((x) => x.tokens.length))).toEqual([[5, 5], [5], [20], [1]]);
  });
});
