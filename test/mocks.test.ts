import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MOCK_SPECS, startMocks, type MockSpec, type RunningMocks } from "../scripts/mock.js";
import { assertMatchesSpec } from "./helpers/contract.js";

const AUTH = { Authorization: "Bearer gyre_test_key" };
const MODEL_ID = "0b0c6f5e-3a55-4c36-9f8e-0d5c1d0c5f11";

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

interface Sample {
  spec: MockSpec;
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

const SAMPLES: Sample[] = [
  {
    spec: "search",
    method: "POST",
    path: "/agents/search",
    body: { project_id: "acme/support-bot", query: 'refund "order 1234"', roles: ["user", "assistant"], trace_id: null, limit: 10 },
  },
  { spec: "training", method: "GET", path: `/v1/preview/models/${MODEL_ID}/checkpoints?limit=1&order=desc` },
  {
    spec: "inference",
    method: "POST",
    path: "/v1/chat/completions",
    headers: { "Compat-Project": "acme/support-bot" },
    body: {
      model: "tiny-chat",
      messages: [
        { role: "system", content: "You are a terse assistant." },
        { role: "user", content: [{ type: "text", text: "Name a prime number." }] },
      ],
      max_completion_tokens: 16,
      temperature: 0.7,
      stop: null,
      seed: 7,
    },
  },
];

describe("Prism mock servers", () => {
  let mocks: RunningMocks;
  const urls = new Map<MockSpec, string>();

  async function send(sample: Sample, extraHeaders: Record<string, string> = {}) {
    const url = `${urls.get(sample.spec)}${sample.path}`;
    const response = await fetch(url, {
      method: sample.method,
      headers: { ...AUTH, ...(sample.body === undefined ? {} : { "Content-Type": "application/json" }), ...sample.headers, ...extraHeaders },
      body: sample.body === undefined ? undefined : JSON.stringify(sample.body),
    });
    const contentType = response.headers.get("content-type") ?? "";
    const body: unknown = contentType.includes("json") ? await response.json() : await response.text();
    return { url, status: response.status, contentType, body };
  }

  beforeAll(async () => {
    const ports = await Promise.all(MOCK_SPECS.map(() => freePort()));
    mocks = await startMocks({ search: ports[0], training: ports[1], inference: ports[2] }, { seed: "gyre" });
    for (const server of mocks.servers) urls.set(server.spec, server.url);
  });

  afterAll(async () => {
    await mocks?.stop();
  });

  it("starts one server per spec", () => {
    expect(mocks.servers.map((s) => s.spec)).toEqual(["search", "training", "inference"]);
  });

  it.each(SAMPLES)("$spec answers $method $path with a spec-valid example", async (sample) => {
    const { url, status, contentType, body } = await send(sample);
    expect(status).toBe(200);
    expect(contentType).toContain("application/json");
    await assertMatchesSpec(sample.spec, sample.method, url, status, contentType, body);
  });

  it("serves the examples written in the specs", async () => {
    const search = (await send(SAMPLES[0])).body as { results: Array<{ conversation_id: string }> };
    expect(search.results[0].conversation_id).toBe("conv_8c1d");
    const checkpoints = (await send(SAMPLES[1])).body as { object: string; data: Array<{ name: string }> };
    expect(checkpoints.object).toBe("list");
    expect(checkpoints.data[0].name).toBe("acme/agents/support-rl:step3");
    const completion = (await send(SAMPLES[2])).body as { object: string; choices: Array<{ message: { role: string } }> };
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0].message.role).toBe("assistant");
  });

  it.each(SAMPLES)("$spec generates a spec-valid body for $method $path on Prefer: dynamic=true", async (sample) => {
    const { url, status, contentType, body } = await send(sample, { Prefer: "dynamic=true" });
    expect(status).toBe(200);
    expect(body).not.toEqual((await send(sample)).body);
    await assertMatchesSpec(sample.spec, sample.method, url, status, contentType, body);
  });

  it("rejects requests the specs do not allow, in the spec's error shape", async () => {
    const tooMany = await send({ ...SAMPLES[0], body: { project_id: "acme/support-bot", limit: 5000 } });
    expect(tooMany.status).toBe(422);
    await assertMatchesSpec("search", "POST", tooMany.url, tooMany.status, tooMany.contentType, tooMany.body);

    const anonymous = await fetch(`${urls.get("search")}/agents/search`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ project_id: "acme/support-bot" }),
    });
    expect(anonymous.status).toBe(401);

    // `type: [integer, "null"]` with `minimum: 1`: null passes, 0 does not.
    const nullTokens = await send({ ...SAMPLES[2], body: { messages: [{ role: "user", content: "hi" }], max_completion_tokens: null } });
    expect(nullTokens.status).toBe(200);
    const zeroTokens = await send({ ...SAMPLES[2], body: { messages: [{ role: "user", content: "hi" }], max_completion_tokens: 0 } });
    expect(zeroTokens.status).toBe(400);
    await assertMatchesSpec("inference", "POST", zeroTokens.url, zeroTokens.status, zeroTokens.contentType, zeroTokens.body);

    // `const: text` on the parts of a message, reached through the external $ref into components/chat.yaml.
    const badPart = await send({ ...SAMPLES[2], body: { messages: [{ role: "user", content: [{ type: "image", text: "hi" }] }] } });
    expect(badPart.status).toBe(400);

    const badId = await send({ ...SAMPLES[1], path: "/v1/preview/models/not-a-uuid/checkpoints" });
    expect(badId.status).toBe(422);
  });
});
