import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readGgufHeader, readTensorAsFloat32 } from "../src/gguf/reader.js";
import { GgmlType, tensorByteLength } from "../src/gguf/types.js";
import { writeGguf, type GgufKv } from "../src/gguf/writer.js";
import { floatToHalf, halfToFloat } from "../src/gguf/half.js";
import { open } from "node:fs/promises";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "gguf-test-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function ramp(n: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.sin(i * 0.37) * scale;
  return a;
}

describe("GGUF writer and reader", () => {
  const kvs: GgufKv[] = [
    { key: "general.architecture", type: "string", value: "llama" },
    { key: "general.name", type: "string", value: "naïve ✓ unicode" },
    { key: "u8", type: "uint8", value: 200 },
    { key: "i8", type: "int8", value: -100 },
    { key: "u16", type: "uint16", value: 60000 },
    { key: "i16", type: "int16", value: -30000 },
    { key: "u32", type: "uint32", value: 4_000_000_000 },
    { key: "i32", type: "int32", value: -2_000_000_000 },
    { key: "u64", type: "uint64", value: 2n ** 63n + 5n },
    { key: "i64", type: "int64", value: -(2n ** 62n) },
    { key: "f32", type: "float32", value: 0.5 },
    { key: "f64", type: "float64", value: Math.PI },
    { key: "flag", type: "bool", value: true },
    { key: "words", type: "array", itemType: "string", value: ["a", "bb", "<|im_end|>"] },
    { key: "ints", type: "array", itemType: "int32", value: [1, -2, 3] },
  ];

  it("round-trips metadata and every writable tensor type", async () => {
    const path = join(dir, "all.gguf");
    const f32 = ramp(64 * 3);
    const f16 = ramp(64 * 2, 3);
    const bf16 = ramp(96, 100);
    const q8 = ramp(32 * 4, 2);
    await writeGguf(path, kvs, [
      { name: "a.f32", dims: [64, 3], type: GgmlType.F32, data: f32 },
      { name: "b.f16", dims: [64, 2], type: GgmlType.F16, data: f16 },
      { name: "c.bf16", dims: [96], type: GgmlType.BF16, data: () => bf16 },
      { name: "d.q8_0", dims: [64, 2], type: GgmlType.Q8_0, data: q8 },
    ]);
    const file = await readGgufHeader(path);
    expect(file.version).toBe(3);
    expect(file.alignment).toBe(32);
    for (const kv of kvs) expect(file.metadata[kv.key]).toEqual(kv.value);
    expect(file.metadata.f64).toBe(Math.PI);
    expect(file.tensors.map((t) => t.name)).toEqual(["a.f32", "b.f16", "c.bf16", "d.q8_0"]);
    for (const t of file.tensors) expect(t.offset % 32).toBe(0);
    expect(file.tensors[0].dims).toEqual([64, 3]);
    expect(file.tensors[3].byteLength).toBe(4 * 34);

    expect(Array.from(await readTensorAsFloat32(path, file.tensors[0]))).toEqual(Array.from(f32));
    const back16 = await readTensorAsFloat32(path, file.tensors[1]);
    back16.forEach((v, i) => expect(Math.abs(v - f16[i])).toBeLessThanOrEqual(Math.abs(f16[i]) * 2 ** -11 + 1e-7));
    const backBf = await readTensorAsFloat32(path, file.tensors[2]);
    backBf.forEach((v, i) => expect(Math.abs(v - bf16[i])).toBeLessThanOrEqual(Math.abs(bf16[i]) * 2 ** -8));
    const backQ8 = await readTensorAsFloat32(path, file.tensors[3]);
    for (let b = 0; b < 4; b++) {
      const block = q8.subarray(b * 32, b * 32 + 32);
      const step = Math.max(...block.map(Math.abs)) / 127;
      for (let j = 0; j < 32; j++) expect(Math.abs(backQ8[b * 32 + j] - block[j])).toBeLessThanOrEqual(step * 0.51 + 1e-3);
    }
    const size = (await stat(path)).size;
    const last = file.tensors[3];
    expect(size).toBe(last.offset + Math.ceil(last.byteLength / 32) * 32);
  });

  it("writes the GGUF v3 header layout byte for byte", async () => {
    const path = join(dir, "layout.gguf");
    await writeGguf(path, [{ key: "k", type: "uint32", value: 7 }], [
      { name: "t", dims: [2], type: GgmlType.F32, data: new Float32Array([1, 2]) },
    ]);
    const fh = await open(path, "r");
    const buf = Buffer.alloc(128);
    await fh.read(buf, 0, 128, 0);
    await fh.close();
    expect(buf.subarray(0, 4).toString("latin1")).toBe("GGUF");
    expect(buf.readUInt32LE(4)).toBe(3);
    expect(buf.readBigUInt64LE(8)).toBe(1n); // tensor count
    expect(buf.readBigUInt64LE(16)).toBe(1n); // kv count
    expect(buf.readBigUInt64LE(24)).toBe(1n); // key length
    expect(buf.toString("latin1", 32, 33)).toBe("k");
    expect(buf.readUInt32LE(33)).toBe(4); // UINT32
    expect(buf.readUInt32LE(37)).toBe(7);
    expect(buf.readBigUInt64LE(41)).toBe(1n); // tensor name length
    expect(buf.readUInt32LE(50)).toBe(1); // n_dims
    expect(buf.readBigUInt64LE(54)).toBe(2n);
    expect(buf.readUInt32LE(62)).toBe(GgmlType.F32);
    expect(buf.readBigUInt64LE(66)).toBe(0n); // offset relative to the data section
    expect(buf.readFloatLE(96)).toBe(1); // 74 bytes of header padded to 96
    expect(buf.readFloatLE(100)).toBe(2);
  });

  it("honours general.alignment", async () => {
    const path = join(dir, "align.gguf");
    await writeGguf(path, [{ key: "general.alignment", type: "uint32", value: 64 }], [
      { name: "x", dims: [3], type: GgmlType.F32, data: new Float32Array([1, 2, 3]) },
      { name: "y", dims: [3], type: GgmlType.F32, data: new Float32Array([4, 5, 6]) },
    ]);
    const file = await readGgufHeader(path);
    expect(file.alignment).toBe(64);
    expect(file.tensors[1].offset - file.tensors[0].offset).toBe(64);
    expect(Array.from(await readTensorAsFloat32(path, file.tensors[1]))).toEqual([4, 5, 6]);
  });

  it("refuses to dequantise an unsupported type, naming tensor and type", async () => {
    const path = join(dir, "q4.gguf");
    await writeGguf(path, [], [{ name: "w", dims: [32], type: GgmlType.F32, data: ramp(32) }]);
    const file = await readGgufHeader(path);
    const fake = { ...file.tensors[0], type: GgmlType.Q4_K, byteLength: 0 };
    await expect(readTensorAsFloat32(path, fake)).rejects.toThrow(/tensor w has type Q4_K/);
    expect(tensorByteLength(GgmlType.Q4_K, [256, 2])).toBe(288);
  });

  it("rejects mismatched data and non-GGUF files", async () => {
    await expect(
      writeGguf(join(dir, "bad.gguf"), [], [{ name: "w", dims: [4], type: GgmlType.F32, data: new Float32Array(3) }]),
    ).rejects.toThrow(/3 values for dims \[4\]/);
    await expect(readGgufHeader(join(dir, "bad.gguf"))).rejects.toThrow();
  });

  it("converts half floats exactly at the edges", () => {
    for (const v of [0, 1, -2, 65504, 6.103515625e-5, 5.960464477539063e-8, 0.333251953125]) {
      expect(halfToFloat(floatToHalf(v))).toBe(v);
    }
    expect(halfToFloat(floatToHalf(1e6))).toBe(Infinity);
    expect(floatToHalf(1 + 2 ** -11)).toBe(0x3c00); // tie rounds to even
  });
});
