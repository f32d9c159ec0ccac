// Builds the random-initialised GGUF chat model: npx tsx scripts/build-tiny-model.ts --out data/models/tiny.gguf [--arch llama|qwen2|qwen3] [--preset tiny|25m|100m] [--seed 42]
import { parseArgs } from "node:util";
import { buildTinyModel, type TinyArch, type TinyPreset } from "../src/inference/tiny-model.js";

const { values } = parseArgs({
  options: {
    out: { type: "string", default: "data/models/tiny.gguf" },
    arch: { type: "string", default: "llama" },
    preset: { type: "string", default: "tiny" },
    seed: { type: "string", default: "42" },
  },
});

const started = Date.now();
let lastPercent = -1;
await buildTinyModel({
  outPath: values.out,
  arch: values.arch as TinyArch,
  preset: values.preset as TinyPreset,
  seed: Number(values.seed),
  onProgress: (done, total) => {
    const percent = Math.floor((done / total) * 100);
    if (percent !== lastPercent) {
      lastPercent = percent;
      process.stdout.write(`\rwriting tensors: ${done}/${total} (${percent}%)`);
    }
  },
});
process.stdout.write(`\nwrote ${values.out} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
