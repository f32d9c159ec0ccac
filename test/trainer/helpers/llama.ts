import { getLlama, LlamaLogLevel, type Llama, type LlamaModel, type Token } from "node-llama-cpp";

let llama: Promise<Llama> | undefined;

export function cpuLlama(): Promise<Llama> {
  llama ??= getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  return llama;
}

export async function loadLlamaModel(path: string): Promise<LlamaModel> {
  return (await cpuLlama()).loadModel({ modelPath: path });
}

/** llama.cpp's raw logits [T][vocab] for every position of `tokens`, optionally with a LoRA adapter. */
export async function llamaLogits(model: LlamaModel, tokens: number[], adapterPath?: string): Promise<Float32Array[]> {
  const context = await model.createContext({
    contextSize: Math.max(64, tokens.length + 8),
    batchSize: Math.max(64, tokens.length),
    sequences: 1,
    // Full-precision KV cache and plain attention, so the only differences left are float32 summation order.
    threads: 1,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
    flashAttention: false,
    lora: adapterPath ? { adapters: [{ filePath: adapterPath }] } : undefined,
  });
  try {
    const sequence = context.getSequence();
    const out = await sequence.controlledEvaluate(tokens.map((t) => [t as Token, { generateNext: { logits: true } }]));
    return out.map((item, i) => {
      const logits = item?.next?.logits;
      if (!logits) throw new Error(`llama.cpp returned no logits for position ${i}`);
      const dense = new Float32Array(logits.size);
      for (const [tok, v] of logits) dense[tok as number] = v;
      return dense;
    });
  } finally {
    await context.dispose();
  }
}
