/** ggml tensor element types, numbered as in ggml.h / gguf-py's GGMLQuantizationType. */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
}

const QK_K = 256;

/** [elements per block, bytes per block] for each type (gguf-py GGML_QUANT_SIZES). */
export const GGML_BLOCK_LAYOUT: Readonly<Record<GgmlType, readonly [number, number]>> = {
  [GgmlType.F32]: [1, 4],
  [GgmlType.F16]: [1, 2],
  [GgmlType.Q4_0]: [32, 2 + 16],
  [GgmlType.Q4_1]: [32, 2 + 2 + 16],
  [GgmlType.Q5_0]: [32, 2 + 4 + 16],
  [GgmlType.Q5_1]: [32, 2 + 2 + 4 + 16],
  [GgmlType.Q8_0]: [32, 2 + 32],
  [GgmlType.Q8_1]: [32, 4 + 4 + 32],
  [GgmlType.Q2_K]: [QK_K, 2 + 2 + QK_K / 16 + QK_K / 4],
  [GgmlType.Q3_K]: [QK_K, 2 + QK_K / 4 + QK_K / 8 + 12],
  [GgmlType.Q4_K]: [QK_K, 2 + 2 + QK_K / 2 + 12],
  [GgmlType.Q5_K]: [QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12],
  [GgmlType.Q6_K]: [QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16],
  [GgmlType.Q8_K]: [QK_K, 4 + QK_K + QK_K / 8],
  [GgmlType.IQ2_XXS]: [QK_K, 2 + QK_K / 4],
  [GgmlType.IQ2_XS]: [QK_K, 2 + QK_K / 4 + QK_K / 32],
  [GgmlType.IQ3_XXS]: [QK_K, 2 + QK_K / 4 + QK_K / 8],
  [GgmlType.IQ1_S]: [QK_K, 2 + QK_K / 8 + QK_K / 16],
  [GgmlType.IQ4_NL]: [32, 2 + 16],
  [GgmlType.IQ3_S]: [QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4],
  [GgmlType.IQ2_S]: [QK_K, 2 + QK_K / 4 + QK_K / 16],
  [GgmlType.IQ4_XS]: [QK_K, 2 + 2 + QK_K / 2 + QK_K / 64],
  [GgmlType.I8]: [1, 1],
  [GgmlType.I16]: [1, 2],
  [GgmlType.I32]: [1, 4],
  [GgmlType.I64]: [1, 8],
  [GgmlType.F64]: [1, 8],
  [GgmlType.IQ1_M]: [QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32],
  [GgmlType.BF16]: [1, 2],
  [GgmlType.TQ1_0]: [QK_K, 2 + 4 * 13],
  [GgmlType.TQ2_0]: [QK_K, 2 + 64],
  [GgmlType.MXFP4]: [32, 1 + 16],
};

/** GGUF metadata value type codes (gguf.md). */
export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

export type GgufValue = number | bigint | string | boolean | GgufValue[];

export interface GgufTensorInfo {
  name: string;
  /** ggml order: ne[0] (the contiguous dimension) first. */
  dims: number[];
  type: GgmlType;
  /** Absolute byte offset of the tensor's data in the file. */
  offset: number;
  byteLength: number;
}

export interface GgufFile {
  version: number;
  metadata: Record<string, GgufValue>;
  tensors: GgufTensorInfo[];
  alignment: number;
}

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as little-endian uint32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

export function ggmlTypeName(type: number): string {
  return GgmlType[type] ?? `unknown(${type})`;
}

/** Bytes taken by a tensor of this type and shape, or undefined for a type whose layout is unknown. */
export function tensorByteLength(type: GgmlType, dims: readonly number[]): number | undefined {
  const layout = GGML_BLOCK_LAYOUT[type];
  if (!layout) return undefined;
  const [blockSize, typeSize] = layout;
  const elements = dims.reduce((a, b) => a * b, 1);
  if ((dims[0] ?? 1) % blockSize !== 0) {
    throw new Error(`tensor row of ${dims[0]} elements is not a multiple of the ${ggmlTypeName(type)} block size ${blockSize}`);
  }
  return (elements / blockSize) * typeSize;
}

export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}
