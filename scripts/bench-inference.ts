/**
 * Inference benchmark (run by hand): decode speed and time to first token of the chat-completions service.
 *
 *   npx tsx scripts/bench-inference.ts [--models tiny,100m,100m-f32] [--tokens 128] [--requests 8] [--repeats 3] [--threads N] [--parallel 8]
 *
 * For each model (the built-in tiny model, a ~100M-parameter qwen3 model in F16 and the same in F32, built into
 * data/bench-inference/ when missing) it prints:
 *  1. single-stream decode tokens/s three ways on the same context settings: node-llama-cpp called directly (a sequence
 *     `evaluate` loop), our engine called directly (`LlamaEngine.stream`, no HTTP), and the server over HTTP with SSE;
 *     the runs are interleaved so load from other work on the machine hits all three alike;
 *  2. aggregate tokens/s with 1, 4 and 8 streams in flight, over HTTP on a server that decodes `--parallel` sequences in
 *     one batch, and side by side with plain node-llama-cpp evaluate loops on as many sequences of one context (what
 *     llama.cpp's batching itself gives on this machine);
 *  3. time to first token (request start to first content chunk) p50/p99 over HTTP at each of those loads.
 *
 * Sampling is greedy, so the three single-stream paths decode the same tokens from the same prompt; those runs use
 * prompts whose completion runs the full `--tokens` (node-llama-cpp ignores a bias on end-of-generation tokens, so the
 * length cannot be forced). Under load every request has a fresh prompt and the actual tokens are counted. Decode rate
 * is (tokens - 1) / (end - first token), so prompt processing is left out. Figures are medians over the repeats; the
 * server runs in this process on a free loopback port.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Worker } from "node:worker_threads";
import { getLlama, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel, type Token } from "node-llama-cpp";
import { loadConfig } from "../src/config.js";
import { renderChat } from "../src/inference/chat-render.js";
import { LlamaEngine } from "../src/inference/llama-engine.js";
import { GgmlType } from "../src/gguf/types.js";
import type { GgufWritableType } from "../src/gguf/writer.js";
import { buildTinyModel, type TinyArch, type TinyPreset } from "../src/inference/tiny-model.js";
import type { ChatCompletionRequest } from "../src/inference/types.js";
import { createLogger } from "../src/logging.js";
import { startServer, type RunningServer } from "../src/server.js";

const { values: args } = parseArgs({
  options: {
    models: { type: "string", default: "tiny,100m,100m-f32" },
    tokens: { type: "string", default: "128" },
    requests: { type: "string", default: "8" },
    repeats: { type: "string", default: "3" },
    threads: { type: "string", default: String(loadConfig({}, {}).threads) },
    parallel: { type: "string", default: "8" },
  },
});
const TOKENS = positive(args.tokens, "tokens");
const REQUESTS = positive(args.requests, "requests");
const REPEATS = positive(args.repeats, "repeats");
const THREADS = positive(args.threads, "threads");
const PARALLEL = positive(args.parallel, "parallel");
const LOADS = [1, 4, 8];
const BENCH_DIR = path.resolve("data/bench-inference");
const API_KEY = "gyre_bench_inference_key";

interface BenchModel {
  file: string;
  arch: TinyArch;
  preset: TinyPreset;
  weightType?: GgufWritableType;
}
const MODELS: Record<string, BenchModel> = {
  tiny: { file: "tiny-llama.gguf", arch: "llama", preset: "tiny" },
  // F16, 205 MB: fits in the last-level cache of some server CPUs.
  "100m": { file: "100m-qwen3.gguf", arch: "qwen3", preset: "100m" },
  // F32, 410 MB: larger than those caches, so every token reads the weights from memory, as real models do.
  "100m-f32": { file: "100m-qwen3-f32.gguf", arch: "qwen3", preset: "100m", weightType: GgmlType.F32 },
};

function positive(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, not '${value}'`);
  return n;
}

// ---- measurements ---------------------------------------------------------------------------------------------

/** One generation's clock readings (ms, performance.now()) and the tokens it decoded. */
interface Generation {
  start: number;
  firstToken: number;
  end: number;
  tokens: number;
}

