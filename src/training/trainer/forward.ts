import { tf } from "./backend.js";
import { loraScale, type LoraAdapter, type LoraPair } from "./lora.js";
import { applyRope, ropeTables, type RopeTables } from "./rope.js";
import type { BaseModel, LayerWeights, Projection } from "./weights.js";

export interface ForwardOptions {
  /** Adapter to apply; the base model alone when absent. */
  adapter?: LoraAdapter;
  /** Enables LoRA dropout. */
  training?: boolean;
  /** Seed for dropout masks, so a step can be replayed. */
  dropoutSeed?: number;
}

// Large negative rather than -Infinity: keeps softmax gradients finite on fully masked entries.
const MASKED = -1e9;

function rmsNorm(x: tf.Tensor, weight: tf.Tensor1D, eps: number): tf.Tensor {
  const ms = x.square().mean(-1, true);
  return x.mul(ms.add(eps).rsqrt()).mul(weight);
}

function linear(
  x: tf.Tensor2D,
  layer: LayerWeights,
  name: Projection,
  pair: LoraPair | undefined,
  opts: ForwardOptions,
  scale: number,
  seed: number,
): tf.Tensor2D {
  let y: tf.Tensor2D = layer.proj[name].apply(x);
  if (pair) {
    const rate = opts.training ? opts.adapter!.config.dropout : 0;
    const input = rate > 0 ? tf.dropout(x, rate, undefined, seed) : x;
    // Same association as llama.cpp (B·(A·x))·scale, keeping the rank-r intermediate small.
    const low = tf.matMul(input, pair.a);
    y = y.add(tf.matMul(low, pair.b).mul(scale)) as tf.Tensor2D;
  }
  return y;
}

function causalMask(n: number): tf.Tensor2D {
  const data = new Float32Array(n * n);
  for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) data[i * n + j] = MASKED;
  return tf.tensor2d(data, [n, n]);
}

/** Final hidden states [T, embd] after the output norm. */
export function forwardHidden(model: BaseModel, tokens: ArrayLike<number>, opts: ForwardOptions = {}): tf.Tensor2D {
  const cfg = model.config;
  const T = tokens.length;
  if (T === 0) throw new Error("cannot run the model on an empty token sequence");
  const ids = tf.tensor1d(Array.from(tokens), "int32");
  const rope: RopeTables = ropeTables(cfg, T, model.ropeFreqFactors);
  const mask = causalMask(T);
  const scale = opts.adapter ? loraScale(opts.adapter.config) : 0;
  const seedBase = opts.dropoutSeed ?? 0;
  const group = cfg.nHead / cfg.nHeadKv;
  const attnScale = 1 / Math.sqrt(cfg.headDim);

  let h = tf.gather(model.tokenEmbedding, ids) as tf.Tensor2D;
  model.layers.forEach((layer, li) => {
    const pairs = opts.adapter?.layers[li] ?? {};
    const seedOf = (k: number) => seedBase * 1_000_003 + li * 16 + k;
    const x = rmsNorm(h, layer.attnNorm, cfg.rmsEps) as tf.Tensor2D;

    const project = (name: "attn_q" | "attn_k" | "attn_v", heads: number, k: number): tf.Tensor3D => {
      let y = linear(x, layer, name, pairs[name], opts, scale, seedOf(k));
      const bias = layer.bias[name];
      if (bias) y = y.add(bias);
      return y.reshape([T, heads, cfg.headDim]);
    };
    let q = project("attn_q", cfg.nHead, 0);
    let k = project("attn_k", cfg.nHeadKv, 1);
    const v = project("attn_v", cfg.nHeadKv, 2);
    if (layer.qNorm) q = rmsNorm(q, layer.qNorm, cfg.rmsEps) as tf.Tensor3D;
    if (layer.kNorm) k = rmsNorm(k, layer.kNorm, cfg.rmsEps) as tf.Tensor3D;
    q = applyRope(q, rope, cfg);
    k = applyRope(k, rope, cfg);

    // Per-head 2D products: this backend multiplies 2D operands several times faster than batched 3D ones, and
    // GQA needs no copies since query head i simply reads KV head floor(i / group), as in llama.cpp.
    const qs = tf.unstack(q.mul(attnScale), 1) as tf.Tensor2D[];
    const kts = tf.unstack(k.transpose([1, 2, 0]), 0) as tf.Tensor2D[];
    const vs = tf.unstack(v, 1) as tf.Tensor2D[];
    const heads = qs.map((qh, i) => {
      const kv = Math.floor(i / group);
      const probs = tf.softmax(tf.matMul(qh, kts[kv]).add(mask));
      return tf.matMul(probs as tf.Tensor2D, vs[kv]);
    });
    const merged = tf.stack(heads, 1).reshape([T, cfg.nHead * cfg.headDim]) as tf.Tensor2D;
    h = h.add(linear(merged, layer, "attn_output", pairs.attn_output, opts, scale, seedOf(3)));

    const x2 = rmsNorm(h, layer.ffnNorm, cfg.rmsEps) as tf.Tensor2D;
    const gate = linear(x2, layer, "ffn_gate", pairs.ffn_gate, opts, scale, seedOf(4));
    const up = linear(x2, layer, "ffn_up", pairs.ffn_up, opts, scale, seedOf(5));
    const act = gate.mul(gate.sigmoid()).mul(up) as tf.Tensor2D;
    h = h.add(linear(act, layer, "ffn_down", pairs.ffn_down, opts, scale, seedOf(6)));
  });
  return rmsNorm(h, model.outputNorm, cfg.rmsEps) as tf.Tensor2D;
}

/** Next-token logits [T, vocab] for every position. */
export function forwardLogits(model: BaseModel, tokens: ArrayLike<number>, opts: ForwardOptions = {}): tf.Tensor2D {
  return model.output.apply(forwardHidden(model, tokens, opts));
}
