import { GgmlType } from "./types.js";
import { writeGguf, type GgufKv, type GgufTensorToWrite } from "./writer.js";

export interface LoraPair {
  /** Base tensor name, e.g. `blk.0.attn_q.weight`. */
  base: string;
  inFeatures: number;
  outFeatures: number;
  /** A, rank x inFeatures, row-major (PEFT's lora_A layout). */
  a: Float32Array;
  /** B, outFeatures x rank, row-major (PEFT's lora_B layout). */
  b: Float32Array;
}

export interface LoraAdapterFile {
  architecture: string;
  rank: number;
  /** llama.cpp scales the update B·A by alpha / rank. */
  alpha: number;
  pairs: LoraPair[];
  name?: string;
}

/**
 * Writes a LoRA adapter as llama.cpp loads it (llama-adapter.cpp, convert_lora_to_gguf.py): general.type "adapter",
 * adapter.type "lora", adapter.lora.alpha, and per base tensor `<base>.lora_a` with ne [in, rank] and `<base>.lora_b`
 * with ne [rank, out].
 */
export async function writeLoraAdapter(path: string, adapter: LoraAdapterFile): Promise<void> {
  const kvs: GgufKv[] = [
    { key: "general.architecture", type: "string", value: adapter.architecture },
    { key: "general.type", type: "string", value: "adapter" },
    { key: "general.name", type: "string", value: adapter.name ?? "lora" },
    { key: "adapter.type", type: "string", value: "lora" },
    { key: "adapter.lora.alpha", type: "float32", value: adapter.alpha },
  ];
  const tensors: GgufTensorToWrite[] = [];
  for (const p of adapter.pairs) {
    if (p.a.length !== adapter.rank * p.inFeatures || p.b.length !== p.outFeatures * adapter.rank) {
      throw new Error(`LoRA pair for ${p.base}: A must hold rank*in and B out*rank values`);
    }
    tensors.push({ name: `${p.base}.lora_a`, dims: [p.inFeatures, adapter.rank], type: GgmlType.F32, data: p.a });
    tensors.push({ name: `${p.base}.lora_b`, dims: [adapter.rank, p.outFeatures], type: GgmlType.F32, data: p.b });
  }
  await writeGguf(path, kvs, tensors);
}
