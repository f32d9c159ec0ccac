import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = path.resolve(import.meta.dirname, "..");
const tsx = path.join(root, "node_modules/.bin/tsx");
const cli = path.join(root, "src/cli.ts");
const dataDir = mkdtempSync(path.join(os.tmpdir(), "gyre-cli-"));
const env = { ...process.env, GYRE_API_KEY: "", GYRE_DATABASE_URL: "", GYRE_VALIDATE_RESPONSES: "on" };

function gyre(...args: string[]) {
  return spawnSync(tsx, [cli, ...args, "--data-dir", dataDir], { env, encoding: "utf8" });
}

interface Started {
  child: ChildProcess;
  urls: Record<string, string>;
  stdout: () => string;
  stderr: () => string;
}

/** Starts `gyre serve` on free ports and waits until every service logged that it listens. */
async function serve(): Promise<Started> {
  const child = spawn(tsx, [cli, "serve", "--data-dir", dataDir, "--search-port", "0", "--training-port", "0", "--inference-port", "0"], { env });
  let out = "";
  let err = "";
  child.stderr!.on("data", (d) => (err += d));
  const urls: Record<string, string> = {};
  await new Promise<void>((resolve, reject) => {
    child.on("exit", (code) => reject(new Error(`serve exited with ${code}: ${err}`)));
    child.stdout!.on("data", (d) => {
      out += d;
      for (const line of out.split("\n")) {
        if (!line.trim()) continue;
        const entry = JSON.parse(line);
        if (entry.msg === "listening") urls[entry.service] = entry.url;
      }
      if (Object.keys(urls).length === 3) resolve();
    });
  });
  return { child, urls, stdout: () => out, stderr: () => err };
}

async function stop(s: Started): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => s.child.once("exit", (code) => resolve(code)));
  s.child.kill("SIGTERM");
  return exited;
}

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe("gyre CLI", () => {
  let firstKey = "";

  it("on a first start creates a key, shows it once outside the logs, and stops cleanly on SIGTERM", async () => {
    const s = await serve();
    const shown = /\n\s+(gyre_\S+)\n/.exec(s.stderr());
    expect(shown).not.toBeNull();
    firstKey = shown![1];
    const file = path.join(dataDir, "api-key");
    expect(readFileSync(file, "utf8").trim()).toBe(firstKey);
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const ok = await fetch(`${s.urls.training}/v1/health`, { headers: { Authorization: `Bearer ${firstKey}` } });
    expect(ok.status).toBe(200);
    const code = await stop(s);
    expect(code).toBe(0);

    const lines = s.stdout().trim().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(["starting", "listening", "request", "shutting down", "stopped"]));
    expect(s.stdout()).not.toContain(firstKey);
  });

  it("manages keys: create prints the key once, list never shows it, revoke shuts it out", async () => {
    const created = gyre("keys", "create", "--entity", "acme", "--label", "ci");
    expect(created.status).toBe(0);
    const key = created.stdout.trim();
    expect(key).toMatch(/^gyre_/);
    const id = /created (key_\w+)/.exec(created.stderr)![1];

    const listed = gyre("keys", "list");
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).toContain("acme");
    expect(listed.stdout).not.toContain(key);

    const s = await serve();
    expect(s.stderr()).not.toContain("gyre_"); // keys exist: nothing new is created or shown
    const before = await fetch(`${s.urls.search}/health`, { headers: { Authorization: `Bearer ${key}` } });
    expect(before.status).toBe(200);
    expect(gyre("keys", "revoke", id).status).toBe(0);
    const after = await fetch(`${s.urls.search}/health`, { headers: { Authorization: `Bearer ${key}` } });
    expect(after.status).toBe(401);
    expect(await stop(s)).toBe(0);
  });

  it("refuses bad usage with a clear message", () => {
    const r = gyre("keys", "create");
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("--entity");
    expect(gyre("serve", "--services", "search,nope").stderr).toContain("Unknown service 'nope'");
  });
});

describe("gyre CLI for models, search, jobs and usage", () => {
  it("lists and adds models, searches, follows a job to its end, and totals usage", async () => {
    const listed = gyre("models", "list");
    expect(listed.stdout).toMatch(/^tiny-chat\tllama\tctx 2048\t/m);
    const added = gyre("models", "add", path.join(dataDir, "models", "tiny-chat.gguf"), "--id", "tiny-copy");
    expect(added.stdout).toContain("added tiny-copy: llama, context 2048");
    expect(gyre("models", "list").stdout).toMatch(/^tiny-copy\t/m);
    expect(gyre("models", "add", "/nonexistent.gguf").status).toBe(1);

    const s = await serve();
    const key = readFileSync(path.join(dataDir, "api-key"), "utf8").trim();
    const call = async (url: string, body: unknown, type = "application/json") =>
      (await fetch(url, { method: "POST", headers: { Authorization: `Bearer ${key}`, "content-type": type }, body: typeof body === "string" ? body : JSON.stringify(body) })).json();
    await call(`${s.urls.search}/agents/otel/v1/traces`, {
      resourceSpans: [{ resource: { attributes: [{ key: "gyre.entity", value: { stringValue: "local" } }, { key: "gyre.project", value: { stringValue: "cli" } }] },
        scopeSpans: [{ spans: [{ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", name: "chat", startTimeUnixNano: "1795276800000000000", endTimeUnixNano: "1795276801000000000",
          attributes: [{ key: "gen_ai.input.messages", value: { stringValue: JSON.stringify([{ role: "user", parts: [{ type: "text", content: "Where is the harbour?" }] }]) } }] }] }] }],
    });
    const data = ["north", "south"].map((d) => JSON.stringify({ messages: [{ role: "user", content: "Where?" }, { role: "assistant", content: d }] })).join("\n");
    await call(`${s.urls.training}/v1/preview/datasets?project=cli&name=d`, data, "application/jsonl");
    const model = await call(`${s.urls.training}/v1/preview/models`, { project: "cli", name: "m", base_model: "tiny-chat" });
    const job = await call(`${s.urls.training}/v1/preview/sft-training-jobs`, { model_id: model.id, training_data_url: "dataset:///local/cli/d:v0", config: { epochs: 3 } });
    await call(`${s.urls.inference}/v1/chat/completions`, { model: "tiny-chat", messages: [{ role: "user", content: "hi" }], max_tokens: 3 });

    const followed = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(tsx, [cli, "jobs", "follow", job.id, "--data-dir", dataDir], { env });
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      child.on("exit", (code) => resolve({ code, out }));
    });
    expect(followed.code).toBe(0);
    expect(followed.out).toMatch(/training started .*num_sequences 2/);
    expect(followed.out).toMatch(/step 1 +loss \d/);
    expect(followed.out).toContain("job succeeded: checkpoint step 1");

    const found = gyre("search", "harbour", "--project", "local/cli");
    expect(found.stdout).toContain("1 conversation(s)");
    expect(found.stdout).toMatch(/user +Where is the harbour\?/);
    const jobs = gyre("jobs", "list");
    expect(jobs.stdout).toContain(`${job.id}\tsft\tsucceeded`);
    const usage = gyre("usage");
    expect(usage.stdout).toMatch(/^local\/\ttiny-chat\t1\t\d+\t\d+\t\d+$/m);
    expect(await stop(s)).toBe(0);
  }, 300_000);
});
