/**
 * Message search benchmark (run by hand): generates agent conversations, sends them as OTLP protobuf export
 * requests to the search service running in this process, on SQLite and PostgreSQL, and prints ingestion
 * rates, query latencies of the bare database query, and the same requests' latencies through
 * `POST /agents/search` (our HTTP overhead).
 *
 *   npx tsx scripts/bench-search.ts [--messages 1000000] [--dialects sqlite,postgres] [--queries 200] [--concurrency 4]
 *                                   [--ingest http|direct] [--reuse yes] [--kinds "common word,word + filters"]
 *
 * `--ingest direct` stores the batches by calling the capability functions instead of going through HTTP.
 * `--reuse yes` skips generation and ingestion and times the queries on the data of the previous run.
 * `--kinds` times only the query kinds named (as printed), comma-separated.
 *
 * SQLite goes to data/bench-search/; PostgreSQL to the schema bench_search of GYRE_BENCH_POSTGRES_URL
 * (default postgres://postgres@127.0.0.1:5432/test). Both are recreated on each run.
 */
import { rmSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { mulberry32 } from "../src/inference/random.js";
import type { Attributes } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import type { Knex } from "knex";
import { loadConfig } from "../src/config.js";
import { createLogger } from "../src/logging.js";
import { startServer, type RunningServer } from "../src/server.js";
import { openDatabase, type Dialect } from "../src/store/db.js";
import { ingestSpans } from "../src/search/message-store.js";
import type { AttrMap, OtlpSpan } from "../src/search/otlp-types.js";
import { searchMessages, type AgentSearchReq } from "../src/search/search.js";

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i].replace(/^--/, ""), process.argv[i + 1] ?? "");
const TARGET_MESSAGES = Number(args.get("messages") ?? 1_000_000);
const DIALECTS = (args.get("dialects") ?? "sqlite,postgres").split(",") as Dialect[];
const QUERIES = Number(args.get("queries") ?? 200);
const CONCURRENCY = Number(args.get("concurrency") ?? 4);
const REUSE = args.get("reuse") === "yes";
const INGEST = args.get("ingest") ?? "http";
const KINDS = args.has("kinds") ? new Set((args.get("kinds") ?? "").split(",")) : null;
if (INGEST !== "http" && INGEST !== "direct") throw new Error(`--ingest must be http or direct, not '${INGEST}'`);
const BATCH_SPANS = 512; // the OpenTelemetry batch span processor's default export size
// The key the server registers at start belongs to entity `local`, which may only reach its own projects.
const API_KEY = "gyre_bench_search_key";
const PROJECT = "local/bench-search";
const DATA_DIR = path.join("data", "bench-search");
const POSTGRES_URL = process.env.GYRE_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const POSTGRES_SCHEMA = "bench_search";

// ---- deterministic corpus ---------------------------------------------------------------------------------

const prng = mulberry32;

const SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "do", "fe", "gu", "ha", "jo", "bi", "ce", "xu", "wy", "ol", "an", "es", "ir"];
const VOCABULARY = 40_000;
const vocabulary = Array.from({ length: VOCABULARY }, (_, i) => {
  let n = i + SYLLABLES.length;
  let word = "";
  while (n > 0) {
    word = SYLLABLES[n % SYLLABLES.length] + word;
    n = Math.floor(n / SYLLABLES.length);
  }
  return word;
});
// Zipf (s = 1.05): a handful of words are everywhere, most are rare.
const cumulative: number[] = [];
{
  let sum = 0;
  for (let rank = 1; rank <= VOCABULARY; rank++) cumulative.push((sum += 1 / rank ** 1.05));
  for (let i = 0; i < cumulative.length; i++) cumulative[i] /= sum;
}
function zipfWord(random: () => number): string {
  const x = random();
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return vocabulary[lo];
}
const sentence = (random: () => number, length: number) => Array.from({ length }, () => zipfWord(random)).join(" ");

