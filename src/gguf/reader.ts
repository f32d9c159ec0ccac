import { open, type FileHandle } from "node:fs/promises";
import { bf16ToFloat, halfToFloat } from "./half.js";
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GgmlType,
  GgufValueType,
  alignUp,
  ggmlTypeName,
  tensorByteLength,
  type GgufFile,
  type GgufTensorInfo,
  type GgufValue,
} from "./types.js";

const CHUNK = 1 << 20;

/** Sequential little-endian reader over a file handle that pulls 1 MiB at a time (headers with big vocabularies are megabytes). */
class SequentialReader {
  private buf = Buffer.alloc(0);
  private pos = 0;
  private fileOffset = 0;
  private readonly decoder = new TextDecoder("utf-8");

  constructor(private readonly fh: FileHandle, private readonly path: string) {}

  get offset(): number {
    return this.fileOffset - (this.buf.length - this.pos);
  }

  private async ensure(n: number): Promise<void> {
    if (this.buf.length - this.pos >= n) return;
    const rest = this.buf.subarray(this.pos);
    const want = Math.max(CHUNK, n - rest.length);
    const chunk = Buffer.alloc(want);
    const { bytesRead } = await this.fh.read(chunk, 0, want, this.fileOffset);
    this.fileOffset += bytesRead;
    this.buf = Buffer.concat([rest, chunk.subarray(0, bytesRead)]);
    this.pos = 0;
    if (this.buf.length < n) throw new Error(`${this.path}: unexpected end of GGUF file at byte ${this.offset}`);
  }

  async u8(): Promise<number> { await this.ensure(1); return this.buf.readUInt8(this.pos++); }
  async i8(): Promise<number> { await this.ensure(1); return this.buf.readInt8(this.pos++); }
  async u16(): Promise<number> { await this.ensure(2); const v = this.buf.readUInt16LE(this.pos); this.pos += 2; return v; }
  async i16(): Promise<number> { await this.ensure(2); const v = this.buf.readInt16LE(this.pos); this.pos += 2; return v; }
  async u32(): Promise<number> { await this.ensure(4); const v = this.buf.readUInt32LE(this.pos); this.pos += 4; return v; }
  async i32(): Promise<number> { await this.ensure(4); const v = this.buf.readInt32LE(this.pos); this.pos += 4; return v; }
  async f32(): Promise<number> { await this.ensure(4); const v = this.buf.readFloatLE(this.pos); this.pos += 4; return v; }
  async f64(): Promise<number> { await this.ensure(8); const v = this.buf.readDoubleLE(this.pos); this.pos += 8; return v; }
  async u64(): Promise<bigint> { await this.ensure(8); const v = this.buf.readBigUInt64LE(this.pos); this.pos += 8; return v; }
  async i64(): Promise<bigint> { await this.ensure(8); const v = this.buf.readBigInt64LE(this.pos); this.pos += 8; return v; }

