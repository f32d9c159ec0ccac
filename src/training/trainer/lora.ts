import { tf } from "./backend.js";
import type { BaseModel, Projection } from "./weights.js";
import { PROJECTIONS } from "./weights.js";

export interface LoraConfig {
  rank: number;
  alpha: number;
  dropout: number;
  targetModules: Projection[];
}

export const DEFAULT_LORA_CONFIG: LoraConfig = {
  rank: 8,
  alpha: 16,
  dropout: 0,
  targetModules: [...PROJECTIONS],
};

/**
 * Held transposed relative to PyTorch (A [rank, in], B [out, rank]) so the forward products need no transposed
 * operand, which the WebAssembly backend multiplies much faster.
 */
export interface LoraPair {
  /** Aᵀ: [in, rank] */
  a: tf.Variable<tf.Rank.R2>;
  /** Bᵀ: [rank, out] */
  b: tf.Variable<tf.Rank.R2>;
}

export interface LoraAdapter {
  config: LoraConfig;
  layers: Partial<Record<Projection, LoraPair>>[];
}

export function loraScale(config: LoraConfig): number {
  return config.alpha / config.rank;
}

export function validateLoraConfig(config: LoraConfig): void {
  if (!Number.isInteger(config.rank) || config.rank < 1) throw new Error(`LoRA rank must be a positive integer, got ${config.rank}`);
  if (!(config.alpha > 0)) throw new Error(`LoRA alpha must be positive, got ${config.alpha}`);
  if (!(config.dropout >= 0 && config.dropout < 1)) throw new Error(`LoRA dropout must be in [0, 1), got ${config.dropout}`);
  const unknown = config.targetModules.filter((m) => !(PROJECTIONS as readonly string[]).includes(m));
  if (unknown.length > 0) throw new Error(`unknown LoRA target modules ${unknown.join(", ")} (known: ${PROJECTIONS.join(", ")})`);
  if (config.targetModules.length === 0) throw new Error("LoRA needs at least one target module");
}

/**
 * A fresh adapter: A drawn uniformly with bound 1/sqrt(in) (the usual Kaiming choice), B zero, so the adapted
 * model starts exactly at the base model.
 */
export function createLoraAdapter(model: BaseModel, config: LoraConfig, seed = 0): LoraAdapter {
  validateLoraConfig(config);
  const layers = model.layers.map((layer, li) => {
    const pairs: Partial<Record<Projection, LoraPair>> = {};
    config.targetModules.forEach((name, mi) => {
      const [out, inDim] = layer.proj[name].shape;
      const bound = 1 / Math.sqrt(inDim);
      pairs[name] = {
        a: tf.variable(tf.randomUniform([inDim, config.rank], -bound, bound, "float32", seed + li * 97 + mi)),
        b: tf.variable(tf.zeros([config.rank, out])),
      };
    });
    return pairs;
  });
  return { config: { ...config, targetModules: [...config.targetModules] }, layers };
}

export function loraVariables(adapter: LoraAdapter): tf.Variable[] {
  return adapter.layers.flatMap((l) => Object.values(l).flatMap((p) => [p.a, p.b]));
}

export function disposeLoraAdapter(adapter: LoraAdapter): void {
  for (const v of loraVariables(adapter)) v.dispose();
}
