import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_POSTGRES_URL } from "../helpers/db.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

const root = path.resolve(import.meta.dirname, "../..");
const examples = ["green", "blue", "red"].map((c) => JSON.stringify({ messages: [{ role: "user", content: `Colour of ${c}?` }, { role: "assistant", content: `It is ${c}.` }] })).join("\n");

interface Worker {
  child: ChildProcess;
  started: string[];
  exited: Promise<number | null>;
}

/**
 * `gyre worker` processes against the test server's PostgreSQL schema and data directory, as separate hosts would
 * run them. Which jobs each one starts is read from its JSON log.
 */
describe("training workers as separate processes on PostgreSQL", () => {
  let s: TestServer;
  const workers: Worker[] = [];
  beforeAll(async () => {
    s = await startTestServer({ dialect: "postgres", env: { GYRE_WORKER: "off" } });
  });
  afterAll(async () => {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill("SIGKILL");
    await s?.close();
  }, 120_000);

  function startWorker(leaseSeconds: number): Worker {
    const url = `${TEST_POSTGRES_URL}?options=${encodeURIComponent(`-c search_path=${schemaOf()}`)}`;
    // node itself, not the tsx wrapper, so that a kill reaches the worker and not a parent of it.
    const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "src/cli.ts"), "worker"], {
      env: {
        ...process.env,
        GYRE_DATABASE_URL: url,
        GYRE_DATA_DIR: s.context.config.dataDir,
        GYRE_MODELS_DIR: s.context.config.modelsDir,
        GYRE_LEASE_SECONDS: String(leaseSeconds),
        GYRE_THREADS: "1",
        GYRE_API_KEY: "",
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const worker: Worker = { child, started: [], exited: new Promise((r) => child.once("exit", (code) => r(code))) };
    let buffered = "";
    child.stdout!.on("data", (d) => {
      buffered += d;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        const entry = JSON.parse(line);
        if (entry.msg === "job started") worker.started.push(entry.job);
      }
    });
    workers.push(worker);
    return worker;
  }
  const schemaOf = () => String((s.db.client.config as { searchPath?: string[] }).searchPath?.[0]);

  const api = async (method: string, p: string, body?: unknown, type = "application/json") => {
    const res = await fetch(`${s.url("training")}/v1${p}`, { method, headers: { Authorization: `Bearer ${s.key}`, "content-type": type }, body: typeof body === "string" ? body : JSON.stringify(body) });
    const json = await res.json();
    if (!res.ok) throw new Error(`${p}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const until = async (check: () => Promise<boolean>, ms = 300_000) => {
    const end = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > end) throw new Error("timed out");
      await new Promise((r) => setTimeout(r, 300));
    }
  };

  it("two workers share the queue and never run the same job", async () => {
    await api("POST", "/preview/datasets?project=w&name=colours", examples, "application/jsonl");
    const jobs: string[] = [];
    for (const name of ["a", "b"]) {
      const model = await api("POST", "/preview/models", { project: "w", name, base_model: "tiny-chat" });
      for (let i = 0; i < 2; i++) {
        const job = await api("POST", "/preview/sft-training-jobs", { model_id: model.id, training_data_url: "dataset:///local/w/colours:v0", config: { epochs: 2, learning_rate: 0.01 } });
        jobs.push(job.id);
      }
    }
    const [w1, w2] = [startWorker(30), startWorker(30)];
    await until(async () => {
      const all = await Promise.all(jobs.map((id) => api("GET", `/preview/training-jobs/${id}`)));
      return all.every((j) => j.status === "succeeded");
    });
    const started = [...w1.started, ...w2.started];
    expect(started.sort()).toEqual([...jobs].sort());
    expect(w1.started.length).toBeGreaterThan(0);
    expect(w2.started.length).toBeGreaterThan(0);
    for (const id of jobs) expect((await api("GET", `/preview/training-jobs/${id}`)).attempts).toBe(1);
    const system = await api("GET", "/system-check");
    expect(system.cpu_queue.details.live_workers).toBe(2);
    for (const w of [w1, w2]) w.child.kill("SIGTERM");
    expect(await Promise.all([w1.exited, w2.exited])).toEqual([0, 0]);
  }, 600_000);

  it("a job whose worker is killed is taken over by another worker once its lease expires", async () => {
    const model = await api("POST", "/preview/models", { project: "w", name: "killed", base_model: "tiny-chat" });
    const job = await api("POST", "/preview/sft-training-jobs", { model_id: model.id, training_data_url: "dataset:///local/w/colours:v0", config: { epochs: 40, learning_rate: 0.01 } });
    const doomed = startWorker(2);
    await until(async () => (await api("GET", `/preview/training-jobs/${job.id}/events`)).data.some((e: { type: string }) => e.type === "gradient_step"));
    doomed.child.kill("SIGKILL");
    expect((await api("GET", `/preview/training-jobs/${job.id}`)).status).toBe("running");

    const rescuer = startWorker(2);
    await until(async () => (await api("GET", `/preview/training-jobs/${job.id}`)).status === "succeeded");
    const final = await api("GET", `/preview/training-jobs/${job.id}`);
    expect(final).toMatchObject({ status: "succeeded", attempts: 2, result_step: 1 });
    expect(rescuer.started).toEqual([job.id]);
    const events = (await api("GET", `/preview/training-jobs/${job.id}/events?limit=100`)).data.map((e: { type: string }) => e.type);
    expect(events.filter((t: string) => t === "training_started")).toHaveLength(2);
    expect(events.at(-1)).toBe("training_ended");
    rescuer.child.kill("SIGTERM");
    expect(await rescuer.exited).toBe(0);
  }, 600_000);
});
