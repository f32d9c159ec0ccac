import { beforeAll, describe, expect, it } from "vitest";
import { initTensorBackend, tf } from "../../src/training/trainer/backend.js";
import { computeAdvantages } from "../../src/training/trainer/rl-advantages.js";
import { rlSequenceLoss, type RlLossStats } from "../../src/training/trainer/rl-loss.js";
import { parseRlConfig, parseSftConfig, type RlConfig } from "../../src/training/trainer/train-config.js";

beforeAll(() => initTensorBackend());

const close = (a: number[], b: number[], eps = 1e-5) => a.forEach((v, i) => expect(v).toBeCloseTo(b[i], -Math.log10(eps)));

describe("advantages", () => {
  it("are reward minus group mean over (std + 1e-6), and equal-reward groups are skipped", () => {
    const r = computeAdvantages([[1, 0, 0, 1], [0.5, 0.5], [2, 4]], { scaleRewards: true, normalizeAdvantages: false, advantageBalance: 0 });
    close(r.advantages[0]!, [1, -1, -1, 1].map((v) => (v * 0.5) / (0.5 + 1e-6)));
    expect(r.advantages[1]).toBeUndefined();
    close(r.advantages[2]!, [-1 / (1 + 1e-6), 1 / (1 + 1e-6)]);
    expect(r.skippedGroups).toBe(1);
    expect(r.rewardMean).toBeCloseTo(9 / 8);
  });

  it("without scaling keep reward units; normalization and balance rescale", () => {
    const raw = computeAdvantages([[2, 4]], { scaleRewards: false, normalizeAdvantages: false, advantageBalance: 0 });
    close(raw.advantages[0]!, [-1, 1]);
    const norm = computeAdvantages([[2, 4], [0, 10]], { scaleRewards: false, normalizeAdvantages: true, advantageBalance: 0 });
    const all = [...norm.advantages[0]!, ...norm.advantages[1]!];
    const std = Math.sqrt(all.reduce((a, b) => a + b * b, 0) / all.length);
    expect(std).toBeCloseTo(1, 4);
    const balanced = computeAdvantages([[2, 4]], { scaleRewards: false, normalizeAdvantages: false, advantageBalance: 0.5 });
    close(balanced.advantages[0]!, [-0.5, 1.5]);
  });
});

describe("configuration", () => {
  it("has the reference defaults and records unknown keys", () => {
    const { config, ignoredKeys } = parseRlConfig({ kimi_k2_tau: 0.1, precalculate_logprobs: true, brand_new: 1 });
    expect(config.lossFn).toBe("cispo");
    expect(config.epsilon).toBe(1);
    expect(config.epsilonHigh).toBe(4);
    expect(config.scaleRewards).toBe(true);
    expect(config.importanceSamplingLevel).toBe("token");
    expect(config.learningRate).toBe(5e-6);
    expect(ignoredKeys.sort()).toEqual(["brand_new", "kimi_k2_tau", "precalculate_logprobs"]);
    const ppo = parseRlConfig({ ppo: true }).config;
    expect(ppo.lossFn).toBe("ppo");
    expect(ppo.epsilon).toBe(0.2);
    expect(ppo.epsilonHigh).toBe(0.2);
    expect(() => parseRlConfig({ importance_sampling_level: "bogus" })).toThrow(/importance_sampling_level/);
    const sft = parseSftConfig({ batch_size: 4, learning_rate: [1e-3, 5e-4] }, { assistant_turns: "last" }).config;
    expect(sft.batchSize).toBe(4);
    expect(sft.learningRate).toEqual([1e-3, 5e-4]);
    expect(sft.assistantTurns).toBe("last");
  });
});

/** Gradient of the summed loss with respect to the current log-probs, and the loss value. */
function lossAndGrad(logprobs: number[], old: number[], advantage: number, config: RlConfig, reference?: number[]) {
  const stats: RlLossStats = { ratioSum: 0, clippedTokens: 0, klSum: 0 };
  const x = tf.tensor1d(logprobs);
  const f = (lp: tf.Tensor) =>
    rlSequenceLoss(
      {
        logprobs: lp as tf.Tensor1D,
        oldLogprobs: Float32Array.from(old),
        mask: new Float32Array(logprobs.length).fill(1),
        advantage,
        referenceLogprobs: reference ? Float32Array.from(reference) : undefined,
      },
      config,
      stats,
    );
  const { value, grad } = tf.valueAndGrad(f)(x);
  return { loss: value.dataSync()[0], grad: Array.from(grad.dataSync()), stats };
}

describe("RL losses", () => {
  const cispo = parseRlConfig({}).config;
  const ppo = parseRlConfig({ ppo: true }).config;

  it("clipped-ratio REINFORCE weights log π by clip(ratio, 1−ε, 1+ε_high)·A without differentiating the ratio", () => {
    // ratios e^0 = 1, e^2 ≈ 7.39 (clipped to 5), e^-1 ≈ 0.37
    const lp = [-1, -0.5, -3];
    const old = [-1, -2.5, -2];
    const { loss, grad, stats } = lossAndGrad(lp, old, 2, cispo);
    const w = [1, 5, Math.exp(-1)];
    expect(loss).toBeCloseTo(-2 * (w[0] * lp[0] + w[1] * lp[1] + w[2] * lp[2]), 4);
    close(grad, w.map((x) => -2 * x), 1e-4);
    expect(stats.clippedTokens).toBe(1);
  });

  it("PPO stops the gradient where the ratio left the trust region in the advantage's direction", () => {
    const lp = [Math.log(1.5), Math.log(1.1), Math.log(0.5)];
    const old = [0, 0, 0];
    const pos = lossAndGrad(lp, old, 1, ppo);
    // A > 0: ratio 1.5 > 1.2 is clipped (no gradient); 1.1 inside (grad −ratio·A); 0.5 below 0.8 keeps the gradient.
    close(pos.grad, [0, -1.1, -0.5], 1e-4);
    const neg = lossAndGrad(lp, old, -1, ppo);
    // A < 0: the low side clips now.
    close(neg.grad, [1.5, 1.1, 0], 1e-4);
  });

  it("sequence-level importance sampling uses the geometric mean ratio for every token", () => {
    const seq = parseRlConfig({ importance_sampling_level: "sequence" }).config;
    const lp = [-1, -2];
    const old = [-1.5, -1.7];
    const r = Math.exp((0.5 - 0.3) / 2);
    const { grad } = lossAndGrad(lp, old, 1, seq);
    close(grad, [-r, -r], 1e-4);
  });

  it("adds the k3 KL estimate against the reference", () => {
    const kl = parseRlConfig({ kl_penalty_coef: 0.5 }).config;
    const lp = [-1, -2];
    const ref = [-1.5, -1];
    const { loss, stats } = lossAndGrad(lp, lp, 0, kl, ref);
    const k3 = ref.map((r, i) => Math.exp(r - lp[i]) - (r - lp[i]) - 1);
    expect(stats.klSum).toBeCloseTo(k3[0] + k3[1], 5);
    expect(loss).toBeCloseTo(0.5 * (k3[0] + k3[1]), 5);
  });

  it("caps the importance weight of negative-advantage tokens when asked", () => {
    const capped = parseRlConfig({ max_negative_advantage_importance_sampling_weight: 2 }).config;
    const { grad } = lossAndGrad([0], [-1.5], -1, capped);
    close(grad, [2], 1e-5);
  });
});