const seedRandom = prng(7);
const SYSTEM_PROMPTS = Array.from({ length: 20 }, () => sentence(seedRandom, 60));
const AGENTS = Array.from({ length: 20 }, (_, i) => `agent-${i}`);
const PROVIDERS = ["openai", "anthropic", "gcp.gemini"];
const MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet", "claude-haiku", "gemini-pro", "gemini-flash"];
const RESOURCE = { "service.name": "bench" };
const SCOPE = { name: "bench", version: "1" };
const START_MS = Date.parse("2026-10-01T00:00:00Z");
const SPAN_OF_DAYS_MS = 30 * 86_400_000;

const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");
const MESSAGES_PER_CONVERSATION = 10;

/**
 * One conversation = one trace of three spans and ten message occurrences: a chat turn (repeated system
 * prompt, user question, answer with a tool call), the tool execution (arguments, a long output), and a
 * second chat turn that resends the system prompt, question and tool result and gets the final answer.
 */
function conversation(index: number): OtlpSpan[] {
  const random = prng(index + 1000);
  const traceId = hex(index + 1, 32);
  const agent = AGENTS[index % AGENTS.length];
  const model = MODELS[index % MODELS.length];
  const provider = PROVIDERS[Math.floor((index % MODELS.length) / 2)];
  const t0 = START_MS + Math.floor(random() * SPAN_OF_DAYS_MS);
  const system = SYSTEM_PROMPTS[Math.floor(random() * SYSTEM_PROMPTS.length)];
  const question = sentence(random, 12 + Math.floor(random() * 30));
  const tool = `tool_${Math.floor(random() * 50)}`;
  const toolArgs = { query: sentence(random, 4) };
  const toolOutput = sentence(random, 100 + Math.floor(random() * 300));
  const common: AttrMap = {
    "gen_ai.provider.name": provider,
    "gen_ai.request.model": model,
    "gen_ai.agent.name": agent,
    "gen_ai.conversation.id": `conv-${index}`,
    "gen_ai.conversation.name": `Conversation ${index}`,
  };
  const span = (n: number, offsetMs: number, name: string, attributes: AttrMap): OtlpSpan => ({
    resource: RESOURCE,
    scope: SCOPE,
    traceId,
    spanId: hex(index * 4 + n + 1, 16),
    parentSpanId: "",
    name,
    kind: 3,
    startTimeUnixNano: BigInt(t0 + offsetMs) * 1_000_000n,
    endTimeUnixNano: BigInt(t0 + offsetMs + 900) * 1_000_000n,
    attributes: { ...common, ...attributes },
    events: [],
    position: { resource: 0, scope: 0, span: n },
  });
  return [
    span(0, 0, `chat ${model}`, {
      "gen_ai.operation.name": "chat",
      "gen_ai.system_instructions": [{ type: "text", content: system }],
      "gen_ai.input.messages": [{ role: "user", parts: [{ type: "text", content: question }] }],
      "gen_ai.output.messages": [
        {
          role: "assistant",
          parts: [
            { type: "text", content: sentence(random, 15) },
            { type: "tool_call", id: "call_1", name: tool, arguments: toolArgs },
          ],
        },
      ],
    }),
    span(1, 1000, `execute_tool ${tool}`, {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": tool,
      "gen_ai.tool.call.arguments": JSON.stringify(toolArgs),
      "gen_ai.tool.call.result": toolOutput,
    }),
    span(2, 2000, `chat ${model}`, {
      "gen_ai.operation.name": "chat",
      "gen_ai.system_instructions": [{ type: "text", content: system }],
      "gen_ai.input.messages": [
        { role: "user", parts: [{ type: "text", content: question }] },
        { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: toolOutput }] },
      ],
      "gen_ai.output.messages": [{ role: "assistant", parts: [{ type: "text", content: sentence(random, 40 + Math.floor(random() * 80)) }] }],
    }),
  ];
}

