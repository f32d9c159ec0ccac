import { tf } from "./backend.js";
import { forwardLogits, type ForwardOptions } from "./forward.js";
import type { BaseModel } from "./weights.js";

/**
 * log p(tokens[t+1] | tokens[0..t]) for t = 0..T-2, as a [T-1] tensor: entry t scores token t+1, so the
 * trainable mask of a sequence lines up with `mask.slice(1)`.
 */
export function tokenLogProbs(model: BaseModel, tokens: readonly number[], opts: ForwardOptions = {}): tf.Tensor1D {
  if (tokens.length < 2) throw new Error("a training sequence needs at least two tokens");
  const logits = forwardLogits(model, tokens.slice(0, -1), opts);
  const targets = tf.oneHot(tf.tensor1d(tokens.slice(1) as number[], "int32"), model.config.nVocab);
  const picked = logits.mul(targets).sum(-1);
  return picked.sub(tf.logSumExp(logits, -1)) as tf.Tensor1D;
}
