import { writeFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureEntity, type Principal } from "../../src/auth/keys.js";
import { createLogger } from "../../src/logging.js";
import { listCheckpoints } from "../../src/training/checkpoints.js";
import { listEvents } from "../../src/training/events.js";
import { cancelJob, createRlJob, getJob, type JobRow, type TrainingJobRecord } from "../../src/training/jobs.js";
import { createModel, getModel } from "../../src/training/models.js";
import { claimJob, MAX_ATTEMPTS, recoverExpiredLeases } from "../../src/training/queue.js";
import { TrainingWorker, type JobExecutor } from "../../src/training/worker.js";
import { DIALECTS, openTestDatabase, type TestDatabase } from "../helpers/db.js";

const principal: Principal = { keyId: "key_test", entity: "acme" };
const catalog = { hasBaseModel: async () => true };
const choice = { index: 0, finish_reason: "stop", message: { role: "assistant", content: "hi" }, logprobs: { content: [{ token: "hi", logprob: -0.5, bytes: [104, 105], top_logprobs: [] }] } };
const groups = [{ trajectories: [{ messages_and_choices: [{ role: "user", content: "hello" }, choice], reward: 1 }, { messages_and_choices: [{ role: "user", content: "hello" }, choice], reward: 0 }] }];

async function until(check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Stands in for the trainer so the queue's own rules can be tested quickly; it records who ran what, and when. */
function recordingExecutor(t: TestDatabase, log: { job: string; start: number; end: number }[], opts: { ms?: number; fail?: boolean } = {}): JobExecutor {
  return async (job: JobRow, progress, signal) => {
    const start = Date.now();
    await progress.started({ num_sequences: 2 });
    for (let i = 0; i < 4; i++) {
      if (signal.aborted) throw signal.reason;
      await new Promise((r) => {
        const timer = setTimeout(r, (opts.ms ?? 40) / 4);
        signal.addEventListener("abort", () => (clearTimeout(timer), r(undefined)), { once: true });
      });
      await progress.step({ step: i + 1, loss: 1 / (i + 1) });
    }
    if (opts.fail) throw new Error("trainer blew up");
    const file = path.join(t.dataDir, `${job.id}.gguf`);
    await writeFile(file, "adapter");
    log.push({ job: job.id, start, end: Date.now() });
    return { adapterFile: file, metrics: { loss: 0.25 } };
  };
}

describe.each(DIALECTS)("job queue on %s", (dialect) => {
  let t: TestDatabase;
  const logger = createLogger("silent");
  beforeAll(async () => {
    t = await openTestDatabase(dialect);
    await ensureEntity(t.db, principal.entity);
  });
  afterAll(async () => t?.close());

  it("runs jobs of one model in order, each once, across two workers, and adds checkpoints N+1", async () => {
    const model = await createModel(t.db, principal, { project: "p", name: "ordered", base_model: "tiny" }, catalog);
    const jobs: TrainingJobRecord[] = [];
    for (let i = 0; i < 4; i++) jobs.push(await createRlJob(t.db, principal, { model_id: model.id, trajectory_groups: groups }, t.dataDir));
    const log: { job: string; start: number; end: number }[] = [];
    const workers = [0, 1].map(() => new TrainingWorker(t.db, { dataDir: t.dataDir, device: "cpu", executor: recordingExecutor(t, log), logger, pollMs: 20 }));
    await Promise.all(workers.map((w) => w.start()));
    await until(async () => (await getJob(t.db, principal, jobs[3].id)).status === "succeeded");
    await Promise.all(workers.map((w) => w.stop()));

    expect(log.map((l) => l.job)).toEqual(jobs.map((j) => j.id));
    for (let i = 1; i < log.length; i++) expect(log[i].start).toBeGreaterThanOrEqual(log[i - 1].end);
    const steps = (await listCheckpoints(t.db, model, { limit: 10, order: "asc" })).data.map((c) => c.step);
    expect(steps).toEqual([0, 1, 2, 3, 4]);
    expect((await getJob(t.db, principal, jobs[3].id)).result_step).toBe(4);
    expect((await getModel(t.db, principal, model.id)).latest_step).toBe(4);
    const types = (await listEvents(t.db, jobs[0].id, { limit: 100 })).data.map((e) => e.type);
    expect(types).toEqual(["training_started", "gradient_step", "gradient_step", "gradient_step", "gradient_step", "training_ended"]);
  });

  it("never hands one job to two claimers", async () => {
    const model = await createModel(t.db, principal, { project: "p", name: "race", base_model: "tiny" }, catalog);
    await createRlJob(t.db, principal, { model_id: model.id, trajectory_groups: groups }, t.dataDir);
    const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => claimJob(t.db, `w${i}`, "cpu", 60_000)));
    expect(claims.filter(Boolean)).toHaveLength(1);
    await t.db("training_jobs").where({ model_id: model.id }).update({ status: "failed" });
  });

  it("requeues a job whose worker vanished, and fails it with an event after the last attempt", async () => {
    const model = await createModel(t.db, principal, { project: "p", name: "lost", base_model: "tiny" }, catalog);
    const job = await createRlJob(t.db, principal, { model_id: model.id, trajectory_groups: groups }, t.dataDir);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const claimed = await claimJob(t.db, `ghost${attempt}`, "cpu", 1);
      expect(claimed?.id).toBe(job.id);
      await new Promise((r) => setTimeout(r, 5));
      const recovered = await recoverExpiredLeases(t.db);
      expect(recovered).toEqual(attempt < MAX_ATTEMPTS ? { requeued: 1, failed: 0 } : { requeued: 0, failed: 1 });
    }
    const final = await getJob(t.db, principal, job.id);
    expect(final.status).toBe("failed");
    expect(final.error).toMatch(/stopped responding/);
    const events = (await listEvents(t.db, job.id, { limit: 10 })).data;
    expect(events.at(-1)).toMatchObject({ type: "training_failed", data: { error_message: expect.stringMatching(/stopped responding/) } });
  });

  it("cancels a queued job at once and a running one at its next step", async () => {
    const model = await createModel(t.db, principal, { project: "p", name: "cancel", base_model: "tiny" }, catalog);
    const running = await createRlJob(t.db, principal, { model_id: model.id, trajectory_groups: groups }, t.dataDir);
    const queued = await createRlJob(t.db, principal, { model_id: model.id, trajectory_groups: groups }, t.dataDir);
    expect((await cancelJob(t.db, principal, queued.id)).status).toBe("cancelled");
    const worker = new TrainingWorker(t.db, { dataDir: t.dataDir, device: "cpu", executor: recordingExecutor(t, [], { ms: 60_000 }), logger, pollMs: 20, leaseMs: 300 });
    await worker.start();
    await until(async () => (await getJob(t.db, principal, running.id)).status === "running");
    await cancelJob(t.db, principal, running.id);
    await until(async () => (await getJob(t.db, principal, running.id)).status === "cancelled");
    await worker.stop();
    const last = (await listEvents(t.db, running.id, { limit: 100 })).data.at(-1);
    expect(last).toMatchObject({ type: "training_failed", data: { cancelled: true } });
    await expect(cancelJob(t.db, principal, running.id)).rejects.toMatchObject({ kind: "conflict" });
    expect((await listCheckpoints(t.db, model, { limit: 10, order: "asc" })).data).toHaveLength(1);
  });

  it("hands a running job back to the queue when its worker shuts down, without counting an attempt", async () => {
    const model = await createModel(t.db, principal, { project: "p", name: "restart", base_model: "tiny" }, catalog);
    const job = await createRlJob(t.db, principal, { model_id: model.id, trajectory_groups: groups }, t.dataDir);
    const first = new TrainingWorker(t.db, { dataDir: t.dataDir, device: "cpu", executor: recordingExecutor(t, [], { ms: 60_000 }), logger, pollMs: 20 });
    await first.start();
    await until(async () => (await getJob(t.db, principal, job.id)).status === "running");
    await first.stop();
    expect(await getJob(t.db, principal, job.id)).toMatchObject({ status: "queued", attempts: 0 });
    const second = new TrainingWorker(t.db, { dataDir: t.dataDir, device: "cpu", executor: recordingExecutor(t, []), logger, pollMs: 20 });
    await second.start();
    await until(async () => (await getJob(t.db, principal, job.id)).status === "succeeded");
    await second.stop();
    expect((await getJob(t.db, principal, job.id)).attempts).toBe(1);
  });

  it("fails a job whose training throws, with the error in the event", async () => {
    const model = await createModel(t.db, principal, { project: "p", name: "boom", base_model: "tiny" }, catalog);
    const job = await createRlJob(t.db, principal, { model_id: model.id, trajectory_groups: groups }, t.dataDir);
    const worker = new TrainingWorker(t.db, { dataDir: t.dataDir, device: "cpu", executor: recordingExecutor(t, [], { fail: true }), logger, pollMs: 20 });
    await worker.start();
    await until(async () => (await getJob(t.db, principal, job.id)).status === "failed");
    await worker.stop();
    expect((await listEvents(t.db, job.id, { limit: 100 })).data.at(-1)).toMatchObject({ type: "training_failed", data: { error_message: "trainer blew up" } });
  });
});
