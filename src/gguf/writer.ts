import { open } from "node:fs/promises";
import { floatToBf16, floatToHalf } from "./half.js";
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_VERSION,
  GgmlType,
  GgufValueType,
  alignUp,
  ggmlTypeName,
  tensorByteLength,
  type GgufValue,
} from "./types.js";

export type GgufWritableType = GgmlType.F32 | GgmlType.F16 | GgmlType.BF16 | GgmlType.Q8_0;

export interface GgufTensorToWrite {
  name: string;
  /** ggml order: ne[0] (the contiguous dimension) first. */
  dims: number[];
  type: GgufWritableType;
  /** Row-major data (ne[0] fastest); a function is called only when the tensor is written, so big models stream. */
  data: Float32Array | (() => Float32Array);
}

export type GgufScalarTypeName =
  | "uint8" | "int8" | "uint16" | "int16" | "uint32" | "int32" | "uint64" | "int64" | "float32" | "float64" | "bool" | "string";

export interface GgufKv {
  key: string;
  type: GgufScalarTypeName | "array";
  /** Element type of an array value. */
  itemType?: GgufScalarTypeName;
  value: GgufValue;
}

const VALUE_TYPE: Record<GgufScalarTypeName | "array", GgufValueType> = {
  uint8: GgufValueType.UINT8,
  int8: GgufValueType.INT8,
  uint16: GgufValueType.UINT16,
  int16: GgufValueType.INT16,
  uint32: GgufValueType.UINT32,
  int32: GgufValueType.INT32,
  uint64: GgufValueType.UINT64,
  int64: GgufValueType.INT64,
  float32: GgufValueType.FLOAT32,
  float64: GgufValueType.FLOAT64,
  bool: GgufValueType.BOOL,
  string: GgufValueType.STRING,
  array: GgufValueType.ARRAY,
};

/** Growable little-endian byte builder for the header. */
class ByteSink {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u8(v: number): void { this.reserve(1); this.buf.writeUInt8(v, this.length); this.length += 1; }
  i8(v: number): void { this.reserve(1); this.buf.writeInt8(v, this.length); this.length += 1; }
  u16(v: number): void { this.reserve(2); this.buf.writeUInt16LE(v, this.length); this.length += 2; }
  i16(v: number): void { this.reserve(2); this.buf.writeInt16LE(v, this.length); this.length += 2; }
  u32(v: number): void { this.reserve(4); this.buf.writeUInt32LE(v, this.length); this.length += 4; }
  i32(v: number): void { this.reserve(4); this.buf.writeInt32LE(v, this.length); this.length += 4; }
  f32(v: number): void { this.reserve(4); this.buf.writeFloatLE(v, this.length); this.length += 4; }
  f64(v: number): void { this.reserve(8); this.buf.writeDoubleLE(v, this.length); this.length += 8; }
  u64(v: number | bigint): void { this.reserve(8); this.buf.writeBigUInt64LE(BigInt(v), this.length); this.length += 8; }
  i64(v: number | bigint): void { this.reserve(8); this.buf.writeBigInt64LE(BigInt(v), this.length); this.length += 8; }
  string(s: string): void {
    const bytes = Buffer.from(s, "utf-8");
    this.u64(bytes.length);
    this.reserve(bytes.length);
    bytes.copy(this.buf, this.length);
    this.length += bytes.length;
  }
  pad(alignment: number): void {
    const target = alignUp(this.length, alignment);
    this.reserve(target - this.length);
    this.buf.fill(0, this.length, target);
    this.length = target;
  }
  bytes(): Buffer { return this.buf.subarray(0, this.length); }
}

function expectNumber(key: string, v: GgufValue): number {
  if (typeof v !== "number") throw new Error(`GGUF key ${key}: expected a number, got ${typeof v}`);
  return v;
}

function writeScalar(sink: ByteSink, key: string, type: GgufScalarTypeName, v: GgufValue): void {
  switch (type) {
    case "uint8": sink.u8(expectNumber(key, v)); return;
    case "int8": sink.i8(expectNumber(key, v)); return;
    case "uint16": sink.u16(expectNumber(key, v)); return;
    case "int16": sink.i16(expectNumber(key, v)); return;
    case "uint32": sink.u32(expectNumber(key, v)); return;
    case "int32": sink.i32(expectNumber(key, v)); return;
    case "float32": sink.f32(expectNumber(key, v)); return;
    case "float64": sink.f64(expectNumber(key, v)); return;
    case "uint64":
    case "int64":
      if (typeof v !== "number" && typeof v !== "bigint") throw new Error(`GGUF key ${key}: expected an integer`);
      if (type === "uint64") sink.u64(v); else sink.i64(v);
      return;
    case "bool":
      if (typeof v !== "boolean") throw new Error(`GGUF key ${key}: expected a boolean`);
      sink.u8(v ? 1 : 0);
      return;
    case "string":
      if (typeof v !== "string") throw new Error(`GGUF key ${key}: expected a string`);
      sink.string(v);
      return;
  }
}

