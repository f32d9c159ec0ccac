// Trainer throughput, by hand: npx tsx scripts/bench-trainer.ts [--presets tiny,25m] [--batch 8] [--seq 128] [--steps 4] [--torch-threads 1]
// For each preset it builds the built-in llama model, runs SFT and RL steps of the tfjs trainer (each in its own
// process, so peak memory is per run) and the same shapes in PyTorch on the CPU (scripts/bench-trainer-torch.py,
// Debian's python3-torch), and prints tokens/s side by side with the ratio ours/PyTorch and peak resident memory.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { TINY_PRESETS, buildTinyModel, type TinyPreset } from "../src/inference/tiny-model.js";
import { trainRl, trainSft, type StepMetrics, type TrajectoryGroup } from "../src/training/trainer/index.js";
import type { SftExample } from "../src/training/trainer/index.js";

const { values } = parseArgs({
  options: {
    presets: { type: "string", default: "tiny,25m" },
    batch: { type: "string", default: "8" },
    seq: { type: "string", default: "128" },
    steps: { type: "string", default: "4" },
    "torch-threads": { type: "string", default: "1" },
    python: { type: "string", default: "/usr/bin/python3" },
    // Internal: run one measurement in this process.
    run: { type: "string" },
    model: { type: "string" },
  },
});

const batch = Number(values.batch);
const seqLen = Number(values.seq);
const steps = Number(values.steps);

const WORDS = "the a lighthouse keeper door green step lamp sea wind boat night light old stone tower rope bell harbour".split(" ");
function text(words: number, seed: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(WORDS[(seed * 7 + i * 13 + ((i * i) % 5)) % WORDS.length]);
  return out.join(" ");
}

/** Conversations of about seqLen tokens, half of them the trained answer. */
function examples(n: number, seed: number): SftExample[] {
  return Array.from({ length: n }, (_, i) => ({
    messages: [
      // This vocabulary spends about 2.8 tokens per word here; the template adds ~10 tokens.
      { role: "user" as const, content: text(Math.max(1, Math.round((seqLen - 10) / 5.6)), seed + i) },
      { role: "assistant" as const, content: text(Math.max(1, Math.round((seqLen - 10) / 5.6)), seed + i + 100) },
    ],
  }));
}

function answer(ex: SftExample): string {
  const content = ex.messages[1].content;
  return typeof content === "string" ? content : "";
}

async function measure(mode: "sft" | "rl", model: string): Promise<void> {
  let peak = 0;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  const metrics: StepMetrics[] = [];
  const out = path.join(path.dirname(model), `bench-${mode}.lora.gguf`);
  const common = { learning_rate: 1e-4, batch_size: batch, lora_rank: 8, lora_alpha: 16, max_seq_length: 4 * seqLen };
  if (mode === "sft") {
    await trainSft(
      { baseModelPath: model, outputPath: out, examples: examples(batch * (steps + 1), 1), config: {}, experimentalConfig: common },
      (m) => void metrics.push(m),
    );
  } else {
    const groups: TrajectoryGroup[] = [];
    const all = examples(batch * (steps + 1), 2);
    for (let g = 0; g < all.length / 4; g++) {
      groups.push({
        trajectories: all.slice(g * 4, g * 4 + 4).map((ex, k) => ({
          messages_and_choices: [ex.messages[0], { index: 0, finish_reason: "stop", message: { role: "assistant", content: answer(ex) } }],
          reward: k,
        })),
      });
    }
    await trainRl(
      { baseModelPath: model, outputPath: out, groups, experimentalConfig: { ...common, allow_training_without_logprobs: true } },
      (m) => void metrics.push(m),
    );
  }
  clearInterval(timer);
  if (metrics.length < 2) throw new Error(`the ${mode} run made ${metrics.length} steps; need at least 2`);
  // The first step pays for kernel set-up and weight packing; the median of the rest is the steady rate.
  const rates = metrics.slice(1).map((m) => m.tokens_per_second).sort((a, b) => a - b);
  const tokens = metrics.reduce((n, m) => n + m.num_tokens, 0) / metrics.reduce((n, m) => n + (m.num_sequences ?? 1), 0);
  console.log(JSON.stringify({ tokens_per_second: rates[Math.floor(rates.length / 2)], peak_rss_mb: peak / 2 ** 20, mean_seq_tokens: tokens }));
}

function runJson(cmd: string, args: string[]): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const line = stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
      if (code !== 0 || !line) reject(new Error(`${cmd} ${args.join(" ")} failed (${code}): ${stdout}`));
      else resolve(JSON.parse(line) as Record<string, number>);
    });
  });
}

async function main(): Promise<void> {
  if (values.run) return measure(values.run as "sft" | "rl", values.model!);
  const dir = path.resolve("data/bench-trainer");
  await mkdir(dir, { recursive: true });
  const rows: string[] = [];
  for (const preset of values.presets!.split(",") as TinyPreset[]) {
    const model = path.join(dir, `${preset}-llama.gguf`);
    if (!existsSync(model)) await buildTinyModel({ outPath: model, arch: "llama", preset, seed: 1 });
    const shape = TINY_PRESETS[preset];
    for (const mode of ["sft", "rl"] as const) {
      const ours = await runJson(process.execPath, [
        "--import", "tsx", "scripts/bench-trainer.ts", "--run", mode, "--model", model,
        "--batch", String(batch), "--seq", String(seqLen), "--steps", String(steps),
      ]);
      const torch = await runJson(values.python!, [
        "scripts/bench-trainer-torch.py", "--mode", mode, "--vocab", "1050",
        "--embd", String(shape.nEmbd), "--layers", String(shape.nLayer), "--heads", String(shape.nHead),
        "--kv-heads", String(shape.nHeadKv), "--ff", String(shape.nFf), "--rank", "8", "--alpha", "16",
        "--batch", String(batch), "--seq", String(Math.round(ours.mean_seq_tokens)), "--steps", String(steps),
        "--threads", values["torch-threads"]!,
      ]);
      rows.push(
        [preset, mode, Math.round(ours.mean_seq_tokens), ours.tokens_per_second.toFixed(0), torch.tokens_per_second.toFixed(0),
          (ours.tokens_per_second / torch.tokens_per_second).toFixed(2), ours.peak_rss_mb.toFixed(0), torch.peak_rss_mb.toFixed(0)].join("\t"),
      );
      console.log(rows[rows.length - 1]);
    }
  }
  console.log(["\nmodel", "mode", "seq", "tfjs tok/s", "torch tok/s", "ratio", "tfjs MB", "torch MB"].join("\t"));
  for (const r of rows) console.log(r);
}

await main();
