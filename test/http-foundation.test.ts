import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gzipSync } from "node:zlib";
import { assertMatchesSpec, searchClient, trainingClient, type SpecName } from "./helpers/contract.js";
import { startTestServer, type TestServer } from "./helpers/server.js";

/** A raw call whose answer is still checked against the spec. */
async function call(spec: SpecName, url: string, init: RequestInit = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, init);
  const text = await res.text();
  const contentType = res.headers.get("content-type") ?? "";
  const body = contentType.includes("json") ? JSON.parse(text) : text;
  await assertMatchesSpec(spec, init.method ?? "GET", url, res.status, contentType, body);
  return { status: res.status, body, headers: res.headers };
}

describe("HTTP foundation", () => {
  let s: TestServer;
  const auth = () => ({ Authorization: `Bearer ${s.key}` });
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s?.close());

  describe("authentication", () => {
    it("refuses every service without a key, in each service's error shape", async () => {
      const search = await call("search", `${s.url("search")}/agents/search`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
      expect(search.status).toBe(401);
      expect(search.body).toEqual({ detail: "Missing or invalid API key." });
      const training = await call("training", `${s.url("training")}/v1/health`);
      expect(training.status).toBe(401);
      const inference = await call("inference", `${s.url("inference")}/v1/models`);
      expect(inference.status).toBe(401);
      expect(inference.body.error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" });
    });

    it("refuses a wrong key and accepts the configured one", async () => {
      const wrong = await call("training", `${s.url("training")}/v1/health`, { headers: { Authorization: "Bearer gyre_nope" } });
      expect(wrong.status).toBe(401);
      const { data, response } = await trainingClient(s.url("training"), s.key).GET("/v1/health");
      expect(response.status).toBe(200);
      expect(data).toMatchObject({ status: "ok", service: "training" });
    });
  });

  describe("search validation (422 with FastAPI-style loc)", () => {
    it("locates a missing field and a bound violation", async () => {
      const { error, response } = await searchClient(s.url("search"), s.key).POST("/agents/search", {
        body: { limit: 5000, offset: -1 } as never,
      });
      expect(response.status).toBe(422);
      const detail = (error as { detail: { loc: unknown[]; type: string }[] }).detail;
      expect(detail).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ loc: ["body", "project_id"], type: "missing" }),
          expect.objectContaining({ loc: ["body", "limit"], type: "less_than_equal" }),
          expect.objectContaining({ loc: ["body", "offset"], type: "greater_than_equal" }),
        ]),
      );
    });

    it("rejects a role outside the enum and a malformed date-time", async () => {
      const r = await call("search", `${s.url("search")}/agents/search`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json" },
        body: JSON.stringify({ project_id: "local/p", roles: ["robot"], started_after: "yesterday" }),
      });
      expect(r.status).toBe(422);
      const locs = r.body.detail.map((d: { loc: unknown[] }) => d.loc);
      expect(locs).toContainEqual(["body", "roles", 0]);
      expect(locs).toContainEqual(["body", "started_after"]);
    });

    it("answers malformed JSON with a 422 naming the body", async () => {
      const r = await call("search", `${s.url("search")}/agents/search`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: "{nope" });
      expect(r.status).toBe(422);
      expect(r.body.detail[0]).toMatchObject({ loc: ["body"], type: "json_invalid" });
    });
  });

  describe("training validation", () => {
    it("locates errors in query parameters and nested bodies", async () => {
      const t = trainingClient(s.url("training"), s.key);
      const page = await t.GET("/v1/preview/models/{model_id}/checkpoints", { params: { path: { model_id: "0b0c6f5e-3a55-4c36-9f8e-0d5c1d0c5f11" }, query: { limit: 500 } } });
      expect(page.response.status).toBe(422);
      expect((page.error as any).detail[0]).toMatchObject({ loc: ["query", "limit"], type: "less_than_equal" });
      const job = await t.POST("/v1/preview/training-jobs", {
        body: { model_id: "0b0c6f5e-3a55-4c36-9f8e-0d5c1d0c5f11", trajectory_groups: [{ trajectories: [{ messages_and_choices: [{ role: "user", content: "hi" }] }] }] } as never,
      });
      expect(job.response.status).toBe(422);
      expect((job.error as any).detail).toContainEqual(expect.objectContaining({ loc: ["body", "trajectory_groups", 0, "trajectories", 0, "reward"], type: "missing" }));
    });

    it("rejects a path id that is not a uuid", async () => {
      const r = await call("training", `${s.url("training")}/v1/preview/training-jobs/not-a-uuid`, { headers: auth() });
      expect(r.status).toBe(422);
      expect(r.body.detail[0].loc).toEqual(["path", "training_job_id"]);
    });
  });

  describe("inference validation (400 in the OpenAI shape)", () => {
    it("names the parameter", async () => {
      const r = await call("inference", `${s.url("inference")}/v1/chat/completions`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages: [], temperature: 9 }),
      });
      expect(r.status).toBe(400);
      expect(r.body.error.type).toBe("invalid_request_error");
      expect(r.body.error.param).toBe("messages");
      expect(r.body.error.message).toContain("temperature");
    });

    it("answers malformed JSON with a 400", async () => {
      const r = await call("inference", `${s.url("inference")}/v1/chat/completions`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: "[" });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(/JSON/);
    });
  });

  describe("routing and limits", () => {
    it("answers an unknown path with 404 and a wrong method with 405, in the service's shape", async () => {
      const missing = await call("training", `${s.url("training")}/v1/nothing-here`, { headers: auth() });
      expect(missing.status).toBe(404);
      const wrongMethod = await call("inference", `${s.url("inference")}/v1/models`, { method: "DELETE", headers: auth() });
      expect(wrongMethod.status).toBe(405);
      expect(wrongMethod.body.error.code).toBe("method_not_allowed");
    });

    it("refuses a body over the limit with 413, also when it only grows past it once decompressed", async () => {
      const big = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(5 * 1024 * 1024) }] });
      const plain = await call("inference", `${s.url("inference")}/v1/chat/completions`, { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: big });
      expect(plain.status).toBe(413);
      const zipped = await call("inference", `${s.url("inference")}/v1/chat/completions`, {
        method: "POST",
        headers: { ...auth(), "content-type": "application/json", "content-encoding": "gzip" },
        body: gzipSync(big),
      });
      expect(zipped.status).toBe(413);
    });

    it("refuses an unsupported content type with 415", async () => {
      const r = await call("search", `${s.url("search")}/agents/otel/v1/traces`, { method: "POST", headers: { ...auth(), "content-type": "text/plain" }, body: "hello" });
      expect(r.status).toBe(415);
    });
  });

  describe("health and metrics", () => {
    it("each service has a health check and Prometheus metrics", async () => {
      for (const [spec, path] of [["search", "/health"], ["inference", "/health"], ["training", "/v1/health"]] as const) {
        const r = await call(spec, `${s.url(spec)}${path}`, { headers: auth() });
        expect(r.status).toBe(200);
        expect(r.body.status).toBe("ok");
        const m = await call(spec, `${s.url(spec)}/metrics`, { headers: auth() });
        expect(m.status).toBe(200);
        expect(m.body).toContain("gyre_http_requests_total");
      }
    });

    it("system check reports each component", async () => {
      const { data, response } = await trainingClient(s.url("training"), s.key).GET("/v1/system-check");
      expect(response.status).toBe(200);
      for (const c of ["api", "database", "cpu_queue", "gpu_queue"] as const) expect(data?.[c].success).toBe(true);
    });
  });
});

