import path from "node:path";
import type { LlamaModel, Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderChat } from "../../src/inference/chat-render.js";
import { CHATML_TOOLS_TEMPLATE } from "../../src/inference/chat-template.js";
import type { ChatMessage, Choice } from "../../src/training/trainer/chat-types.js";
import { trainRl, type TrajectoryGroup } from "../../src/training/trainer/train-rl.js";
import type { StepMetrics } from "../../src/training/trainer/train-step.js";
import { decode, seededRandom } from "./helpers/generate.js";
import { loadLlamaModel } from "./helpers/llama.js";
import { tempDir, tinyModel } from "./helpers/models.js";

let dir: string;
let cleanup: () => Promise<void>;
beforeAll(async () => ({ dir, cleanup } = await tempDir("gyre-rl-")));
afterAll(async () => cleanup?.());

const PROMPTS: ChatMessage[][] = [
  [{ role: "user", content: "Write anything." }],
  [{ role: "user", content: "Say a word." }],
];
const MAX_TOKENS = 10;

/** Toy reward a random policy sometimes earns: the share of the letter "e" in the answer. */
function reward(text: string): number {
  return text.length === 0 ? 0 : [...text].filter((c) => c === "e").length / text.length;
}

async function rollout(llm: LlamaModel, adapter: string | undefined, messages: ChatMessage[], seed: number): Promise<{ choice: Choice; reward: number }> {
  const prompt = llm.tokenize(renderChat(CHATML_TOOLS_TEMPLATE, { messages, addGenerationPrompt: true }), true).map(Number);
  const s = await decode(llm, adapter, prompt, MAX_TOKENS, seededRandom(seed));
  const stopped = llm.isEogToken(s.tokens[s.tokens.length - 1] as Token);
  const content = stopped ? s.tokens.slice(0, -1) : s.tokens;
  const choice: Choice = {
    index: 0,
    finish_reason: stopped ? "stop" : "length",
    message: { role: "assistant", content: s.text },
    logprobs: { content: content.map((t, k) => ({ token: `token_id:${t}`, logprob: s.logprobs[k], bytes: null })) },
  };
  return { choice, reward: reward(s.text) };
}

async function meanReward(llm: LlamaModel, adapter: string | undefined, samples: number): Promise<number> {
  let sum = 0;
  for (let i = 0; i < samples; i++) sum += (await rollout(llm, adapter, PROMPTS[i % PROMPTS.length], 10_000 + i)).reward;
  return sum / samples;
}

describe("RL on the tiny model", () => {
  it("raises the mean reward of llama.cpp samples over a few steps", async () => {
    const modelPath = await tinyModel(dir, "qwen3", 5);
    const llm = await loadLlamaModel(modelPath);
    try {
      const before = await meanReward(llm, undefined, 32);
      let adapter: string | undefined;
      const metrics: StepMetrics[] = [];
      for (let step = 0; step < 8; step++) {
        const groups: TrajectoryGroup[] = [];
        for (const [p, messages] of PROMPTS.entries()) {
          const trajectories = [];
          for (let g = 0; g < 8; g++) {
            const r = await rollout(llm, adapter, messages, step * 1000 + p * 100 + g);
            trajectories.push({ messages_and_choices: [...messages, r.choice], reward: r.reward });
          }
          groups.push({ trajectories });
        }
        console.log(`step ${step}: rewards ${groups.map((g) => g.trajectories.map((t) => t.reward.toFixed(2)).join(" ")).join(" | ")}`);
        const next = path.join(dir, `rl-step${step + 1}.lora.gguf`);
        await trainRl(
          { baseModelPath: modelPath, adapterPath: adapter, outputPath: next, groups, experimentalConfig: { learning_rate: 1e-2, lora_rank: 8 } },
          (m) => void metrics.push(m),
        );
        adapter = next;
      }
      const after = await meanReward(llm, adapter, 32);
      console.log(
        `mean reward ${before.toFixed(3)} -> ${after.toFixed(3)}; per step sampled reward: ${metrics.map((m) => m.reward_mean.toFixed(3)).join(", ")}`,
      );
      for (const m of metrics) {
        expect(m.num_trainable_tokens).toBeGreaterThan(0);
        expect(Number.isFinite(m.loss)).toBe(true);
      }
      expect(after).toBeGreaterThan(before + 0.1);
    } finally {
      await llm.dispose();
    }
  }, 900_000);
});
