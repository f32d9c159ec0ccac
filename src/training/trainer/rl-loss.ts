import { tf } from "./backend.js";
import type { RlConfig } from "./train-config.js";

export interface RlSequenceInput {
  /** Current policy log-probs of each scored token [N] (with gradient). */
  logprobs: tf.Tensor1D;
  /** Old-policy log-probs [N]; NaN where unknown (the current value, detached, stands in). */
  oldLogprobs: Float32Array;
  /** 1 for trained tokens [N]. */
  mask: Float32Array;
  advantage: number;
  /** Base-model (adapter off) log-probs [N], when a KL penalty is used. */
  referenceLogprobs?: Float32Array;
}

export interface RlLossStats {
  /** Sum over trained tokens of the importance ratio, of clipped tokens and of the k3 KL estimate. */
  ratioSum: number;
  clippedTokens: number;
  klSum: number;
}

/**
 * Summed (not averaged) per-token RL loss of one sequence. Default is the clipped-ratio REINFORCE (CISPO-like):
 * −clip(sg(ρ), 1−ε, 1+ε_high)·A·log π; with lossFn "ppo" it is −min(ρA, clip(ρ, 1−ε, 1+ε_high)A). ρ is per token,
 * or per sequence (geometric mean: exp of the mean log-ratio, "sequence"/"geometric_average"; arithmetic mean of
 * token ratios, "average"). A k3 estimate of KL(π‖π_base) is added with klPenaltyCoef.
 */
export function rlSequenceLoss(input: RlSequenceInput, config: RlConfig, stats: RlLossStats): tf.Scalar {
  const current = input.logprobs.dataSync() as Float32Array;
  const n = current.length;
  const old = new Float32Array(n);
  for (let i = 0; i < n; i++) old[i] = Number.isNaN(input.oldLogprobs[i]) ? current[i] : input.oldLogprobs[i];
  const mask = tf.tensor1d(input.mask);
  const count = input.mask.reduce((a, b) => a + b, 0);
  const A = input.advantage;
  const lo = 1 - config.epsilon;
  const hi = 1 + config.epsilonHigh;
  const cap = A < 0 && config.maxNegativeAdvantageImportanceWeight > 0 ? config.maxNegativeAdvantageImportanceWeight : Infinity;

  // Log-ratio with gradient, and its detached value for weights and statistics.
  const logRatio = input.logprobs.sub(tf.tensor1d(old));
  const ratioValues = new Float32Array(n);
  let sequenceRatio = 1;
  if (config.importanceSamplingLevel !== "token" && count > 0) {
    let s = 0;
    for (let i = 0; i < n; i++) {
      if (!input.mask[i]) continue;
      s += config.importanceSamplingLevel === "average" ? Math.exp(current[i] - old[i]) : current[i] - old[i];
    }
    sequenceRatio = config.importanceSamplingLevel === "average" ? s / count : Math.exp(s / count);
  }
  for (let i = 0; i < n; i++) {
    ratioValues[i] = config.importanceSamplingLevel === "token" ? Math.exp(current[i] - old[i]) : sequenceRatio;
  }

  let perToken: tf.Tensor1D;
  if (config.lossFn === "cispo") {
    const weights = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const w = Math.min(Math.max(ratioValues[i], lo), hi, cap);
      if (input.mask[i] && w !== ratioValues[i]) stats.clippedTokens++;
      weights[i] = w;
    }
    perToken = tf.tensor1d(weights).mul(input.logprobs).mul(-A) as tf.Tensor1D;
  } else {
    let ratio: tf.Tensor1D;
    if (config.importanceSamplingLevel === "token") ratio = logRatio.exp() as tf.Tensor1D;
    else if (config.importanceSamplingLevel === "average") {
      ratio = logRatio.exp().mul(mask).sum().div(Math.max(count, 1)).mul(tf.onesLike(logRatio)) as tf.Tensor1D;
    } else ratio = logRatio.mul(mask).sum().div(Math.max(count, 1)).exp().mul(tf.onesLike(logRatio)) as tf.Tensor1D;
    if (cap !== Infinity) ratio = ratio.minimum(cap) as tf.Tensor1D;
    for (let i = 0; i < n; i++) {
      if (input.mask[i] && (ratioValues[i] < lo || ratioValues[i] > hi)) stats.clippedTokens++;
    }
    const unclipped = ratio.mul(A);
    const clipped = ratio.clipByValue(lo, hi).mul(A);
    perToken = unclipped.minimum(clipped).neg() as tf.Tensor1D;
  }
  for (let i = 0; i < n; i++) if (input.mask[i]) stats.ratioSum += ratioValues[i];

  if (config.klPenaltyCoef > 0 && input.referenceLogprobs) {
    // k3 = exp(ref − logπ) − (ref − logπ) − 1: unbiased, always ≥ 0.
    const delta = tf.tensor1d(input.referenceLogprobs).sub(input.logprobs);
    const k3 = delta.exp().sub(delta).sub(1);
    const k3Values = k3.dataSync();
    for (let i = 0; i < n; i++) if (input.mask[i]) stats.klSum += k3Values[i];
    perToken = perToken.add(k3.mul(config.klPenaltyCoef)) as tf.Tensor1D;
  }
  return perToken.mul(mask).sum() as tf.Scalar;
}
