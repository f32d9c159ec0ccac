/**
 * Message search benchmark (run by hand): generates agent conversations, ingests them through the capability
 * functions (no HTTP) into SQLite and PostgreSQL, and prints ingestion rates and query latencies.
 *
 *   npx tsx scripts/bench-search.ts [--messages 1000000] [--dialects sqlite,postgres] [--queries 200] [--concurrency 4] [--reuse yes]
 *
 * `--reuse yes` skips generation and ingestion and times the queries on the data of the previous run.
 *
 * SQLite goes to data/bench-search/; PostgreSQL to the schema bench_search of GYRE_BENCH_POSTGRES_URL
 * (default postgres://postgres@127.0.0.1:5432/test). Both are recreated on each run.
 */
import { rmSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import type { Knex } from "knex";
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
const BATCH_SPANS = 512; // the OpenTelemetry batch span processor's default export size
const PROJECT = "bench/search";
const POSTGRES_URL = process.env.GYRE_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";

// ---- deterministic corpus ---------------------------------------------------------------------------------

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
    resource: { "service.name": "bench" },
    scope: { name: "bench", version: "1" },
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

// ---- measurement ------------------------------------------------------------------------------------------

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function open(dialect: Dialect): Promise<Knex> {
  const dataDir = path.join("data", "bench-search");
  if (dialect === "sqlite") {
    if (!REUSE) rmSync(dataDir, { recursive: true, force: true });
    return openDatabase({ dataDir });
  }
  if (!REUSE) {
    const admin = await openDatabase({ dataDir, url: POSTGRES_URL, schema: "bench_search" });
    await admin.raw("DROP SCHEMA bench_search CASCADE");
    await admin.destroy();
  }
  return openDatabase({ dataDir, url: POSTGRES_URL, schema: "bench_search" });
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

/** Batches generated ahead of the clock, so that the rate is the store's and not the corpus generator's. */
const BATCHES_PER_ROUND = 64;

/** Ingests with CONCURRENCY export requests in flight, like several exporters (or one HTTP server) would. */
async function ingest(db: Knex, conversations: number): Promise<void> {
  let spans = 0;
  let messages = 0;
  let seconds = 0;
  const source = batches(conversations);
  for (;;) {
    const round: OtlpSpan[][] = [];
    while (round.length < BATCHES_PER_ROUND) {
      const next = source.next();
      if (next.done) break;
      round.push(next.value);
    }
    if (round.length === 0) break;
    const started = performance.now();
    const worker = async () => {
      for (let batch = round.shift(); batch !== undefined; batch = round.shift()) {
        const result = await ingestSpans(db, batch, { project: PROJECT });
        spans += result.accepted;
        messages += result.messages;
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    seconds += (performance.now() - started) / 1000;
    process.stdout.write(`  ${spans} spans, ${Math.round(spans / seconds)} spans/s\r`);
  }
  console.log(`  ingestion: ${spans} spans, ${messages} messages in ${seconds.toFixed(1)} s = ${Math.round(spans / seconds)} spans/s, ${Math.round(messages / seconds)} messages/s`);
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

async function measureQueries(db: Knex, conversations: number): Promise<void> {
  for (const [kind, make] of queryKinds(conversations)) {
    const random = prng(kind.length * 31);
    const times: number[] = [];
    let hits = 0;
    for (let i = 0; i < QUERIES; i++) {
      const req = { project_id: PROJECT, ...make(random) };
      const t = performance.now();
      const res = await searchMessages(db, req);
      times.push(performance.now() - t);
      hits += res.total_conversations;
    }
    times.sort((a, b) => a - b);
    console.log(
      `  ${kind.padEnd(16)} p50 ${percentile(times, 50).toFixed(1).padStart(7)} ms   p99 ${percentile(times, 99).toFixed(1).padStart(7)} ms   mean conversations ${Math.round(hits / QUERIES)}`,
    );
  }
}

const conversations = Math.ceil(TARGET_MESSAGES / MESSAGES_PER_CONVERSATION);
for (const dialect of DIALECTS) {
  console.log(`${dialect}: ${conversations} conversations, ~${conversations * MESSAGES_PER_CONVERSATION} message occurrences`);
  const db = await open(dialect);
  if (!REUSE) await ingest(db, conversations);
  // Fresh statistics (and, on PostgreSQL, the visibility map that index-only scans need), as a running
  // server gets from autovacuum or SQLite's optimize.
  await db.raw(dialect === "postgres" ? "VACUUM ANALYZE" : "ANALYZE");
  await measureQueries(db, conversations);
  await db.destroy();
}
