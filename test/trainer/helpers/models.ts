import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { GgmlType } from "../../../src/gguf/types.js";
import { writeGguf, type GgufKv, type GgufTensorToWrite, type GgufWritableType } from "../../../src/gguf/writer.js";
import { buildTinyModel, tinyModelContents, type TinyArch } from "../../../src/inference/tiny-model.js";

export async function tempDir(prefix: string): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export async function tinyModel(dir: string, arch: TinyArch = "llama", seed = 42): Promise<string> {
  const out = path.join(dir, `tiny-${arch}-${seed}.gguf`);
  await buildTinyModel({ outPath: out, arch, preset: "tiny", seed });
  return out;
}

/** The tiny model's layout with its matrices stored as another type, and optionally a tied output matrix. */
export async function tinyModelVariant(
  dir: string,
  arch: TinyArch,
  seed: number,
  matrixType: GgufWritableType,
  tied: boolean,
): Promise<string> {
  const { kvs, tensors } = tinyModelContents({ arch, preset: "tiny", seed });
  const out = path.join(dir, `variant-${arch}-${seed}-${matrixType}-${tied ? "tied" : "sep"}.gguf`);
  const kept = tensors
    .filter((t) => !(tied && t.name === "output.weight"))
    .map((t) => (t.dims.length === 2 ? { ...t, type: matrixType } : t));
  await writeGguf(out, kvs, kept);
  return out;
}

/**
 * Writes a model and then relabels one tensor's type in its header, giving a file whose header declares a type
 * the writer cannot produce (the data is not valid for it; only the header is meant to be read).
 */
export async function writeModelWithRelabelledTensor(
  out: string,
  kvs: GgufKv[],
  tensors: GgufTensorToWrite[],
  tensorName: string,
  type: GgmlType,
): Promise<void> {
  await writeGguf(out, kvs, tensors);
  const bytes = await readFile(out);
  const nameBytes = Buffer.from(tensorName);
  const info = tensors.find((t) => t.name === tensorName);
  if (!info) throw new Error(`no tensor ${tensorName}`);
  // Tensor info: u64 name length, name, u32 n_dims, u64 dims..., u32 type.
  const at = bytes.indexOf(Buffer.concat([Buffer.from(new BigUint64Array([BigInt(nameBytes.length)]).buffer), nameBytes]));
  if (at < 0) throw new Error(`tensor ${tensorName} not found in the header`);
  bytes.writeUInt32LE(type, at + 8 + nameBytes.length + 4 + 8 * info.dims.length);
  await writeFile(out, bytes);
}
