import { DEFAULT_LORA_CONFIG, validateLoraConfig, type LoraConfig } from "./lora.js";
import type { OverflowRule } from "./chat-tokens.js";
import type { ScheduleConfig } from "./optimizer.js";
import type { Projection } from "./weights.js";

/** Settings shared by SFT and RL; read from snake_case request keys. */
export interface CommonConfig extends ScheduleConfig {
  /** Sequences per optimizer step, or "auto" to fill each step up to tokensPerStep. */
  batchSize: number | "auto";
  tokensPerStep: number;
  maxSequenceLength: number;
  overflow: OverflowRule;
  weightDecay: number;
  maxGradNorm: number;
  lora: LoraConfig;
  seed: number;
}

export interface SftConfig extends CommonConfig {
  epochs: number;
  assistantTurns: "all" | "last";
}

export type ImportanceSamplingLevel = "token" | "sequence" | "average" | "geometric_average";

export interface RlConfig extends CommonConfig {
  lossFn: "cispo" | "ppo";
  epsilon: number;
  epsilonHigh: number;
  importanceSamplingLevel: ImportanceSamplingLevel;
  scaleRewards: boolean;
  normalizeAdvantages: boolean;
  /** In [-1, 1]: weight (1 + b) on positive and (1 - b) on negative advantages. */
  advantageBalance: number;
  klPenaltyCoef: number;
  allowTrainingWithoutLogprobs: boolean;
  /** Upper bound on the importance weight of tokens with negative advantage (0 = none). */
  maxNegativeAdvantageImportanceWeight: number;
}

export interface ParsedConfig<C> {
  config: C;
  /** Keys accepted and recorded but with no effect on this trainer. */
  ignoredKeys: string[];
}

type Raw = Record<string, unknown>;

class Reader {
  readonly used = new Set<string>();
  constructor(private readonly raw: Raw) {}

  private get(key: string): unknown {
    this.used.add(key);
    return this.raw[key];
  }

  number(key: string, fallback: number, check?: (n: number) => boolean): number {
    const v = this.get(key);
    if (v === undefined || v === null) return fallback;
    if (typeof v !== "number" || !Number.isFinite(v) || (check && !check(v))) throw new Error(`${key} has an invalid value ${JSON.stringify(v)}`);
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.get(key);
    if (v === undefined || v === null) return fallback;
    if (typeof v !== "boolean") throw new Error(`${key} must be a boolean`);
    return v;
  }

  oneOf<T extends string>(key: string, options: readonly T[], fallback: T): T {
    const v = this.get(key);
    if (v === undefined || v === null) return fallback;
    if (typeof v !== "string" || !(options as readonly string[]).includes(v)) {
      throw new Error(`${key} must be one of ${options.join(", ")}`);
    }
    return v as T;
  }

  learningRate(fallback: number): number | number[] {
    const v = this.get("learning_rate");
    if (v === undefined || v === null) return fallback;
    if (typeof v === "number" && v > 0) return v;
    if (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "number" && x >= 0)) return v as number[];
    throw new Error("learning_rate must be a positive number or a non-empty list of numbers");
  }

  batchSize(): number | "auto" {
    const v = this.get("batch_size");
    if (v === undefined || v === null || v === "auto") return "auto";
    if (typeof v === "number" && Number.isInteger(v) && v > 0) return v;
    throw new Error('batch_size must be a positive integer or "auto"');
  }

  modules(): Projection[] {
    const v = this.get("lora_target_modules");
    if (v === undefined || v === null) return [...DEFAULT_LORA_CONFIG.targetModules];
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw new Error("lora_target_modules must be a list of names");
    // Accept the Hugging Face names too (q_proj, ..., down_proj).
    const alias: Record<string, Projection> = {
      q_proj: "attn_q", k_proj: "attn_k", v_proj: "attn_v", o_proj: "attn_output",
      gate_proj: "ffn_gate", up_proj: "ffn_up", down_proj: "ffn_down",
    };
    return (v as string[]).map((m) => alias[m] ?? (m as Projection));
  }

  unused(): string[] {
    return Object.keys(this.raw).filter((k) => !this.used.has(k));
  }
}

const positive = (n: number) => n > 0;
const nonNegative = (n: number) => n >= 0;

function readCommon(r: Reader, defaultLr: number): CommonConfig {
  const lora: LoraConfig = {
    rank: r.number("lora_rank", DEFAULT_LORA_CONFIG.rank, positive),
    alpha: r.number("lora_alpha", DEFAULT_LORA_CONFIG.alpha, positive),
    dropout: r.number("lora_dropout", DEFAULT_LORA_CONFIG.dropout, nonNegative),
    targetModules: r.modules(),
  };
  validateLoraConfig(lora);
  return {
    learningRate: r.learningRate(defaultLr),
    warmupSteps: r.number("warmup_steps", 0, nonNegative),
    schedule: r.oneOf("lr_schedule", ["constant", "cosine"] as const, "constant"),
    minLearningRateRatio: r.number("min_lr_ratio", 0, (n) => n >= 0 && n <= 1),
    batchSize: r.batchSize(),
    tokensPerStep: r.number("tokens_per_step", 8192, positive),
    maxSequenceLength: r.number("max_seq_length", 2048, positive),
    overflow: r.oneOf("overflow", ["truncate", "reject"] as const, "truncate"),
    weightDecay: r.number("weight_decay", 0, nonNegative),
    maxGradNorm: r.number("max_grad_norm", 1, nonNegative),
    lora,
    seed: r.number("seed", 0),
  };
}

/** SFT settings from the job's `config` and `experimental_config` (the latter wins). */
export function parseSftConfig(config: Raw = {}, experimental: Raw = {}): ParsedConfig<SftConfig> {
  const r = new Reader({ ...config, ...experimental });
  const common = readCommon(r, 1e-4);
  const parsed: SftConfig = {
    ...common,
    epochs: r.number("num_epochs", 1, (n) => Number.isInteger(n) && n > 0),
    assistantTurns: r.oneOf("assistant_turns", ["all", "last"] as const, "all"),
  };
  return { config: parsed, ignoredKeys: r.unused() };
}

/** RL settings from the job's `experimental_config`, with the reference trainer's defaults. */
export function parseRlConfig(experimental: Raw = {}): ParsedConfig<RlConfig> {
  const r = new Reader(experimental);
  const common = readCommon(r, 5e-6);
  const ppo = r.bool("ppo", false);
  const lossFn = r.oneOf("loss_fn", ["cispo", "ppo"] as const, ppo ? "ppo" : "cispo");
  const epsilon = r.number("epsilon", lossFn === "ppo" ? 0.2 : 1.0, nonNegative);
  const parsed: RlConfig = {
    ...common,
    lossFn,
    epsilon,
    epsilonHigh: r.number("epsilon_high", lossFn === "ppo" ? epsilon : 4.0, nonNegative),
    importanceSamplingLevel: r.oneOf(
      "importance_sampling_level",
      ["token", "sequence", "average", "geometric_average"] as const,
      "token",
    ),
    scaleRewards: r.bool("scale_rewards", true),
    normalizeAdvantages: r.bool("normalize_advantages", false),
    advantageBalance: r.number("advantage_balance", 0, (n) => n >= -1 && n <= 1),
    klPenaltyCoef: r.number("kl_penalty_coef", 0, nonNegative),
    allowTrainingWithoutLogprobs: r.bool("allow_training_without_logprobs", false),
    maxNegativeAdvantageImportanceWeight: r.number("max_negative_advantage_importance_sampling_weight", 0, nonNegative),
  };
  return { config: parsed, ignoredKeys: r.unused() };
}

