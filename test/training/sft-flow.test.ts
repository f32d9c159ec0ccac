import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trainingClient } from "../helpers/contract.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const FACTS: [string, string][] = [
  ["What colour is the door of the lighthouse?", "The door is green."],
  ["Who keeps the lighthouse?", "Old Marta keeps it."],
  ["How many steps lead to the lamp?", "There are 96 steps."],
];
const SYSTEM = "Answer briefly.";
const jsonl = FACTS.map(([q, a]) => JSON.stringify({ messages: [{ role: "system", content: SYSTEM }, { role: "user", content: q }, { role: "assistant", content: a }] })).join("\n");

/** The SFT flow a user follows: upload data, create a job, follow its events, chat with the new checkpoint. */
describe("SFT through the training service", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ env: { GYRE_THREADS: "1" } });
  });
  afterAll(async () => s?.close());

  it("trains a checkpoint that answers what it was taught", async () => {
    const api = trainingClient(s.url("training"), s.key);
    const upload = await fetch(`${s.url("training")}/v1/preview/datasets?project=faq&name=lighthouse`, {
      method: "POST",
      headers: { Authorization: `Bearer ${s.key}`, "content-type": "application/jsonl" },
      body: jsonl,
    });
    expect(upload.status).toBe(200);
    const dataset = await upload.json();
    expect(dataset).toMatchObject({ num_examples: 3, version: 0, url: "dataset:///local/faq/lighthouse:v0" });

    const created = await api.POST("/v1/preview/models", { body: { project: "faq", name: "keeper", base_model: "tiny-chat", return_existing: true } });
    const model = created.data!;
    expect(model.latest_step).toBe(0);
    const again = await api.POST("/v1/preview/models", { body: { project: "faq", name: "keeper", base_model: "tiny-chat", return_existing: true } });
    expect(again.data!.id).toBe(model.id);

    const job = await api.POST("/v1/preview/sft-training-jobs", {
      body: { model_id: model.id, training_data_url: "wandb-artifact:///local/faq/lighthouse:latest", config: { batch_size: 3, learning_rate: 0.01, epochs: 30 } },
    });
    expect(job.response.status).toBe(200);
    const jobId = job.data!.id;

    // Poll like the client: every event exactly once, in order, with the `after` cursor.
    const seen: { id: string; type: string; data: Record<string, unknown> }[] = [];
    let after: string | undefined;
    for (let i = 0; i < 1200 && !seen.some((e) => e.type === "training_ended" || e.type === "training_failed"); i++) {
      const page = await api.GET("/v1/preview/training-jobs/{training_job_id}/events", { params: { path: { training_job_id: jobId }, query: { after, limit: 5 } } });
      seen.push(...(page.data!.data as typeof seen));
      if (page.data!.data.length) after = page.data!.last_id;
      if (!page.data!.has_more) await new Promise((r) => setTimeout(r, 250));
    }
    expect(new Set(seen.map((e) => e.id)).size).toBe(seen.length);
    expect([...seen.map((e) => e.id)].sort()).toEqual(seen.map((e) => e.id));
    expect(seen[0]).toMatchObject({ type: "training_started", data: { num_sequences: 3 } });
    const steps = seen.filter((e) => e.type === "gradient_step");
    expect(steps).toHaveLength(30);
    const firstLoss = steps[0].data.loss as number;
    const lastLoss = steps.at(-1)!.data.loss as number;
    expect(lastLoss).toBeLessThan(firstLoss / 10);
    expect(seen.at(-1)).toMatchObject({ type: "training_ended", data: { step: 1 } });

    const finished = await api.GET("/v1/preview/training-jobs/{training_job_id}", { params: { path: { training_job_id: jobId } } });
    expect(finished.data).toMatchObject({ status: "succeeded", result_step: 1, attempts: 1 });
    expect(finished.data!.started_at).not.toBeNull();
    const latest = await api.GET("/v1/preview/models/{model_id}/checkpoints", { params: { path: { model_id: model.id }, query: { limit: 1, order: "desc" } } });
    expect(latest.data!.data[0]).toMatchObject({ step: 1, name: "local/faq/keeper:step1" });
    expect(latest.data!.has_more).toBe(true);

    // Both chat endpoints serve the checkpoint; greedy decoding reproduces the trained answer.
    const [question, answer] = FACTS[1];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "system", content: SYSTEM }, { role: "user", content: question }];
    const training = new OpenAI({ apiKey: s.key, baseURL: `${s.url("training")}/v1`, maxRetries: 0 });
    const inference = new OpenAI({ apiKey: s.key, baseURL: `${s.url("inference")}/v1`, maxRetries: 0 });
    const base = await inference.chat.completions.create({ model: "tiny-chat", messages, temperature: 0, max_tokens: 24 });
    const trained = await training.chat.completions.create({ model: "local/faq/keeper:step1", messages, temperature: 0, max_tokens: 24 });
    const latestByName = await inference.chat.completions.create({ model: "local/faq/keeper", messages, temperature: 0, max_tokens: 24 });
    const artifact = await inference.chat.completions.create({ model: "wandb-artifact:///local/faq/keeper:step1", messages, temperature: 0, max_tokens: 24 });
    expect(base.choices[0].message.content).not.toBe(answer);
    expect(trained.choices[0].message.content).toBe(answer);
    expect(trained.model).toBe("local/faq/keeper:step1");
    expect(latestByName.choices[0].message.content).toBe(answer);
    expect(artifact.choices[0].message.content).toBe(answer);
    const listed = await inference.models.list();
    expect(listed.data.map((m) => m.id)).toEqual(expect.arrayContaining(["tiny-chat", "local/faq/keeper:step0", "local/faq/keeper:step1"]));
  }, 900_000);

  it("cancels a running job: it stops, says so in its events, and adds no checkpoint", async () => {
    const api = trainingClient(s.url("training"), s.key);
    const model = (await api.POST("/v1/preview/models", { body: { project: "faq", name: "cancelled", base_model: "tiny-chat" } })).data!;
    const job = (await api.POST("/v1/preview/sft-training-jobs", { body: { model_id: model.id, training_data_url: "dataset:///local/faq/lighthouse:latest", config: { epochs: 100 } } })).data!;
    const path = { training_job_id: job.id };
    for (let i = 0; i < 600; i++) {
      const events = await api.GET("/v1/preview/training-jobs/{training_job_id}/events", { params: { path } });
      if (events.data!.data.some((e) => e.type === "gradient_step")) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const cancelling = await api.POST("/v1/preview/training-jobs/{training_job_id}/cancel", { params: { path } });
    expect(cancelling.response.status).toBe(200);
    let status = cancelling.data!.status;
    for (let i = 0; i < 600 && status !== "cancelled"; i++) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await api.GET("/v1/preview/training-jobs/{training_job_id}", { params: { path } })).data!.status;
    }
    expect(status).toBe("cancelled");
    const events = (await api.GET("/v1/preview/training-jobs/{training_job_id}/events", { params: { path, query: { limit: 100 } } })).data!;
    expect(events.data.at(-1)).toMatchObject({ type: "training_failed", data: { cancelled: true } });
    const again = await api.POST("/v1/preview/training-jobs/{training_job_id}/cancel", { params: { path } });
    expect(again.response.status).toBe(409);
    const checkpoints = await api.GET("/v1/preview/models/{model_id}/checkpoints", { params: { path: { model_id: model.id } } });
    expect(checkpoints.data!.data.map((c) => c.step)).toEqual([0]);
    const listed = await api.GET("/v1/preview/training-jobs", { params: { query: { model_id: model.id } } });
    expect(listed.data!.data.map((j) => [j.id, j.status])).toEqual([[job.id, "cancelled"]]);
  });
});