function writeKv(sink: ByteSink, kv: GgufKv): void {
  sink.string(kv.key);
  sink.u32(VALUE_TYPE[kv.type]);
  if (kv.type !== "array") {
    writeScalar(sink, kv.key, kv.type, kv.value);
    return;
  }
  if (!Array.isArray(kv.value)) throw new Error(`GGUF key ${kv.key}: expected an array`);
  if (!kv.itemType) throw new Error(`GGUF key ${kv.key}: an array needs itemType`);
  sink.u32(VALUE_TYPE[kv.itemType]);
  sink.u64(kv.value.length);
  for (const item of kv.value) writeScalar(sink, kv.key, kv.itemType, item);
}

/** Encodes float32 data in a writable GGUF tensor type. */
export function encodeTensor(data: Float32Array, type: GgufWritableType, name = "tensor"): Buffer {
  const n = data.length;
  switch (type) {
    case GgmlType.F32:
      return Buffer.from(data.buffer.slice(data.byteOffset, data.byteOffset + n * 4));
    case GgmlType.F16:
    case GgmlType.BF16: {
      const out = Buffer.alloc(n * 2);
      const conv = type === GgmlType.F16 ? floatToHalf : floatToBf16;
      for (let i = 0; i < n; i++) out.writeUInt16LE(conv(data[i]), i * 2);
      return out;
    }
    case GgmlType.Q8_0: {
      if (n % 32 !== 0) throw new Error(`tensor ${name}: Q8_0 needs a multiple of 32 elements`);
      const out = Buffer.alloc((n / 32) * 34);
      for (let b = 0; b < n / 32; b++) {
        let amax = 0;
        for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(data[b * 32 + j]));
        // Same recipe as ggml's reference quantiser: d = amax/127, q = roundf(x/d) away from zero.
        const d = Math.fround(amax / 127);
        const id = d ? Math.fround(1 / d) : 0;
        out.writeUInt16LE(floatToHalf(d), b * 34);
        for (let j = 0; j < 32; j++) {
          const x = Math.fround(data[b * 32 + j] * id);
          out.writeInt8(Math.sign(x) * Math.round(Math.abs(x)), b * 34 + 2 + j);
        }
      }
      return out;
    }
    default:
      throw new Error(`tensor ${name}: cannot write type ${ggmlTypeName(type)}`);
  }
}

/**
 * Writes a GGUF v3 file: header (magic, version, uint64 counts, metadata, tensor infos), padding to the alignment
 * (`general.alignment` if given, else 32), then each tensor's data aligned. Tensor data is produced and written one
 * tensor at a time.
 */
export async function writeGguf(path: string, kvs: GgufKv[], tensors: GgufTensorToWrite[]): Promise<void> {
  const alignKv = kvs.find((kv) => kv.key === "general.alignment");
  const alignment = alignKv ? expectNumber(alignKv.key, alignKv.value) : GGUF_DEFAULT_ALIGNMENT;
  const names = new Set<string>();
  const sizes = tensors.map((t) => {
    if (names.has(t.name)) throw new Error(`duplicate tensor name ${t.name}`);
    names.add(t.name);
    if (![GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0].includes(t.type)) {
      throw new Error(`tensor ${t.name}: cannot write type ${ggmlTypeName(t.type)}`);
    }
    const size = tensorByteLength(t.type, t.dims);
    if (size === undefined) throw new Error(`tensor ${t.name}: unknown layout`);
    return size;
  });

  const header = new ByteSink();
  header.u32(GGUF_MAGIC);
  header.u32(GGUF_VERSION);
  header.u64(tensors.length);
  header.u64(kvs.length);
  for (const kv of kvs) writeKv(header, kv);
  let rel = 0;
  tensors.forEach((t, i) => {
    header.string(t.name);
    header.u32(t.dims.length);
    for (const d of t.dims) header.u64(d);
    header.u32(t.type);
    header.u64(rel);
    rel = alignUp(rel + sizes[i], alignment);
  });
  header.pad(alignment);

  const fh = await open(path, "w");
  try {
    let pos = 0;
    const write = async (b: Buffer): Promise<void> => {
      let done = 0;
      while (done < b.length) {
        const { bytesWritten } = await fh.write(b, done, b.length - done, pos);
        done += bytesWritten;
        pos += bytesWritten;
      }
    };
    await write(header.bytes());
    for (let i = 0; i < tensors.length; i++) {
      const t = tensors[i];
      const data = typeof t.data === "function" ? t.data() : t.data;
      const expected = t.dims.reduce((a, b) => a * b, 1);
      if (data.length !== expected) {
        throw new Error(`tensor ${t.name}: ${data.length} values for dims [${t.dims.join(", ")}] (${expected} expected)`);
      }
      const bytes = encodeTensor(data, t.type, t.name);
      await write(bytes);
      const padding = alignUp(bytes.length, alignment) - bytes.length;
      if (padding > 0) await write(Buffer.alloc(padding));
    }
  } finally {
    await fh.close();
  }
}
