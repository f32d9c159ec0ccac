import type { GgufValue } from "../../gguf/types.js";

export const SUPPORTED_ARCHITECTURES = ["llama", "qwen2", "qwen3"] as const;
export type Architecture = (typeof SUPPORTED_ARCHITECTURES)[number];

/** How rotary embeddings pair dimensions: "norm" rotates (2i, 2i+1), "neox" rotates (i, i + n/2). */
export type RopeMode = "norm" | "neox";

export interface ModelConfig {
  arch: Architecture;
  nLayer: number;
  nEmbd: number;
  nHead: number;
  nHeadKv: number;
  headDim: number;
  nFf: number;
  nVocab: number;
  contextLength: number;
  rmsEps: number;
  ropeDims: number;
  ropeBase: number;
  ropeMode: RopeMode;
}

// llama.cpp's llama_model_rope_type: LLaMA uses the original interleaved pairs (its converter permutes q/k
// so that GGUF weights expect them); the Qwen families keep the HF "rotate half" layout (NEOX).
const ROPE_MODE: Record<Architecture, RopeMode> = { llama: "norm", qwen2: "neox", qwen3: "neox" };

export function isSupportedArchitecture(arch: string): arch is Architecture {
  return (SUPPORTED_ARCHITECTURES as readonly string[]).includes(arch);
}

function num(metadata: Record<string, GgufValue>, key: string, fallback?: number): number {
  const v = metadata[key];
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  // Some converters store per-layer values as arrays; the trainer needs them uniform.
  if (Array.isArray(v) && v.length > 0 && v.every((x) => x === v[0])) return num({ k: v[0] }, "k");
  if (fallback !== undefined) return fallback;
  throw new Error(`GGUF metadata key ${key} is missing or not a number`);
}

/** Reads the hyper-parameters llama.cpp itself reads for these architectures. */
export function modelConfigFromMetadata(metadata: Record<string, GgufValue>, nVocab: number): ModelConfig {
  const arch = metadata["general.architecture"];
  if (typeof arch !== "string") throw new Error("GGUF file has no general.architecture");
  if (!isSupportedArchitecture(arch)) {
    throw new Error(`architecture "${arch}" is not supported by the trainer (supported: ${SUPPORTED_ARCHITECTURES.join(", ")})`);
  }
  const nEmbd = num(metadata, `${arch}.embedding_length`);
  const nHead = num(metadata, `${arch}.attention.head_count`);
  const nHeadKv = num(metadata, `${arch}.attention.head_count_kv`, nHead);
  const headDim = num(metadata, `${arch}.attention.key_length`, nEmbd / nHead);
  const valueDim = num(metadata, `${arch}.attention.value_length`, headDim);
  if (valueDim !== headDim) throw new Error(`key length ${headDim} differs from value length ${valueDim}; not supported`);
  if (nHead % nHeadKv !== 0) throw new Error(`head count ${nHead} is not a multiple of the KV head count ${nHeadKv}`);
  const scaling = metadata[`${arch}.rope.scaling.type`];
  if (typeof scaling === "string" && scaling !== "none") {
    throw new Error(`rope scaling "${scaling}" is not supported by the trainer`);
  }
  return {
    arch,
    nLayer: num(metadata, `${arch}.block_count`),
    nEmbd,
    nHead,
    nHeadKv,
    headDim,
    nFf: num(metadata, `${arch}.feed_forward_length`),
    nVocab,
    contextLength: num(metadata, `${arch}.context_length`, 2048),
    rmsEps: num(metadata, `${arch}.attention.layer_norm_rms_epsilon`, 1e-6),
    ropeDims: num(metadata, `${arch}.rope.dimension_count`, headDim),
    ropeBase: num(metadata, `${arch}.rope.freq_base`, 10000),
    ropeMode: ROPE_MODE[arch],
  };
}
