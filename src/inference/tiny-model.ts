import { mkdir, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";
import { GgmlType } from "../gguf/types.js";
import { writeGguf, type GgufKv, type GgufTensorToWrite, type GgufWritableType } from "../gguf/writer.js";
import { trainByteLevelBpe } from "./byte-level-bpe.js";
import { CHATML_TOOLS_TEMPLATE } from "./chat-template.js";
import { SeededRandom, hashString } from "./random.js";
import { TOKENIZER_CORPUS } from "./tokenizer-corpus.js";

export type TinyArch = "llama" | "qwen2" | "qwen3";
export type TinyPreset = "tiny" | "25m" | "100m";

export interface TinyModelOptions {
  outPath: string;
  arch?: TinyArch;
  preset?: TinyPreset;
  seed?: number;
  /** Overrides the preset's weight type (norms stay F32). */
  weightType?: GgufWritableType;
  onProgress?: (done: number, total: number) => void;
}

export interface TinyModelShape {
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nHeadKv: number;
  nFf: number;
  contextLength: number;
  merges: number;
  weightType: GgufWritableType;
}

export const TINY_PRESETS: Readonly<Record<TinyPreset, TinyModelShape>> = {
  tiny: { nEmbd: 128, nLayer: 4, nHead: 4, nHeadKv: 2, nFf: 384, contextLength: 2048, merges: 1200, weightType: GgmlType.F32 },
  "25m": { nEmbd: 512, nLayer: 8, nHead: 8, nHeadKv: 4, nFf: 1408, contextLength: 2048, merges: 1200, weightType: GgmlType.F32 },
  "100m": { nEmbd: 768, nLayer: 16, nHead: 12, nHeadKv: 4, nFf: 2048, contextLength: 2048, merges: 1200, weightType: GgmlType.F16 },
};

export const SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;

// llama.cpp's llama_ftype of a file whose weights are all of one type.
const FILE_TYPES: Record<GgufWritableType, number> = { [GgmlType.F32]: 0, [GgmlType.F16]: 1, [GgmlType.Q8_0]: 7, [GgmlType.BF16]: 32 };

// llama.cpp token types (llama_token_type): 1 normal, 3 control.
const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_CONTROL = 3;

interface TensorPlan {
  name: string;
  dims: number[];
  type: GgufWritableType;
  /** Standard deviation of the normal initialisation, or the constant for norms. */
  init: { normal: number } | { constant: number };
}

function tensorPlan(arch: TinyArch, shape: TinyModelShape, vocabSize: number): TensorPlan[] {
  const { nEmbd, nLayer, nHead, nHeadKv, nFf, weightType } = shape;
  const headDim = nEmbd / nHead;
  const kvDim = headDim * nHeadKv;
  const inStd = (fanIn: number): number => 1 / Math.sqrt(fanIn);
  // Residual branch outputs are scaled down with depth so the residual stream keeps unit scale.
  const outStd = (fanIn: number): number => 1 / Math.sqrt(fanIn) / Math.sqrt(2 * nLayer);
  const plan: TensorPlan[] = [{ name: "token_embd.weight", dims: [nEmbd, vocabSize], type: weightType, init: { normal: 1 } }];
  for (let i = 0; i < nLayer; i++) {
    const p = `blk.${i}.`;
    plan.push({ name: `${p}attn_norm.weight`, dims: [nEmbd], type: GgmlType.F32, init: { constant: 1 } });
    plan.push({ name: `${p}attn_q.weight`, dims: [nEmbd, nEmbd], type: weightType, init: { normal: inStd(nEmbd) } });
    plan.push({ name: `${p}attn_k.weight`, dims: [nEmbd, kvDim], type: weightType, init: { normal: inStd(nEmbd) } });
    plan.push({ name: `${p}attn_v.weight`, dims: [nEmbd, kvDim], type: weightType, init: { normal: inStd(nEmbd) } });
    if (arch === "qwen2") {
      plan.push({ name: `${p}attn_q.bias`, dims: [nEmbd], type: GgmlType.F32, init: { normal: 0.02 } });
      plan.push({ name: `${p}attn_k.bias`, dims: [kvDim], type: GgmlType.F32, init: { normal: 0.02 } });
      plan.push({ name: `${p}attn_v.bias`, dims: [kvDim], type: GgmlType.F32, init: { normal: 0.02 } });
    }
    if (arch === "qwen3") {
      plan.push({ name: `${p}attn_q_norm.weight`, dims: [headDim], type: GgmlType.F32, init: { constant: 1 } });
      plan.push({ name: `${p}attn_k_norm.weight`, dims: [headDim], type: GgmlType.F32, init: { constant: 1 } });
    }
    plan.push({ name: `${p}attn_output.weight`, dims: [nEmbd, nEmbd], type: weightType, init: { normal: outStd(nEmbd) } });
    plan.push({ name: `${p}ffn_norm.weight`, dims: [nEmbd], type: GgmlType.F32, init: { constant: 1 } });
    plan.push({ name: `${p}ffn_gate.weight`, dims: [nEmbd, nFf], type: weightType, init: { normal: inStd(nEmbd) } });
    plan.push({ name: `${p}ffn_up.weight`, dims: [nEmbd, nFf], type: weightType, init: { normal: inStd(nEmbd) } });
    plan.push({ name: `${p}ffn_down.weight`, dims: [nFf, nEmbd], type: weightType, init: { normal: outStd(nFf) } });
  }
  plan.push({ name: "output_norm.weight", dims: [nEmbd], type: GgmlType.F32, init: { constant: 1 } });
  // Logits with a standard deviation of about 2 make the random model's distribution peaked enough to be interesting.
  plan.push({ name: "output.weight", dims: [nEmbd, vocabSize], type: weightType, init: { normal: 2 / Math.sqrt(nEmbd) } });
  return plan;
}

function tensorData(plan: TensorPlan, seed: number): Float32Array {
  const n = plan.dims.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  if ("constant" in plan.init) return out.fill(plan.init.constant);
  // Each tensor has its own stream, so its values do not depend on which other tensors exist.
  const rng = new SeededRandom((seed ^ hashString(plan.name)) >>> 0);
  const std = plan.init.normal;
  for (let i = 0; i < n; i++) out[i] = rng.normal() * std;
  return out;
}

function architectureKvs(arch: TinyArch, shape: TinyModelShape, vocabSize: number): GgufKv[] {
  const headDim = shape.nEmbd / shape.nHead;
  const kvs: GgufKv[] = [
    { key: `${arch}.vocab_size`, type: "uint32", value: vocabSize },
    { key: `${arch}.context_length`, type: "uint32", value: shape.contextLength },
    { key: `${arch}.embedding_length`, type: "uint32", value: shape.nEmbd },
    { key: `${arch}.block_count`, type: "uint32", value: shape.nLayer },
    { key: `${arch}.feed_forward_length`, type: "uint32", value: shape.nFf },
    { key: `${arch}.attention.head_count`, type: "uint32", value: shape.nHead },
    { key: `${arch}.attention.head_count_kv`, type: "uint32", value: shape.nHeadKv },
    { key: `${arch}.attention.layer_norm_rms_epsilon`, type: "float32", value: 1e-6 },
    { key: `${arch}.rope.freq_base`, type: "float32", value: 10000 },
    { key: `${arch}.rope.dimension_count`, type: "uint32", value: headDim },
  ];
  if (arch === "qwen3") {
    kvs.push({ key: `${arch}.attention.key_length`, type: "uint32", value: headDim });
    kvs.push({ key: `${arch}.attention.value_length`, type: "uint32", value: headDim });
  }
  return kvs;
}

/** Metadata and tensor list of the built-in chat model, without writing anything. */
export function tinyModelContents(options: Omit<TinyModelOptions, "outPath" | "onProgress">): {
  kvs: GgufKv[];
  tensors: GgufTensorToWrite[];
} {
  const arch = options.arch ?? "llama";
  const preset = options.preset ?? "tiny";
  const seed = options.seed ?? 42;
  const presetShape = TINY_PRESETS[preset];
  if (!presetShape) throw new Error(`unknown preset ${preset}`);
  const shape = { ...presetShape, weightType: options.weightType ?? presetShape.weightType };
  if (!["llama", "qwen2", "qwen3"].includes(arch)) throw new Error(`unknown architecture ${arch}`);

  const bpe = trainByteLevelBpe(TOKENIZER_CORPUS, shape.merges);
  const tokens = [...bpe.tokens, ...SPECIAL_TOKENS];
  const tokenTypes = tokens.map((_, i) => (i >= bpe.tokens.length ? TOKEN_TYPE_CONTROL : TOKEN_TYPE_NORMAL));
  const idOf = (t: (typeof SPECIAL_TOKENS)[number]): number => bpe.tokens.length + SPECIAL_TOKENS.indexOf(t);
  const vocabSize = tokens.length;

  const kvs: GgufKv[] = [
    { key: "general.architecture", type: "string", value: arch },
    { key: "general.type", type: "string", value: "model" },
    { key: "general.name", type: "string", value: `gyre-${preset}-${arch}` },
    { key: "general.description", type: "string", value: `Random-initialised ${arch} chat model (seed ${seed}) built into gyre` },
    { key: "general.file_type", type: "uint32", value: FILE_TYPES[shape.weightType] },
    ...architectureKvs(arch, shape, vocabSize),
    { key: "tokenizer.ggml.model", type: "string", value: "gpt2" },
    { key: "tokenizer.ggml.pre", type: "string", value: "qwen2" },
    { key: "tokenizer.ggml.tokens", type: "array", itemType: "string", value: tokens },
    { key: "tokenizer.ggml.token_type", type: "array", itemType: "int32", value: tokenTypes },
    { key: "tokenizer.ggml.merges", type: "array", itemType: "string", value: bpe.merges },
    { key: "tokenizer.ggml.bos_token_id", type: "uint32", value: idOf("<|endoftext|>") },
    { key: "tokenizer.ggml.eos_token_id", type: "uint32", value: idOf("<|im_end|>") },
    { key: "tokenizer.ggml.padding_token_id", type: "uint32", value: idOf("<|endoftext|>") },
    { key: "tokenizer.ggml.add_bos_token", type: "bool", value: false },
    { key: "tokenizer.chat_template", type: "string", value: CHATML_TOOLS_TEMPLATE },
  ];
  const tensors = tensorPlan(arch, shape, vocabSize).map((plan) => ({
    name: plan.name,
    dims: plan.dims,
    type: plan.type,
    data: () => tensorData(plan, seed),
  }));
  return { kvs, tensors };
}

/** Writes the built-in random-initialised GGUF chat model; the same options give a byte-identical file. */
export async function buildTinyModel(options: TinyModelOptions): Promise<void> {
  const { kvs, tensors } = tinyModelContents(options);
  await mkdir(dirname(options.outPath), { recursive: true });
  const total = tensors.length;
  let done = 0;
  const tracked = tensors.map((t) => ({
    ...t,
    data: () => {
      const data = typeof t.data === "function" ? t.data() : t.data;
      options.onProgress?.(++done, total);
      return data;
    },
  }));
  // Written aside and renamed, so an interrupted build never leaves a truncated model at outPath.
  const partial = `${options.outPath}.partial-${process.pid}`;
  try {
    await writeGguf(partial, kvs, tracked);
    await rename(partial, options.outPath);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
}