const decodeRate = (g: Generation): number => (g.tokens - 1) / ((g.end - g.firstToken) / 1000);
const ttft = (g: Generation): number => g.firstToken - g.start;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Nearest-rank percentile. */
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

function userMessage(i: number): string {
  return `Request ${i}: write a long story about a lighthouse keeper who collects the names of passing ships, and keep going.`;
}

// ---- the three ways to decode ---------------------------------------------------------------------------------

/** Plain node-llama-cpp: `evaluate` loops on sequences of a context with the engine's settings, fed the same prompt tokens. */
class DirectDecoder {
  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly free: LlamaContextSequence[],
    private readonly template: string,
  ) {}

  static async load(llama: Llama, modelPath: string, contextSize: number, template: string): Promise<DirectDecoder> {
    const model = await llama.loadModel({ modelPath });
    const context = await model.createContext({ contextSize, sequences: PARALLEL, threads: THREADS });
    return new DirectDecoder(model, context, Array.from({ length: PARALLEL }, () => context.getSequence()), template);
  }

  /** The prompt exactly as the engine tokenizes it, so greedy decoding yields the same tokens on every path. */
  private promptTokens(i: number): Token[] {
    const text = renderChat(this.template, {
      messages: [{ role: "user", content: userMessage(i) }],
      addGenerationPrompt: true,
      bosToken: this.model.tokens.bosString ?? "",
      eosToken: this.model.tokens.eosString ?? "",
    });
    const tokens = this.model.tokenize(text, true);
    const bos = this.model.tokens.bos;
    if (this.model.tokens.shouldPrependBosToken && bos !== null && tokens[0] !== bos) tokens.unshift(bos);
    return tokens;
  }

  /** One generation on a free sequence; up to PARALLEL run at once, decoded in shared batches. */
  async run(i: number): Promise<Generation> {
    const sequence = this.free.pop();
    if (!sequence) throw new Error("more direct generations in flight than sequences");
    try {
      const start = performance.now();
      await sequence.clearHistory();
      let firstToken = 0;
      let tokens = 0;
      for await (const token of sequence.evaluate(this.promptTokens(i), { temperature: 0, yieldEogToken: true })) {
        if (tokens++ === 0) firstToken = performance.now();
        if (this.model.isEogToken(token) || tokens >= TOKENS) break;
        // Detokenizing each token is work any streaming caller does; it keeps the baseline honest.
        this.model.detokenize([token]);
      }
      return { start, firstToken, end: performance.now(), tokens };
    } finally {
      this.free.push(sequence);
    }
  }

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}

function chatRequest(model: string, i: number): ChatCompletionRequest {
  return {
    model,
    messages: [{ role: "user", content: userMessage(i) }],
    max_tokens: TOKENS,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  };
}

/** Our engine without HTTP: the chunk stream the server serialises. */
async function engineRun(engine: LlamaEngine, request: ChatCompletionRequest): Promise<Generation> {
  const start = performance.now();
  let firstToken = 0;
  let tokens = 0;
  for await (const chunk of engine.stream(request)) {
    if (!firstToken && chunk.choices[0]?.delta.content) firstToken = performance.now();
    if (chunk.usage) tokens = chunk.usage.completion_tokens;
  }
  return { start, firstToken, end: performance.now(), tokens };
}

type ClientAnswer = { id: number; generation: Generation } | { id: number; error: string };

/** Streamed completions over HTTP, sent and read as SSE by a client on its own thread (scripts/lib/sse-client-worker.mjs). */
class HttpClient {
  private readonly worker = new Worker(new URL("./lib/sse-client-worker.mjs", import.meta.url));
  private readonly pending = new Map<number, { resolve: (g: Generation) => void; reject: (err: Error) => void }>();
  private nextId = 0;

  constructor(private readonly url: string) {
    this.worker.on("message", (answer: ClientAnswer) => {
      const waiter = this.pending.get(answer.id);
      this.pending.delete(answer.id);
      if ("error" in answer) waiter?.reject(new Error(answer.error));
      else waiter?.resolve(answer.generation);
    });
  }

  run(request: ChatCompletionRequest): Promise<Generation> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, url: this.url, apiKey: API_KEY, request });
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

// ---- setup ----------------------------------------------------------------------------------------------------

