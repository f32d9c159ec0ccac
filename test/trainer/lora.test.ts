import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initTensorBackend, tf } from "../../src/training/trainer/backend.js";
import { forwardLogits } from "../../src/training/trainer/forward.js";
import { createLoraAdapter, disposeLoraAdapter, loraVariables, validateLoraConfig } from "../../src/training/trainer/lora.js";
import { disposeBaseModel, loadBaseModel, type BaseModel, type Projection } from "../../src/training/trainer/weights.js";
import { tempDir, tinyModel } from "./helpers/models.js";

let base: BaseModel;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  await initTensorBackend();
  const t = await tempDir("gyre-lora-");
  cleanup = t.cleanup;
  base = await loadBaseModel(await tinyModel(t.dir, "llama", 2));
});
afterAll(async () => {
  disposeBaseModel(base);
  await cleanup?.();
});

const tokens = [5, 9, 200, 31, 7, 64];
const logits = (f: () => tf.Tensor) => Array.from(tf.tidy(() => f().dataSync()));

describe("LoRA adapters", () => {
  it("start as the identity, train only the chosen projections, and apply dropout only when training", () => {
    const adapter = createLoraAdapter(base, { rank: 4, alpha: 8, dropout: 0.5, targetModules: ["attn_v", "ffn_up"] });
    expect(logits(() => forwardLogits(base, tokens, { adapter }))).toEqual(logits(() => forwardLogits(base, tokens)));
    expect(loraVariables(adapter)).toHaveLength(base.config.nLayer * 2 * 2);
    for (const pair of Object.values(adapter.layers[0])) pair.b.assign(tf.onesLike(pair.b).mul(0.05));
    const evalA = logits(() => forwardLogits(base, tokens, { adapter }));
    const evalB = logits(() => forwardLogits(base, tokens, { adapter }));
    const train1 = logits(() => forwardLogits(base, tokens, { adapter, training: true, dropoutSeed: 1 }));
    const train1Again = logits(() => forwardLogits(base, tokens, { adapter, training: true, dropoutSeed: 1 }));
    const train2 = logits(() => forwardLogits(base, tokens, { adapter, training: true, dropoutSeed: 2 }));
    expect(evalA).toEqual(evalB);
    expect(train1).not.toEqual(evalA);
    expect(train1).toEqual(train1Again);
    expect(train2).not.toEqual(train1);
    disposeLoraAdapter(adapter);
  });

  it("rejects invalid settings", () => {
    expect(() => validateLoraConfig({ rank: 0, alpha: 1, dropout: 0, targetModules: ["attn_q"] })).toThrow(/rank/);
    expect(() => validateLoraConfig({ rank: 2, alpha: 1, dropout: 1, targetModules: ["attn_q"] })).toThrow(/dropout/);
    expect(() => validateLoraConfig({ rank: 2, alpha: 1, dropout: 0, targetModules: ["lm_head" as Projection] })).toThrow(/lm_head/);
  });
});
