import { readGgufHeader, readTensorAsFloat32 } from "../../gguf/reader.js";
import { GgmlType } from "../../gguf/types.js";
import { writeGguf, type GgufKv, type GgufTensorToWrite } from "../../gguf/writer.js";
import { tf } from "./backend.js";
import type { LoraAdapter, LoraConfig, LoraPair } from "./lora.js";
import { validateLoraConfig } from "./lora.js";
import { PROJECTIONS, type BaseModel, type Projection } from "./weights.js";

// Not read by llama.cpp; lets a later run resume with the same dropout.
const DROPOUT_KEY = "training.lora.dropout";

/**
 * Writes the adapter in the layout llama.cpp's llama_adapter_lora_init expects: general.type "adapter",
 * adapter.type "lora", adapter.lora.alpha (f32), and per projection `<tensor>.lora_a` with ggml dims [in, rank]
 * and `<tensor>.lora_b` with dims [rank, out]; llama.cpp applies scale·alpha/rank·B(Ax).
 */
export async function exportLoraAdapter(
  path: string,
  adapter: LoraAdapter,
  model: BaseModel,
  extraKvs: GgufKv[] = [],
): Promise<void> {
  const kvs: GgufKv[] = [
    { key: "general.architecture", type: "string", value: model.config.arch },
    { key: "general.type", type: "string", value: "adapter" },
    { key: "adapter.type", type: "string", value: "lora" },
    { key: "adapter.lora.alpha", type: "float32", value: adapter.config.alpha },
    { key: DROPOUT_KEY, type: "float32", value: adapter.config.dropout },
    ...extraKvs,
  ];
  const tensors: GgufTensorToWrite[] = [];
  adapter.layers.forEach((pairs, li) => {
    for (const name of PROJECTIONS) {
      const pair = pairs[name];
      if (!pair) continue;
      const [inDim, rank] = pair.a.shape;
      const [, outDim] = pair.b.shape;
      const base = `blk.${li}.${name}.weight`;
      // Row-major A [rank, in] is exactly ggml's ne = [in, rank]; likewise B [out, rank] is ne = [rank, out].
      tensors.push({ name: `${base}.lora_a`, dims: [inDim, rank], type: GgmlType.F32, data: transposedData(pair.a) });
      tensors.push({ name: `${base}.lora_b`, dims: [rank, outDim], type: GgmlType.F32, data: transposedData(pair.b) });
    }
  });
  await writeGguf(path, kvs, tensors);
}

function transposedData(t: tf.Tensor2D): Float32Array {
  return tf.tidy(() => t.transpose().dataSync() as Float32Array);
}

const TENSOR_NAME = /^blk\.(\d+)\.([a-z_]+)\.weight\.lora_(a|b)$/;

/** Reads an adapter written by exportLoraAdapter (or any llama.cpp LoRA GGUF on these projections) as trainable variables. */
export async function loadLoraAdapter(path: string, model: BaseModel): Promise<LoraAdapter> {
  const file = await readGgufHeader(path);
  const meta = file.metadata;
  if (meta["general.type"] !== "adapter" || meta["adapter.type"] !== "lora") throw new Error(`${path} is not a LoRA adapter`);
  if (meta["general.architecture"] !== model.config.arch) {
    throw new Error(`adapter ${path} is for architecture ${String(meta["general.architecture"])}, the model is ${model.config.arch}`);
  }
  const data = new Map<string, { a?: tf.Tensor2D; b?: tf.Tensor2D }>();
  const modules = new Set<Projection>();
  let rank = 0;
  for (const info of file.tensors) {
    const m = TENSOR_NAME.exec(info.name);
    if (!m || !(PROJECTIONS as readonly string[]).includes(m[2])) throw new Error(`adapter tensor ${info.name} is not supported by the trainer`);
    const layer = Number(m[1]);
    if (layer >= model.config.nLayer) throw new Error(`adapter tensor ${info.name} names a layer the model does not have`);
    const name = m[2] as Projection;
    modules.add(name);
    const shape = [...info.dims].reverse() as [number, number];
    const t = tf.tensor2d(await readTensorAsFloat32(path, info), shape);
    const key = `${layer}.${name}`;
    const entry = data.get(key) ?? {};
    entry[m[3] as "a" | "b"] = t;
    data.set(key, entry);
    if (m[3] === "a") {
      if (rank && rank !== shape[0]) throw new Error(`adapter ${path} mixes ranks ${rank} and ${shape[0]}`);
      rank = shape[0];
    }
  }
  const alpha = typeof meta["adapter.lora.alpha"] === "number" && meta["adapter.lora.alpha"] > 0 ? meta["adapter.lora.alpha"] : rank;
  const dropout = typeof meta[DROPOUT_KEY] === "number" ? meta[DROPOUT_KEY] : 0;
  const config: LoraConfig = { rank, alpha, dropout, targetModules: PROJECTIONS.filter((p) => modules.has(p)) };
  validateLoraConfig(config);
  const layers: Partial<Record<Projection, LoraPair>>[] = model.layers.map(() => ({}));
  for (const [key, { a, b }] of data) {
    const [li, name] = key.split(".") as [string, Projection];
    if (!a || !b) throw new Error(`adapter ${path}: ${name} of layer ${li} lacks its lora_a or lora_b`);
    const [out, inDim] = model.layers[Number(li)].proj[name].shape;
    if (a.shape[1] !== inDim || b.shape[0] !== out || b.shape[1] !== a.shape[0]) {
      throw new Error(`adapter ${path}: ${name} of layer ${li} does not fit the model's [${out}, ${inDim}] weight`);
    }
    layers[Number(li)][name] = { a: tf.variable(tf.tidy(() => a.transpose())), b: tf.variable(tf.tidy(() => b.transpose())) };
    a.dispose();
    b.dispose();
  }
  // Projections a sparse adapter leaves out get fresh (identity) pairs so every layer trains the same modules.
  model.layers.forEach((layer, li) => {
    for (const name of config.targetModules) {
      if (layers[li][name]) continue;
      const [out, inDim] = layer.proj[name].shape;
      const bound = 1 / Math.sqrt(inDim);
      layers[li][name] = {
        a: tf.variable(tf.randomUniform([inDim, rank], -bound, bound, "float32", li)),
        b: tf.variable(tf.zeros([rank, out])),
      };
    }
  });
  return { config, layers };
}