async function ensureModel(name: string): Promise<string> {
  const spec = MODELS[name];
  if (!spec) throw new Error(`unknown model '${name}'; expected ${Object.keys(MODELS).join(", ")}`);
  const file = path.join(BENCH_DIR, spec.file);
  if (!existsSync(file)) {
    console.log(`building ${file} …`);
    await buildTinyModel({ outPath: file, arch: spec.arch, preset: spec.preset, weightType: spec.weightType, seed: 42 });
  }
  return file;
}

async function startBenchServer(modelName: string, modelPath: string): Promise<{ server: RunningServer; url: string; dataDir: string }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "gyre-bench-inference-"));
  const modelsDir = path.join(dataDir, "models");
  mkdirSync(modelsDir);
  symlinkSync(modelPath, path.join(modelsDir, `${modelName}.gguf`));
  const config = loadConfig(
    { services: "inference", inferencePort: "0", host: "127.0.0.1", dataDir, parallel: String(PARALLEL), threads: String(THREADS), worker: "off" },
    { GYRE_API_KEY: API_KEY, GYRE_MODELS_DIR: modelsDir },
  );
  const server = await startServer(config, createLogger("silent"));
  const url = server.urls.inference;
  if (!url) throw new Error("the inference service did not start");
  return { server, url, dataDir };
}

/** `streams` clients each keep one generation in flight until `requests` have been started. */
async function underLoad(streams: number, requests: number, run: () => Promise<Generation>): Promise<{ list: Generation[]; seconds: number }> {
  const list: Generation[] = [];
  let sent = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: streams }, async () => {
      while (sent < requests) {
        sent++;
        list.push(await run());
      }
    }),
  );
  return { list, seconds: (performance.now() - started) / 1000 };
}

// ---- report ---------------------------------------------------------------------------------------------------

const fmt = (n: number, digits = 1): string => n.toFixed(digits);
const pad = (s: string, width: number): string => s.padStart(width);
const loadAverage = (): string => os.loadavg().map((l) => l.toFixed(2)).join(" ");

function table(header: string[], rows: string[][]): void {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
  const line = (cells: string[]): string => "  " + cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : pad(cell, widths[c]))).join("  ");
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}

/**
 * Prompts whose greedy completion runs the full `--tokens` (a random-weight model sometimes picks an end token early),
 * found with the direct decoder; this also warms it up.
 */
async function fullLengthPrompts(direct: DirectDecoder, count: number): Promise<number[]> {
  const found: number[] = [];
  for (let i = 0; i < 20 * count && found.length < count; i++) {
    if ((await direct.run(i)).tokens === TOKENS) found.push(i);
  }
  if (found.length < count) throw new Error(`only ${found.length} of ${20 * count} prompts decode ${TOKENS} tokens; try fewer --tokens`);
  return found;
}