  /** A uint64 that must fit a JS number (counts, lengths, offsets). */
  async count(): Promise<number> {
    const v = await this.u64();
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${this.path}: GGUF count ${v} is too large`);
    return Number(v);
  }

  async string(): Promise<string> {
    const len = await this.count();
    await this.ensure(len);
    const s = this.decoder.decode(this.buf.subarray(this.pos, this.pos + len));
    this.pos += len;
    return s;
  }
}

async function readValue(r: SequentialReader, type: number): Promise<GgufValue> {
  switch (type) {
    case GgufValueType.UINT8: return r.u8();
    case GgufValueType.INT8: return r.i8();
    case GgufValueType.UINT16: return r.u16();
    case GgufValueType.INT16: return r.i16();
    case GgufValueType.UINT32: return r.u32();
    case GgufValueType.INT32: return r.i32();
    case GgufValueType.FLOAT32: return r.f32();
    case GgufValueType.FLOAT64: return r.f64();
    case GgufValueType.BOOL: return (await r.u8()) !== 0;
    case GgufValueType.STRING: return r.string();
    case GgufValueType.UINT64: return r.u64();
    case GgufValueType.INT64: return r.i64();
    case GgufValueType.ARRAY: {
      const itemType = await r.u32();
      const n = await r.count();
      const items: GgufValue[] = new Array(n);
      for (let i = 0; i < n; i++) items[i] = await readValue(r, itemType);
      return items;
    }
    default:
      throw new Error(`unknown GGUF metadata value type ${type}`);
  }
}

/** Reads the metadata and tensor table of a GGUF (v2 or v3) file, without tensor data. */
export async function readGgufHeader(path: string): Promise<GgufFile> {
  const fh = await open(path, "r");
  try {
    const size = (await fh.stat()).size;
    const r = new SequentialReader(fh, path);
    const magic = await r.u32();
    if (magic !== GGUF_MAGIC) throw new Error(`${path} is not a GGUF file (bad magic)`);
    const version = await r.u32();
    if (version !== 2 && version !== 3) throw new Error(`${path}: unsupported GGUF version ${version}`);
    const tensorCount = await r.count();
    const kvCount = await r.count();
    const metadata: Record<string, GgufValue> = {};
    for (let i = 0; i < kvCount; i++) {
      const key = await r.string();
      const type = await r.u32();
      metadata[key] = await readValue(r, type);
    }
    const rawTensors: { name: string; dims: number[]; type: number; rel: number }[] = [];
    for (let i = 0; i < tensorCount; i++) {
      const name = await r.string();
      const nDims = await r.u32();
      const dims: number[] = [];
      for (let d = 0; d < nDims; d++) dims.push(await r.count());
      const type = await r.u32();
      const rel = await r.count();
      rawTensors.push({ name, dims, type, rel });
    }
    const alignValue = metadata["general.alignment"];
    const alignment =
      (typeof alignValue === "number" || typeof alignValue === "bigint") && Number(alignValue) > 0
        ? Number(alignValue)
        : GGUF_DEFAULT_ALIGNMENT;
    const dataStart = alignUp(r.offset, alignment);
    // Unknown (newer) types get the span up to the next tensor so callers can still skip or copy them.
    const sortedStarts = rawTensors.map((t) => t.rel).sort((a, b) => a - b);
    const tensors: GgufTensorInfo[] = rawTensors.map((t) => {
      let byteLength = tensorByteLength(t.type as GgmlType, t.dims);
      if (byteLength === undefined) {
        const next = sortedStarts.find((s) => s > t.rel);
        byteLength = (next === undefined ? size - dataStart : next) - t.rel;
      }
      return { name: t.name, dims: t.dims, type: t.type as GgmlType, offset: dataStart + t.rel, byteLength };
    });
    for (const t of tensors) {
      if (t.offset + t.byteLength > size) throw new Error(`${path}: tensor ${t.name} extends past the end of the file`);
    }
    return { version, metadata, tensors, alignment };
  } finally {
    await fh.close();
  }
}

/** Reads one tensor's raw bytes. */
export async function readTensorBytes(path: string, info: GgufTensorInfo): Promise<Buffer> {
  const fh = await open(path, "r");
  try {
    const buf = Buffer.alloc(info.byteLength);
    const { bytesRead } = await fh.read(buf, 0, info.byteLength, info.offset);
    if (bytesRead !== info.byteLength) throw new Error(`${path}: tensor ${info.name} is truncated`);
    return buf;
  } finally {
    await fh.close();
  }
}

/** Decodes raw tensor bytes of a float or Q8_0 type to float32. */
export function decodeTensor(bytes: Buffer, info: Pick<GgufTensorInfo, "name" | "type" | "dims">): Float32Array {
  const n = info.dims.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  switch (info.type) {
    case GgmlType.F32:
      // GGUF is little-endian, as are the hosts llama.cpp runs on.
      out.set(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + n * 4)));
      return out;
    case GgmlType.F16:
      for (let i = 0; i < n; i++) out[i] = halfToFloat(bytes.readUInt16LE(i * 2));
      return out;
    case GgmlType.BF16:
      for (let i = 0; i < n; i++) out[i] = bf16ToFloat(bytes.readUInt16LE(i * 2));
      return out;
    case GgmlType.Q8_0: {
      // Block of 32: f16 scale then 32 int8 quants.
      for (let b = 0; b < n / 32; b++) {
        const base = b * 34;
        const d = halfToFloat(bytes.readUInt16LE(base));
        for (let j = 0; j < 32; j++) out[b * 32 + j] = d * bytes.readInt8(base + 2 + j);
      }
      return out;
    }
    default:
      throw unreadable(info);
  }
}

const FLOAT_READABLE: ReadonlySet<GgmlType> = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]);

function unreadable(info: Pick<GgufTensorInfo, "name" | "type">): Error {
  return new Error(`tensor ${info.name} has type ${ggmlTypeName(info.type)}, which cannot be read as float32 (supported: F32, F16, BF16, Q8_0)`);
}

/** Reads a tensor as float32, dequantising F16, BF16 and Q8_0; other types are refused. */
export async function readTensorAsFloat32(path: string, info: GgufTensorInfo): Promise<Float32Array> {
  if (!FLOAT_READABLE.has(info.type)) throw unreadable(info);
  return decodeTensor(await readTensorBytes(path, info), info);
}
