import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerApiKey } from "../src/auth/keys.js";
import { notFound } from "../src/errors.js";
import { createServiceApp, type OperationHandler } from "../src/http/service-app.js";
import { createLogger } from "../src/logging.js";
import { SPEC_DIR } from "../src/paths.js";
import { openTestDatabase, type TestDatabase } from "./helpers/db.js";

/** The server's own contract check turns an answer the spec does not allow into a loud 500. */
describe("response checking against the spec", () => {
  let t: TestDatabase;
  let server: http.Server;
  let url = "";
  const ok: OperationHandler = async () => ({ body: { results: [], total_conversations: 0 } });
  beforeAll(async () => {
    t = await openTestDatabase("sqlite");
    await registerApiKey(t.db, "local", "gyre_check_key");
    const app = await createServiceApp(
      {
        name: "search",
        specPath: path.join(SPEC_DIR, "search.yaml"),
        errorStyle: "detail",
        handlers: {
          searchAgentMessages: ok,
          ingestTraces: async () => ({ body: { partialSuccess: { rejectedSpans: "x".repeat(3), errorMessage: 7 } } }),
          ingestTracesAtRoot: async () => {
            throw notFound("an error status the operation does not declare");
          },
          getSearchHealth: async () => ({ body: { status: "fine", service: "search", version: "1" } }),
          getSearchMetrics: async () => ({ body: "m 1", contentType: "text/plain" }),
        },
      },
      { db: t.db, logger: createLogger("silent"), limits: { bodyBytes: 1 << 20, concurrentRequests: 8, validateResponses: true } },
    );
    server = http.createServer(app.callback()).listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.close();
    await t?.close();
  });
  const get = (p: string, init: RequestInit = {}) => fetch(`${url}${p}`, { ...init, headers: { Authorization: "Bearer gyre_check_key", "content-type": "application/json", ...init.headers } });

  it("passes an answer that matches", async () => {
    const r = await get("/agents/search", { method: "POST", body: JSON.stringify({ project_id: "local/p" }) });
    expect(r.status).toBe(200);
  });
  it("refuses a body outside the schema", async () => {
    expect((await get("/health")).status).toBe(500);
    expect((await get("/agents/otel/v1/traces", { method: "POST", body: "{}" })).status).toBe(500);
  });
  it("refuses an error status the operation does not declare", async () => {
    const r = await get("/otel/v1/traces", { method: "POST", body: "{}" });
    expect(r.status).toBe(500);
    expect((await r.json()).detail).toMatch(/Status 404 is not declared/);
  });
});
