import { access } from "node:fs/promises";
import { join } from "node:path";
import { buildTinyModel, type TinyArch } from "../../src/inference/tiny-model.js";

const CACHE_DIR = join(process.cwd(), ".tmp", "test-models");

/** Path of the built-in tiny model for an architecture, built once into .tmp and shared by test files. */
export async function tinyModelPath(arch: TinyArch = "llama", seed = 42): Promise<string> {
  const path = join(CACHE_DIR, `tiny-${arch}-${seed}.gguf`);
  try {
    await access(path);
  } catch {
    // buildTinyModel renames into place, so concurrent test files never see a half-written model.
    await buildTinyModel({ outPath: path, arch, seed });
  }
  return path;
}
