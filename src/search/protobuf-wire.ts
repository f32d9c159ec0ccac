/**
 * The few protobuf wire-format primitives OTLP needs. A hand-rolled reader keeps decoding a single pass over
 * the bytes with no reflection, and lets ids stay bytes and 64-bit times stay exact (bigint).
 */

export class WireError extends Error {}

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_FIXED32 = 5;

export class WireReader {
  pos: number;
  private readonly view: DataView;

  constructor(
    readonly buf: Uint8Array,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  done(): boolean {
    return this.pos >= this.end;
  }

  /** Reads a tag; returns [fieldNumber, wireType]. */
  tag(): [number, number] {
    const key = this.varint();
    const field = Math.floor(key / 8);
    if (field === 0) throw new WireError("field number 0");
    return [field, key & 7];
  }

  /** A varint as a JS number (exact up to 2^53, enough for lengths, enums, counts and bools). */
  varint(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError("truncated varint");
      const byte = this.buf[this.pos++];
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return result;
      scale *= 128;
    }
    throw new WireError("varint longer than 10 bytes");
  }

  /** A varint as an exact signed 64-bit integer (protobuf int64). */
  int64(): bigint {
    let result = 0n;
    let shift = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new WireError("truncated varint");
      const byte = this.buf[this.pos++];
      result |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return BigInt.asIntN(64, result);
      shift += 7n;
    }
    throw new WireError("varint longer than 10 bytes");
  }

  fixed64(): bigint {
    this.need(8);
    const value = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return value;
  }

  fixed32(): number {
    this.need(4);
    const value = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return value;
  }

  double(): number {
    this.need(8);
    const value = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return value;
  }

  /** A length-delimited field as a sub-reader over the same buffer. */
  sub(): WireReader {
    const length = this.varint();
    this.need(length);
    const reader = new WireReader(this.buf, this.pos, this.pos + length);
    this.pos += length;
    return reader;
  }

  bytes(): Uint8Array {
    const length = this.varint();
    this.need(length);
    const value = this.buf.subarray(this.pos, this.pos + length);
    this.pos += length;
    return value;
  }

  string(): string {
    return utf8.decode(this.bytes());
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_FIXED64:
        this.need(8);
        this.pos += 8;
        return;
      case WIRE_LEN:
        this.bytes();
        return;
      case WIRE_FIXED32:
        this.need(4);
        this.pos += 4;
        return;
      default:
        throw new WireError(`unsupported wire type ${wireType}`);
    }
  }

  private need(length: number): void {
    if (length < 0 || this.pos + length > this.end) throw new WireError("field runs past the end of its message");
  }
}

const utf8 = new TextDecoder("utf-8");
const utf8Encoder = new TextEncoder();

/** Builds a message field by field; nested messages are written into their own writer and embedded. */
export class WireWriter {
  private readonly chunks: number[] = [];

  varintField(field: number, value: bigint | number): this {
    this.key(field, WIRE_VARINT);
    this.varint(BigInt.asUintN(64, BigInt(value)));
    return this;
  }

  stringField(field: number, value: string): this {
    return this.bytesField(field, utf8Encoder.encode(value));
  }

  bytesField(field: number, value: Uint8Array): this {
    this.key(field, WIRE_LEN);
    this.varint(BigInt(value.length));
    for (const byte of value) this.chunks.push(byte);
    return this;
  }

  messageField(field: number, message: WireWriter): this {
    return this.bytesField(field, message.finish());
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.chunks);
  }

  private key(field: number, wireType: number): void {
    this.varint(BigInt(field * 8 + wireType));
  }

  private varint(value: bigint): void {
    let rest = value;
    while (rest >= 0x80n) {
      this.chunks.push(Number(rest & 0x7fn) | 0x80);
      rest >>= 7n;
    }
    this.chunks.push(Number(rest));
  }
}
