import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportLoraAdapter, loadLoraAdapter } from "../../src/training/trainer/adapter-gguf.js";
import { initTensorBackend, tf } from "../../src/training/trainer/backend.js";
import { forwardLogits } from "../../src/training/trainer/forward.js";
import { createLoraAdapter, disposeLoraAdapter, type LoraAdapter } from "../../src/training/trainer/lora.js";
import { disposeBaseModel, loadBaseModel, type BaseModel } from "../../src/training/trainer/weights.js";
import { llamaLogits, loadLlamaModel } from "./helpers/llama.js";
import { tempDir, tinyModel } from "./helpers/models.js";

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  await initTensorBackend();
  ({ dir, cleanup } = await tempDir("gyre-adapter-"));
});
afterAll(async () => cleanup?.());

/** A fresh adapter has B = 0; give B values so the adapter visibly changes the model. */
function perturb(adapter: LoraAdapter, seed: number): void {
  adapter.layers.forEach((pairs, li) =>
    Object.values(pairs).forEach((p, k) => p.b.assign(tf.randomNormal(p.b.shape, 0, 0.05, "float32", seed + li * 31 + k))),
  );
}

function maxAbsDiff(a: number[][], b: ArrayLike<number>[]): number {
  let m = 0;
  a.forEach((row, t) => row.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[t][j])))));
  return m;
}

describe("LoRA adapter export", () => {
  it.each([
    ["llama", { rank: 4, alpha: 8, targets: undefined }],
    ["qwen2", { rank: 8, alpha: 8, targets: ["attn_q", "attn_v", "ffn_down"] as const }],
    ["qwen3", { rank: 2, alpha: 16, targets: undefined }],
  ] as const)("llama.cpp with the exported %s adapter gives tfjs's logits", async (arch, cfg) => {
    const modelPath = await tinyModel(dir, arch, 3);
    const base: BaseModel = await loadBaseModel(modelPath);
    const adapter = createLoraAdapter(base, {
      rank: cfg.rank,
      alpha: cfg.alpha,
      dropout: 0,
      targetModules: cfg.targets ? [...cfg.targets] : ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"],
    }, 5);
    perturb(adapter, 9);
    const adapterPath = path.join(dir, `${arch}.lora.gguf`);
    await exportLoraAdapter(adapterPath, adapter, base);

    const llm = await loadLlamaModel(modelPath);
    try {
      const tokens = llm.tokenize("<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\nRed, green", true).map(Number);
      const withAdapter = tf.tidy(() => forwardLogits(base, tokens, { adapter })).arraySync() as number[][];
      const without = tf.tidy(() => forwardLogits(base, tokens)).arraySync() as number[][];
      const llamaWith = await llamaLogits(llm, tokens, adapterPath);
      const effect = maxAbsDiff(withAdapter, without);
      const gap = maxAbsDiff(withAdapter, llamaWith);
      console.log(`${arch}: adapter moves logits by up to ${effect.toFixed(3)}; tfjs vs llama.cpp with adapter ${gap.toExponential(2)}`);
      // The adapter must matter, and llama.cpp must apply it exactly as tfjs does (same float32 bound as the base parity).
      expect(effect).toBeGreaterThan(0.1);
      expect(gap).toBeLessThan(1e-4);
    } finally {
      await llm.dispose();
    }

    const reloaded = await loadLoraAdapter(adapterPath, base);
    expect(reloaded.config).toEqual(adapter.config);
    adapter.layers.forEach((pairs, li) => {
      for (const [name, p] of Object.entries(pairs)) {
        const q = reloaded.layers[li][name as keyof typeof pairs]!;
        expect(Array.from(q.a.dataSync())).toEqual(Array.from(p.a.dataSync()));
        expect(Array.from(q.b.dataSync())).toEqual(Array.from(p.b.dataSync()));
      }
    });
    disposeLoraAdapter(reloaded);
    disposeLoraAdapter(adapter);
    disposeBaseModel(base);
  });

  it("refuses an adapter made for another architecture", async () => {
    const llamaBase = await loadBaseModel(await tinyModel(dir, "llama", 3));
    const adapter = createLoraAdapter(llamaBase, { rank: 2, alpha: 2, dropout: 0, targetModules: ["attn_q"] });
    const p = path.join(dir, "llama-only.lora.gguf");
    await exportLoraAdapter(p, adapter, llamaBase);
    const qwenBase = await loadBaseModel(await tinyModel(dir, "qwen3", 3));
    await expect(loadLoraAdapter(p, qwenBase)).rejects.toThrow(/llama/);
    disposeLoraAdapter(adapter);
    disposeBaseModel(llamaBase);
    disposeBaseModel(qwenBase);
  });
});
