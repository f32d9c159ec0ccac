import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderChat } from "../../src/inference/chat-render.js";
import { CHATML_TOOLS_TEMPLATE } from "../../src/inference/chat-template.js";
import { trainSft, type SftExample } from "../../src/training/trainer/train-sft.js";
import type { StepMetrics } from "../../src/training/trainer/train-step.js";
import { decode } from "./helpers/generate.js";
import { loadLlamaModel } from "./helpers/llama.js";
import { tempDir, tinyModel } from "./helpers/models.js";

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir("gyre-sft-")));
afterAll(async () => cleanup?.());

const FACTS: [string, string][] = [
  ["What colour is the door of the lighthouse?", "The door is green."],
  ["Who keeps the lighthouse?", "Old Marta keeps it."],
  ["How many steps lead to the lamp?", "There are 96 steps."],
];
const examples: SftExample[] = FACTS.map(([q, a]) => ({
  messages: [
    { role: "system", content: "Answer briefly." },
    { role: "user", content: q },
    { role: "assistant", content: a },
  ],
}));

describe("SFT on the tiny model", () => {
  it("drives the loss down and llama.cpp then answers with a trained fact", async () => {
    const t0 = Date.now();
    const modelPath = await tinyModel(dir, "llama", 42);
    console.log("build", Date.now() - t0);
    const adapterPath = path.join(dir, "sft.lora.gguf");
    const steps: StepMetrics[] = [];
    const result = await trainSft(
      {
        baseModelPath: modelPath,
        outputPath: adapterPath,
        examples,
        config: { batch_size: 3, learning_rate: 1e-2 },
        experimentalConfig: { num_epochs: 30, lora_rank: 8, lora_alpha: 16, some_future_key: true },
      },
      (m) => void steps.push(m),
    );
    console.log("train", Date.now() - t0);
    expect(result.steps).toBe(30);
    expect(result.ignoredConfigKeys).toEqual(["some_future_key"]);
    const first = steps[0].loss;
    const last = steps[steps.length - 1].loss;
    console.log(`SFT loss ${first.toFixed(3)} -> ${last.toFixed(4)} in ${steps.length} steps; ${steps[steps.length - 1].tokens_per_second.toFixed(0)} tokens/s`);
    expect(last).toBeLessThan(first / 20);
    for (const m of steps) {
      expect(m.num_trainable_tokens).toBeGreaterThan(0);
      expect(m.num_tokens).toBeGreaterThan(m.num_trainable_tokens);
      expect(Number.isFinite(m.grad_norm)).toBe(true);
    }

    const llm = await loadLlamaModel(modelPath);
    try {
      const [q, a] = FACTS[1];
      const prompt = renderChat(CHATML_TOOLS_TEMPLATE, {
        messages: [{ role: "system", content: "Answer briefly." }, { role: "user", content: q }],
        addGenerationPrompt: true,
      });
      const tokens = llm.tokenize(prompt, true).map(Number);
      const before = await decode(llm, undefined, tokens, 24);
      const after = await decode(llm, adapterPath, tokens, 24);
      console.log("gen", Date.now() - t0);
      console.log(`base: ${JSON.stringify(before.text)}; with adapter: ${JSON.stringify(after.text)}`);
      expect(before.text).not.toBe(a);
      expect(after.text).toBe(a);
    } finally {
      await llm.dispose();
    }
  }, 600_000);
});