describe("the server on PostgreSQL", () => {
  let s: TestServer;
  beforeAll(async () => {
    // No worker in this server: the queue check must notice that nobody would take a queued job.
    s = await startTestServer({ dialect: "postgres", env: { GYRE_WORKER: "off" } });
  });
  afterAll(async () => s?.close());

  it("authenticates against keys stored in PostgreSQL and checks its components", async () => {
    const anonymous = await call("training", `${s.url("training")}/v1/system-check`);
    expect(anonymous.status).toBe(401);
    const { data, response } = await trainingClient(s.url("training"), s.key).GET("/v1/system-check");
    expect(response.status).toBe(200);
    expect(data?.database.success).toBe(true);
    expect(data?.cpu_queue.details).toMatchObject({ queued: 0, running: 0 });
  });

  it("fails the queue check when queued jobs have no live worker", async () => {
    await s.db("training_jobs").insert({
      id: "00000000-0000-4000-8000-000000000001", entity: "local", project: "p", model_id: "00000000-0000-4000-8000-000000000002",
      kind: "sft", status: "queued", device: "cpu", created_at: new Date(),
    });
    const { error, response } = await trainingClient(s.url("training"), s.key).GET("/v1/system-check");
    expect(response.status).toBe(503);
    const body = error as unknown as { cpu_queue: { success: boolean; errors: string[] }; gpu_queue: { success: boolean } };
    expect(body.cpu_queue.success).toBe(false);
    expect(body.cpu_queue.errors[0]).toMatch(/no live cpu worker/);
    expect(body.gpu_queue.success).toBe(true);
    await s.db("training_jobs").delete();
  });
});
