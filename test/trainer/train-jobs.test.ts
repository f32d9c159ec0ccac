import { existsSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trainRl, trainSft, type SftExample, type StepMetrics, type TrajectoryGroup } from "../../src/training/trainer/index.js";
import { tempDir, tinyModel } from "./helpers/models.js";

let dir: string;
let modelPath: string;
let cleanup: () => Promise<void>;
beforeAll(async () => {
  ({ dir, cleanup } = await tempDir("gyre-jobs-"));
  modelPath = await tinyModel(dir, "qwen2", 8);
});
afterAll(async () => cleanup?.());

const examples: SftExample[] = [
  { messages: [{ role: "user", content: "Ping?" }, { role: "assistant", content: "Pong." }] },
  { messages: [{ role: "user", content: "Marco?" }, { role: "assistant", content: "Polo." }] },
];

describe("training jobs", () => {
  it("continues from the last adapter and reports per-step metrics", async () => {
    const first: StepMetrics[] = [];
    const a1 = path.join(dir, "a1.gguf");
    let started: unknown;
    await trainSft(
      { baseModelPath: modelPath, outputPath: a1, examples, config: { learning_rate: 1e-2, batch_size: 2 }, experimentalConfig: { num_epochs: 6 }, onStart: (s) => void (started = s) },
      (m) => void first.push(m),
    );
    expect(started).toEqual({ num_sequences: 2, num_steps: 6, dropped_sequences: 0, truncated_sequences: 0 });
    for (const key of ["loss", "grad_norm", "learning_rate", "num_tokens", "num_trainable_tokens", "tokens_per_second"]) {
      expect(typeof first[0][key]).toBe("number");
    }
    const second: StepMetrics[] = [];
    await trainSft(
      { baseModelPath: modelPath, adapterPath: a1, outputPath: path.join(dir, "a2.gguf"), examples, config: { learning_rate: 1e-2, batch_size: 2 } },
      (m) => void second.push(m),
    );
    // The resumed run starts where the first ended, far below the untrained loss.
    expect(second[0].loss).toBeLessThan(first[0].loss / 2);
    expect(second[0].loss).toBeCloseTo(first[first.length - 1].loss, 0);
  }, 300_000);

  it("stops when cancelled and writes no adapter", async () => {
    const controller = new AbortController();
    const out = path.join(dir, "cancelled.gguf");
    const steps: StepMetrics[] = [];
    const run = trainSft(
      { baseModelPath: modelPath, outputPath: out, examples, experimentalConfig: { num_epochs: 20, batch_size: 1 }, signal: controller.signal },
      (m) => {
        steps.push(m);
        if (m.step === 2) controller.abort(new Error("cancelled by user"));
      },
    );
    await expect(run).rejects.toThrow(/cancelled by user/);
    expect(steps.length).toBe(2);
    expect(existsSync(out)).toBe(false);
  }, 300_000);

  it("RL needs Choice logprobs unless allowed, and skips groups whose rewards are all equal", async () => {
    const choice = (text: string) => ({ index: 0, finish_reason: "stop", message: { role: "assistant" as const, content: text } });
    const groups: TrajectoryGroup[] = [
      {
        trajectories: [
          { messages_and_choices: [{ role: "user", content: "Hi" }, choice("Hello!")], reward: 1 },
          { messages_and_choices: [{ role: "user", content: "Hi" }, choice("Go away.")], reward: 0 },
        ],
      },
      {
        trajectories: [
          { messages_and_choices: [{ role: "user", content: "Yo" }, choice("Yo.")], reward: 0.5 },
          { messages_and_choices: [{ role: "user", content: "Yo" }, choice("Hey.")], reward: 0.5 },
        ],
      },
    ];
    const out = path.join(dir, "rl.gguf");
    await expect(trainRl({ baseModelPath: modelPath, outputPath: out, groups }, () => {})).rejects.toThrow(/allow_training_without_logprobs/);
    const steps: StepMetrics[] = [];
    const result = await trainRl(
      { baseModelPath: modelPath, outputPath: out, groups, experimentalConfig: { allow_training_without_logprobs: true, learning_rate: 1e-3, mask_prob_ratio: true } },
      (m) => void steps.push(m),
    );
    expect(result.numSequences).toBe(2);
    expect(result.ignoredConfigKeys).toEqual(["mask_prob_ratio"]);
    expect(steps).toHaveLength(1);
    expect(steps[0].num_skipped_groups).toBe(1);
    expect(steps[0].num_groups).toBe(2);
    expect(steps[0].reward_mean).toBeCloseTo(0.5);
    // Without old logprobs the ratio is exactly 1.
    expect(steps[0].importance_ratio_mean).toBeCloseTo(1, 6);
    expect(existsSync(out)).toBe(true);
  }, 300_000);
});
