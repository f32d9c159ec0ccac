import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trainingClient } from "../helpers/contract.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const STEPS = 6;
const GROUP_SIZE = 16;
const PROMPTS = [[{ role: "user" as const, content: "Write anything." }], [{ role: "user" as const, content: "Say a word." }]];

/** Toy reward a random policy sometimes earns: the share of the letter "e" in the answer. */
const reward = (text: string) => (text.length === 0 ? 0 : [...text].filter((c) => c === "e").length / text.length);

/**
 * The RL loop with plain HTTP calls shaped like the RL client's: sample a group of rollouts with logprobs from the
 * training chat endpoint, score them, post a training job, poll its events with the `after` cursor, read the latest
 * step, and sample again from the new checkpoint.
 */
describe("RL through the training service", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { GYRE_THREADS: "1" } });
  });
  afterAll(async () => s?.close(), 300_000);

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${s.url("training")}/v1${path}`, { method: "POST", headers: { Authorization: `Bearer ${s.key}`, "content-type": "application/json" }, body: JSON.stringify(body) });
    const json = await res.json();
    if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const get = async (path: string) => {
    const res = await fetch(`${s.url("training")}/v1${path}`, { headers: { Authorization: `Bearer ${s.key}` } });
    return res.json();
  };

  /**
   * One request per rollout, as the RL client makes them. Sequential requests with fixed seeds make the run
   * reproducible: concurrent sequences are decoded in shared batches, whose composition changes the arithmetic.
   */
  async function sampleGroup(model: string, messages: (typeof PROMPTS)[number], seed: number, n = GROUP_SIZE) {
    const trajectories = [];
    for (let i = 0; i < n; i++) {
      const completion = await post("/chat/completions", { model, messages, max_tokens: 10, temperature: 1, logprobs: true, seed: seed * 1000 + i });
      const choice = completion.choices[0];
      trajectories.push({ messages_and_choices: [...messages, choice], reward: reward(choice.message.content ?? "") });
    }
    return trajectories;
  }

  async function meanReward(model: string): Promise<number> {
    let total = 0;
    let count = 0;
    for (const [p, messages] of PROMPTS.entries()) {
      for (const t of await sampleGroup(model, messages, 900 + p)) {
        total += t.reward;
        count++;
      }
    }
    return total / count;
  }

  it("raises the mean reward of samples from each new checkpoint", async () => {
    const api = trainingClient(s.url("training"), s.key);
    const model = await post("/preview/models", { project: "rl", name: "e-lover", base_model: "tiny-chat", return_existing: true });
    const name = "local/rl/e-lover";
    const before = await meanReward(`${name}:step0`);
    const sampledRewards: number[] = [];
    for (let step = 0; step < STEPS; step++) {
      const groups = [];
      for (const [p, messages] of PROMPTS.entries()) groups.push({ trajectories: await sampleGroup(name, messages, step * 100 + p) });
      const rewards = groups.flatMap((g) => g.trajectories.map((t: { reward: number }) => t.reward));
      sampledRewards.push(rewards.reduce((a, b) => a + b, 0) / rewards.length);
      const logged = await post(`/preview/models/${model.id}/log`, { split: "train", trajectory_groups: groups });
      expect(logged).toMatchObject({ step, num_groups: 2, num_trajectories: 2 * GROUP_SIZE });

      const job = await post("/preview/training-jobs", { model_id: model.id, trajectory_groups: groups, experimental_config: { learning_rate: 2e-2 } });
      let after = "";
      let last: { type: string; data: Record<string, unknown> } | undefined;
      for (let i = 0; i < 600 && last?.type !== "training_ended" && last?.type !== "training_failed"; i++) {
        const page = await get(`/preview/training-jobs/${job.id}/events?limit=100${after ? `&after=${after}` : ""}`);
        if (page.data.length) {
          after = page.last_id;
          last = page.data.at(-1);
        } else {
          await new Promise((r) => setTimeout(r, 250));
        }
      }
      expect(last, JSON.stringify(last)).toMatchObject({ type: "training_ended", data: { step: step + 1 } });
      const latest = await api.GET("/v1/preview/models/{model_id}/checkpoints", { params: { path: { model_id: model.id }, query: { limit: 1, order: "desc" } } });
      expect(latest.data!.data[0].step).toBe(step + 1);
      expect(latest.data!.data[0].metrics.reward_mean).toBeCloseTo(sampledRewards[step], 5);
    }
    const afterTraining = await meanReward(`${name}:step${STEPS}`);
    console.log(`mean reward ${before.toFixed(3)} -> ${afterTraining.toFixed(3)}; sampled per step: ${sampledRewards.map((r) => r.toFixed(3)).join(", ")}`);
    // The untrained policy earns about 0.12 on these seeds.
    expect(afterTraining).toBeGreaterThan(before + 0.1);
  }, 900_000);

  it("refuses malformed trajectories with the exact location, and another entity's model", async () => {
    const api = trainingClient(s.url("training"), s.key);
    const model = await post("/preview/models", { project: "rl", name: "strict", base_model: "tiny-chat" });
    const choice = { index: 0, finish_reason: "stop", message: { role: "assistant" as const, content: "x" }, logprobs: null };
    const r = await api.POST("/v1/preview/training-jobs", {
      body: { model_id: model.id, trajectory_groups: [{ trajectories: [{ messages_and_choices: [{ role: "user", content: "q" }, choice], reward: 1 }] }] },
    });
    expect(r.response.status).toBe(422);
    expect((r.error as { detail: { loc: unknown[] }[] }).detail[0].loc).toEqual(["body", "trajectory_groups", 0, "trajectories", 0, "messages_and_choices", 1, "logprobs"]);
    const duplicate = await api.POST("/v1/preview/models", { body: { project: "rl", name: "strict", base_model: "tiny-chat" } });
    expect(duplicate.response.status).toBe(409);
    const elsewhere = await api.POST("/v1/preview/models", { body: { entity: "someone-else", project: "rl", name: "x", base_model: "tiny-chat" } });
    expect(elsewhere.response.status).toBe(403);
    const unknownBase = await api.POST("/v1/preview/models", { body: { project: "rl", name: "y", base_model: "nope" } });
    expect(unknownBase.response.status).toBe(404);
  });
});