// ---- OTLP protobuf and HTTP -------------------------------------------------------------------------------

/** The span type the OpenTelemetry SDK hands its exporters, as the OTLP serializer takes it. */
type ReadableSpan = Parameters<typeof ProtobufTraceSerializer.serializeRequest>[0][number];

// Shared by every span so that the serializer groups a batch into one resource and one scope, as an SDK does.
const SDK_RESOURCE = resourceFromAttributes(RESOURCE);
const hrTime = (ns: bigint): [number, number] => [Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n)];

function toReadableSpan(span: OtlpSpan): ReadableSpan {
  const context = { traceId: span.traceId, spanId: span.spanId, traceFlags: 1 };
  return {
    name: span.name,
    kind: span.kind - 1, // the API's SpanKind has no "unspecified", OTLP's does
    spanContext: () => context,
    startTime: hrTime(span.startTimeUnixNano),
    endTime: hrTime(span.endTimeUnixNano),
    duration: hrTime(span.endTimeUnixNano - span.startTimeUnixNano),
    ended: true,
    status: { code: 0 },
    // GenAI messages are structured attributes; the serializer writes objects as key-value lists, which the API's
    // Attributes type does not describe.
    attributes: span.attributes as unknown as Attributes,
    links: [],
    events: [],
    resource: SDK_RESOURCE,
    instrumentationScope: SCOPE,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

/** The bytes an OTLP/HTTP protobuf exporter would send for this batch. */
function encodeBatch(batch: OtlpSpan[]): Uint8Array {
  const bytes = ProtobufTraceSerializer.serializeRequest(batch.map(toReadableSpan));
  if (!bytes) throw new Error("the OTLP serializer produced no request");
  return bytes;
}

interface Reply {
  status: number;
  body: Buffer;
}

/** Posts to the search service over keep-alive connections, at most CONCURRENCY of them. */
function searchClient(baseUrl: string): { post(route: string, body: Uint8Array | string, headers: http.OutgoingHttpHeaders): Promise<Reply>; close(): void } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const base = new URL(baseUrl);
  return {
    post(route, body, headers) {
      return new Promise((resolve, reject) => {
        const request = http.request(
          {
            agent,
            host: base.hostname,
            port: base.port,
            method: "POST",
            path: route,
            headers: { authorization: `Bearer ${API_KEY}`, "content-length": Buffer.byteLength(body), ...headers },
          },
          (response) => {
            const chunks: Buffer[] = [];
            response.on("data", (chunk: Buffer) => chunks.push(chunk));
            response.on("end", () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks) }));
            response.on("error", reject);
          },
        );
        request.on("error", reject);
        request.end(body);
      });
    },
    close: () => agent.destroy(),
  };
}
type SearchClient = ReturnType<typeof searchClient>;

// ---- measurement ------------------------------------------------------------------------------------------

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Removes the previous run's store, so that the server starts on an empty one. */
async function removeStore(dialect: Dialect): Promise<void> {
  rmSync(DATA_DIR, { recursive: true, force: true });
  if (dialect === "postgres") {
    const admin = await openDatabase({ dataDir: DATA_DIR, url: POSTGRES_URL, schema: POSTGRES_SCHEMA });
    await admin.raw("DROP SCHEMA ?? CASCADE", [POSTGRES_SCHEMA]);
    await admin.destroy();
  }
}

/** The search service alone, in this process, on the store the direct measurements also use. */
function startSearchService(dialect: Dialect): Promise<RunningServer> {
  const config = loadConfig(
    { searchPort: "0", dataDir: DATA_DIR, services: "search", ...(dialect === "postgres" ? { databaseUrl: POSTGRES_URL } : {}) },
    { GYRE_API_KEY: API_KEY, GYRE_WORKER: "off" },
  );
  return startServer(config, createLogger("silent"), { databaseSchema: dialect === "postgres" ? POSTGRES_SCHEMA : undefined });
}

