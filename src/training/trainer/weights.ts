import { readGgufHeader, readTensorAsFloat32 } from "../../gguf/reader.js";
import { GgmlType, ggmlTypeName, type GgufFile, type GgufTensorInfo } from "../../gguf/types.js";
import { tf } from "./backend.js";
import { FrozenLinear } from "./frozen-linear.js";
import { modelConfigFromMetadata, type ModelConfig } from "./model-config.js";

/** Projections LoRA can adapt, named by their GGUF tensor stem. */
export const PROJECTIONS = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"] as const;
export type Projection = (typeof PROJECTIONS)[number];

export interface LayerWeights {
  attnNorm: tf.Tensor1D;
  /** Projection matrices, weight in PyTorch layout [out, in] (ggml dims reversed). */
  proj: Record<Projection, FrozenLinear>;
  bias: Partial<Record<"attn_q" | "attn_k" | "attn_v", tf.Tensor1D>>;
  qNorm?: tf.Tensor1D;
  kNorm?: tf.Tensor1D;
  ffnNorm: tf.Tensor1D;
}

export interface BaseModel {
  config: ModelConfig;
  /** [vocab, embd] */
  tokenEmbedding: tf.Tensor2D;
  layers: LayerWeights[];
  outputNorm: tf.Tensor1D;
  /** [vocab, embd]; wraps the token embedding itself when the model ties them. */
  output: FrozenLinear;
  /** Per-dimension-pair rotary frequency divisors (llama 3 style rope_freqs.weight), when present. */
  ropeFreqFactors?: Float32Array;
}

const READABLE_TYPES: ReadonlySet<GgmlType> = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]);

/** Loads a GGUF base model into frozen float32 tensors; refuses unsupported architectures and tensor types. */
export async function loadBaseModel(path: string): Promise<BaseModel> {
  const file = await readGgufHeader(path);
  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  const embd = byName.get("token_embd.weight");
  if (!embd) throw new Error(`${path} has no token_embd.weight`);
  const config = modelConfigFromMetadata(file.metadata, embd.dims[1]);
  checkTensorTypes(file);

  const read = async (name: string, expected: number[]): Promise<tf.Tensor> => {
    const info = byName.get(name);
    if (!info) throw new Error(`${path} has no tensor ${name}`);
    return tensorFromGguf(info, await readTensorAsFloat32(path, info), expected);
  };
  const readOptional = async (name: string, expected: number[]): Promise<tf.Tensor | undefined> =>
    byName.has(name) ? read(name, expected) : undefined;

  const { nEmbd, nHead, nHeadKv, headDim, nFf, nVocab } = config;
  const qDim = nHead * headDim;
  const kvDim = nHeadKv * headDim;
  const shapes: Record<Projection, number[]> = {
    attn_q: [qDim, nEmbd],
    attn_k: [kvDim, nEmbd],
    attn_v: [kvDim, nEmbd],
    attn_output: [nEmbd, qDim],
    ffn_gate: [nFf, nEmbd],
    ffn_up: [nFf, nEmbd],
    ffn_down: [nEmbd, nFf],
  };
  const layers: LayerWeights[] = [];
  for (let i = 0; i < config.nLayer; i++) {
    const p = `blk.${i}.`;
    const proj = {} as Record<Projection, FrozenLinear>;
    for (const name of Object.keys(shapes) as Projection[]) {
      proj[name] = new FrozenLinear((await read(`${p}${name}.weight`, shapes[name])) as tf.Tensor2D);
    }
    const bias: LayerWeights["bias"] = {};
    for (const [name, size] of [["attn_q", qDim], ["attn_k", kvDim], ["attn_v", kvDim]] as const) {
      const b = await readOptional(`${p}${name}.bias`, [size]);
      if (b) bias[name] = b as tf.Tensor1D;
    }
    if (byName.has(`${p}attn_output.bias`) || byName.has(`${p}ffn_down.bias`)) {
      throw new Error(`${path}: output/MLP biases are not supported by the trainer`);
    }
    layers.push({
      attnNorm: (await read(`${p}attn_norm.weight`, [nEmbd])) as tf.Tensor1D,
      proj,
      bias,
      qNorm: (await readOptional(`${p}attn_q_norm.weight`, [headDim])) as tf.Tensor1D | undefined,
      kNorm: (await readOptional(`${p}attn_k_norm.weight`, [headDim])) as tf.Tensor1D | undefined,
      ffnNorm: (await read(`${p}ffn_norm.weight`, [nEmbd])) as tf.Tensor1D,
    });
  }
  const tokenEmbedding = (await read("token_embd.weight", [nVocab, nEmbd])) as tf.Tensor2D;
  const output = new FrozenLinear(((await readOptional("output.weight", [nVocab, nEmbd])) ?? tokenEmbedding) as tf.Tensor2D);
  const freqs = byName.get("rope_freqs.weight");
  return {
    config,
    tokenEmbedding,
    layers,
    outputNorm: (await read("output_norm.weight", [nEmbd])) as tf.Tensor1D,
    output,
    ropeFreqFactors: freqs ? await readTensorAsFloat32(path, freqs) : undefined,
  };
}

function checkTensorTypes(file: GgufFile): void {
  const bad = file.tensors.filter((t) => !READABLE_TYPES.has(t.type));
  if (bad.length > 0) {
    const types = [...new Set(bad.map((t) => ggmlTypeName(t.type)))].join(", ");
    throw new Error(
      `tensor type ${types} is not supported by the trainer (e.g. ${bad[0].name}); supported: F32, F16, BF16, Q8_0`,
    );
  }
}

/** ggml lists dims contiguous-first, so the row-major tfjs shape is the reverse. */
export function tensorFromGguf(info: Pick<GgufTensorInfo, "name" | "dims">, data: Float32Array, expected: number[]): tf.Tensor {
  const shape = [...info.dims].reverse();
  if (shape.length !== expected.length || shape.some((d, i) => d !== expected[i])) {
    throw new Error(`tensor ${info.name} has shape [${shape}] but the model needs [${expected}]`);
  }
  return tf.tensor(data, shape, "float32");
}

export function disposeBaseModel(model: BaseModel): void {
  const tied = model.output.weight === model.tokenEmbedding;
  model.output.dispose();
  if (!tied) model.tokenEmbedding.dispose();
  model.outputNorm.dispose();
  for (const l of model.layers) {
    for (const p of Object.values(l.proj)) p.dispose();
    for (const t of [l.attnNorm, l.ffnNorm, l.qNorm, l.kNorm, ...Object.values(l.bias)]) t?.dispose();
  }
}