async function benchModel(llama: Llama, name: string): Promise<void> {
  const modelPath = await ensureModel(name);
  const engine = await LlamaEngine.load({ modelPath, parallel: PARALLEL, threads: THREADS, llama });
  const direct = await DirectDecoder.load(llama, modelPath, engine.info.contextSize, engine.template);
  const { server, url, dataDir } = await startBenchServer(name, modelPath);
  const client = new HttpClient(url);
  try {
    console.log(
      `\n== ${name}: ${engine.info.architecture}, ${(engine.info.parameters / 1e6).toFixed(1)}M parameters, ` +
        `context ${engine.info.contextSize} x ${PARALLEL} sequences, ${THREADS} thread(s), up to ${TOKENS} tokens per generation`,
    );

    const singleRuns = Math.max(REPEATS, 5);
    const prompts = await fullLengthPrompts(direct, singleRuns);
    // Warm-up: loads the server's engine and builds what the engine builds on first use.
    await engineRun(engine, chatRequest(name, prompts[0]));
    await client.run(chatRequest(name, prompts[0]));

    const paths: [string, (i: number) => Promise<Generation>][] = [
      ["node-llama-cpp direct", (i) => direct.run(i)],
      ["engine direct (no HTTP)", (i) => engineRun(engine, chatRequest(name, i))],
      ["HTTP + SSE", (i) => client.run(chatRequest(name, i))],
    ];
    const single = new Map<string, Generation[]>(paths.map(([label]) => [label, []]));
    for (let r = 0; r < singleRuns; r++) {
      // Rotating the order spreads any drift in machine load evenly over the three paths.
      for (let k = 0; k < paths.length; k++) {
        const [label, run] = paths[(r + k) % paths.length];
        const g = await run(prompts[r]);
        if (g.tokens !== TOKENS) throw new Error(`${label} decoded ${g.tokens} tokens of prompt ${prompts[r]}, expected ${TOKENS}`);
        single.get(label)?.push(g);
      }
    }
    const baseline = median((single.get(paths[0][0]) ?? []).map(decodeRate));
    console.log(`\n  single stream, ${TOKENS} tokens, median of ${singleRuns} interleaved runs`);
    table(
      ["path", "decode tok/s", "vs direct", "TTFT ms"],
      paths.map(([label]) => {
        const gens = single.get(label) ?? [];
        const rate = median(gens.map(decodeRate));
        return [label, fmt(rate), fmt(rate / baseline, 3), fmt(median(gens.map(ttft)))];
      }),
    );

    // Fresh prompts from here on, so no request finds its prompt already cached in a sequence.
    let nextPrompt = 1000;
    const loadPaths: [string, (i: number) => Promise<Generation>][] = [
      ["node-llama-cpp", (i) => direct.run(i)],
      ["HTTP", (i) => client.run(chatRequest(name, i))],
    ];
    const results = new Map<string, { rates: number[]; firsts: number[]; tokens: number; generations: number }>();
    for (const streams of LOADS) {
      for (let r = 0; r < REPEATS; r++) {
        for (let k = 0; k < loadPaths.length; k++) {
          const [label, run] = loadPaths[(r + k) % loadPaths.length];
          const gens = await underLoad(streams, Math.max(REQUESTS, streams), () => run(nextPrompt++));
          const result = results.get(`${label}/${streams}`) ?? { rates: [], firsts: [], tokens: 0, generations: 0 };
          results.set(`${label}/${streams}`, result);
          const decoded = gens.list.reduce((s, g) => s + g.tokens, 0);
          result.rates.push(decoded / gens.seconds);
          result.firsts.push(...gens.list.map(ttft));
          result.tokens += decoded;
          result.generations += gens.list.length;
        }
      }
    }
    const rate = (label: string, streams: number): number => median(results.get(`${label}/${streams}`)?.rates ?? []);
    console.log(
      `\n  load: ${REQUESTS} requests per level (at least one per stream), median of ${REPEATS} repeats; ` +
        "node-llama-cpp = plain evaluate loops on the sequences of one context, HTTP = the server (SSE)",
    );
    table(
      ["streams", "node-llama-cpp tok/s", "vs 1", "HTTP tok/s", "vs 1", "HTTP/library", "TTFT p50 ms", "TTFT p99 ms", "tokens/gen", "samples"],
      LOADS.map((streams) => {
        const http = results.get(`HTTP/${streams}`) ?? { rates: [], firsts: [], tokens: 0, generations: 1 };
        return [
          String(streams),
          fmt(rate("node-llama-cpp", streams)),
          `${fmt(rate("node-llama-cpp", streams) / rate("node-llama-cpp", 1), 2)}x`,
          fmt(rate("HTTP", streams)),
          `${fmt(rate("HTTP", streams) / rate("HTTP", 1), 2)}x`,
          fmt(rate("HTTP", streams) / rate("node-llama-cpp", streams), 2),
          fmt(percentile(http.firsts, 50)),
          fmt(percentile(http.firsts, 99)),
          fmt(http.tokens / http.generations, 0),
          String(http.firsts.length),
        ];
      }),
    );
  } finally {
    await client.close();
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
    await direct.close();
    await engine.close();
  }
}

mkdirSync(BENCH_DIR, { recursive: true });
console.log(`inference benchmark: ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "unknown"}), node ${process.version}`);
console.log(`load average at start: ${loadAverage()}`);
const llama = await getLlama({ gpu: false });
try {
  for (const name of args.models.split(",").map((m) => m.trim()).filter(Boolean)) await benchModel(llama, name);
} finally {
  await llama.dispose();
}
console.log(`\nload average at end: ${loadAverage()}`);
console.log("targets: HTTP/direct decode >= 0.90; 8 streams >= 3x one stream");
