import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { GgmlType } from "../../src/gguf/types.js";
import { writeGguf } from "../../src/gguf/writer.js";
import { tinyModelContents } from "../../src/inference/tiny-model.js";
import { initTensorBackend, tf } from "../../src/training/trainer/backend.js";
import { forwardLogits } from "../../src/training/trainer/forward.js";
import { disposeBaseModel, loadBaseModel } from "../../src/training/trainer/weights.js";
import { llamaLogits, loadLlamaModel } from "./helpers/llama.js";
import { tempDir, tinyModel, tinyModelVariant, writeModelWithRelabelledTensor } from "./helpers/models.js";

const TEXT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\nParis, of course.";

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  await initTensorBackend();
  ({ dir, cleanup } = await tempDir("gyre-parity-"));
});
afterAll(async () => cleanup?.());

async function compare(path: string): Promise<{ maxAbs: number; scale: number; argmaxAgree: number }> {
  const llm = await loadLlamaModel(path);
  try {
    const tokens = llm.tokenize(TEXT, true).map(Number);
    const expected = await llamaLogits(llm, tokens);
    const base = await loadBaseModel(path);
    try {
      const actual = tf.tidy(() => forwardLogits(base, tokens)).arraySync() as number[][];
      let maxAbs = 0;
      let scale = 0;
      let agree = 0;
      expected.forEach((row, t) => {
        let bestE = 0;
        let bestA = 0;
        row.forEach((v, j) => {
          maxAbs = Math.max(maxAbs, Math.abs(v - actual[t][j]));
          scale = Math.max(scale, Math.abs(v));
          if (v > row[bestE]) bestE = j;
          if (actual[t][j] > actual[t][bestA]) bestA = j;
        });
        if (bestE === bestA) agree++;
      });
      console.log(`${path.split("/").pop()}: positions ${tokens.length}, max abs diff ${maxAbs.toExponential(2)}, max abs logit ${scale.toFixed(2)}`);
      return { maxAbs, scale, argmaxAgree: agree / expected.length };
    } finally {
      disposeBaseModel(base);
    }
  } finally {
    await llm.dispose();
  }
}

// Both sides compute in float32 (llama.cpp with an F32 KV cache and no flash attention), so only summation order
// differs: measured ~3e-7 of the largest logit. The bound, 1e-5 relative, leaves a 30x margin and still catches any
// real mistake (swapping the rope pairing alone moves logits by ~2 on a scale of ~9).
const F32_TOLERANCE = 1e-5;

describe("tfjs forward pass agrees with llama.cpp", () => {
  it.each(["llama", "qwen2", "qwen3"] as const)("tiny %s model (F32)", async (arch) => {
    const r = await compare(await tinyModel(dir, arch, 7));
    expect(r.scale).toBeGreaterThan(1);
    expect(r.maxAbs / r.scale).toBeLessThan(F32_TOLERANCE);
    expect(r.argmaxAgree).toBe(1);
  });

  it("tied output matrix", async () => {
    const r = await compare(await tinyModelVariant(dir, "qwen3", 11, GgmlType.F32, true));
    expect(r.maxAbs / r.scale).toBeLessThan(F32_TOLERANCE);
  });

  // llama.cpp rounds activations to the weight's type before multiplying (F16 for F16 weights, BF16 for BF16,
  // 8-bit blocks for Q8_0) while tfjs multiplies the dequantised weights in float32. Measured gaps relative to the
  // largest logit: F16 2e-4, BF16 3e-3, Q8_0 8e-3; the bounds allow ~10x / ~4x of that.
  it.each([
    ["F16", GgmlType.F16, 2e-3],
    ["BF16", GgmlType.BF16, 2e-2],
    ["Q8_0", GgmlType.Q8_0, 3e-2],
  ] as const)("matrices stored as %s", async (_name, type, tolerance) => {
    const r = await compare(await tinyModelVariant(dir, "llama", 13, type, false));
    expect(r.maxAbs / r.scale).toBeLessThan(tolerance);
  });

  it("refuses unsupported tensor types and architectures by name", async () => {
    const { kvs, tensors } = tinyModelContents({ arch: "llama", preset: "tiny", seed: 1 });
    const q4 = path.join(dir, "bad-type.gguf");
    await writeModelWithRelabelledTensor(q4, kvs, tensors, "blk.0.attn_q.weight", GgmlType.Q4_0);
    await expect(loadBaseModel(q4)).rejects.toThrow(/Q4_0/);
    const gemma = path.join(dir, "bad-arch.gguf");
    await writeGguf(
      gemma,
      kvs.map((kv) => (kv.key === "general.architecture" ? { ...kv, value: "gemma" } : kv)),
      tensors,
    );
    await expect(loadBaseModel(gemma)).rejects.toThrow(/gemma/);
  });
});