/** Batches of BATCH_SPANS spans, as an exporter sends them. */
function* batches(conversations: number): Generator<OtlpSpan[]> {
  let batch: OtlpSpan[] = [];
  for (let i = 0; i < conversations; i++) {
    batch.push(...conversation(i));
    if (batch.length >= BATCH_SPANS) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/** How one batch is stored: prepared ahead of the clock, then sent; `send` answers the spans stored. */
interface Ingestor<Payload> {
  prepare(batch: OtlpSpan[]): Payload;
  send(payload: Payload): Promise<number>;
}

function httpIngestor(client: SearchClient): Ingestor<{ bytes: Uint8Array; spans: number }> {
  return {
    prepare: (batch) => ({ bytes: encodeBatch(batch), spans: batch.length }),
    async send({ bytes, spans }) {
      const reply = await client.post("/agents/otel/v1/traces", bytes, { "content-type": "application/x-protobuf", project_id: PROJECT });
      if (reply.status !== 200) throw new Error(`export answered ${reply.status}: ${reply.body.toString("utf8")}`);
      const rejected = Number(ProtobufTraceSerializer.deserializeResponse(reply.body).partialSuccess?.rejectedSpans ?? 0);
      return spans - rejected;
    },
  };
}

function directIngestor(db: Knex): Ingestor<OtlpSpan[]> {
  return {
    prepare: (batch) => batch,
    send: async (batch) => (await ingestSpans(db, batch, { project: PROJECT })).accepted,
  };
}

/** Batches generated (and encoded) ahead of the clock, so that the rate is the server's and not the generator's. */
const BATCHES_PER_ROUND = 64;

/** Ingests with CONCURRENCY export requests in flight, like several exporters would. */
async function ingest<Payload>(db: Knex, ingestor: Ingestor<Payload>, conversations: number): Promise<void> {
  let spans = 0;
  let seconds = 0;
  const source = batches(conversations);
  for (;;) {
    const round: Payload[] = [];
    while (round.length < BATCHES_PER_ROUND) {
      const next = source.next();
      if (next.done) break;
      round.push(ingestor.prepare(next.value));
    }
    if (round.length === 0) break;
    const started = performance.now();
    const worker = async () => {
      for (let payload = round.shift(); payload !== undefined; payload = round.shift()) {
        // Not `spans += await …`: that reads `spans` before the wait and loses the other workers' counts.
        const stored = await ingestor.send(payload);
        spans += stored;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    seconds += (performance.now() - started) / 1000;
    process.stdout.write(`  ${spans} spans, ${Math.round(spans / seconds)} spans/s\r`);
  }
  // The store is fresh, so every message row is this run's.
  const [{ n }] = await db("search_messages").count({ n: "*" });
  const messages = Number(n);
  console.log(
    `  ingestion (${INGEST}): ${spans} spans, ${messages} messages in ${seconds.toFixed(1)} s = ${Math.round(spans / seconds)} spans/s, ${Math.round(messages / seconds)} messages/s`,
  );
}

function queryKinds(conversations: number): [string, (random: () => number) => Omit<AgentSearchReq, "project_id">][] {
  const pick = <T>(random: () => number, list: T[]) => list[Math.floor(random() * list.length)];
  return [
    ["rare word", (r) => ({ query: vocabulary[5000 + Math.floor(r() * 20000)] })],
    ["common word", (r) => ({ query: vocabulary[Math.floor(r() * 10)] })],
    ["two-word phrase", (r) => {
      const words = sentence(prng(Math.floor(r() * conversations) + 1000), 14).split(" ");
      const at = Math.floor(r() * (words.length - 1));
      return { query: `"${words[at]} ${words[at + 1]}"` };
    }],
    ["word + filters", (r) => ({ query: vocabulary[Math.floor(r() * 200)], agent_name: pick(r, AGENTS), roles: ["user", "assistant"] })],
    ["trace_id", (r) => ({ trace_id: hex(Math.floor(r() * conversations) + 1, 32), truncate_content: false })],
    ["filters alone", (r) => ({ agent_name: pick(r, AGENTS), roles: ["user"], request_model: pick(r, MODELS) })],
  ];
}

const milliseconds = (sorted: number[], p: number) => percentile(sorted, p).toFixed(1).padStart(7);

/**
 * Times each request as a bare database query and as `POST /agents/search`, alternating which goes first so
 * that neither always meets the other's warm cache; both must find the same conversations.
 */
async function measureQueries(db: Knex, client: SearchClient, conversations: number): Promise<void> {
  console.log(`  ${"query".padEnd(16)}  ${"direct p50".padStart(10)} ${"p99".padStart(7)}   ${"http p50".padStart(10)} ${"p99".padStart(7)}   http/direct p50   conversations`);
  for (const [kind, make] of queryKinds(conversations)) {
    if (KINDS !== null && !KINDS.has(kind)) continue;
    const random = prng(kind.length * 31);
    const direct: number[] = [];
    const overHttp: number[] = [];
    let hits = 0;
    for (let i = 0; i < QUERIES; i++) {
      const request: AgentSearchReq = { project_id: PROJECT, ...make(random) };
      const body = JSON.stringify(request);
      const timeDirect = async () => {
        const t = performance.now();
        const res = await searchMessages(db, request);
        direct.push(performance.now() - t);
        return res.total_conversations ?? 0;
      };
      const timeHttp = async () => {
        const t = performance.now();
        const reply = await client.post("/agents/search", body, { "content-type": "application/json" });
        overHttp.push(performance.now() - t);
        if (reply.status !== 200) throw new Error(`search answered ${reply.status}: ${reply.body.toString("utf8")}`);
        return (JSON.parse(reply.body.toString("utf8")) as { total_conversations: number }).total_conversations;
      };
      const [a, b] = i % 2 === 0 ? [await timeDirect(), await timeHttp()] : [await timeHttp(), await timeDirect()];
      if (a !== b) throw new Error(`${kind}: the database found ${i % 2 === 0 ? a : b} conversations, HTTP ${i % 2 === 0 ? b : a} for ${body}`);
      hits += a;
    }
    direct.sort((x, y) => x - y);
    overHttp.sort((x, y) => x - y);
    const ratio = percentile(overHttp, 50) / percentile(direct, 50);
    console.log(
      `  ${kind.padEnd(16)}  ${milliseconds(direct, 50)} ms ${milliseconds(direct, 99)} ms  ${milliseconds(overHttp, 50)} ms ${milliseconds(overHttp, 99)} ms   ${ratio.toFixed(2).padStart(15)}   ${String(Math.round(hits / QUERIES)).padStart(13)}`,
    );
  }
}

const conversations = Math.ceil(TARGET_MESSAGES / MESSAGES_PER_CONVERSATION);
for (const dialect of DIALECTS) {
  console.log(`${dialect}: ${conversations} conversations, ~${conversations * MESSAGES_PER_CONVERSATION} message occurrences`);
  if (!REUSE) await removeStore(dialect);
  const server = await startSearchService(dialect);
  const client = searchClient(server.urls.search ?? "");
  try {
    if (!REUSE && INGEST === "http") await ingest(server.db, httpIngestor(client), conversations);
    if (!REUSE && INGEST === "direct") await ingest(server.db, directIngestor(server.db), conversations);
    // Fresh statistics (and, on PostgreSQL, the visibility map that index-only scans need), as a running
    // server gets from autovacuum or SQLite's optimize.
    await server.db.raw(dialect === "postgres" ? "VACUUM ANALYZE" : "ANALYZE");
    await measureQueries(server.db, client, conversations);
  } finally {
    client.close();
    await server.close();
  }
}
