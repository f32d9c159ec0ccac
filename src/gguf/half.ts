// IEEE half and bfloat16 conversions (Node 20 has no Float16Array).
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/** Round-to-nearest-even float32 -> IEEE half bits. */
export function floatToHalf(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half++; // may carry into the exponent, which is still correct
  return sign | half;
}

export function bf16ToFloat(b: number): number {
  u32[0] = (b & 0xffff) << 16;
  return f32[0];
}

/** Round-to-nearest-even float32 -> bfloat16 bits, as gguf-py does (NaN kept quiet). */
export function floatToBf16(value: number): number {
  f32[0] = value;
  const x = u32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 64) & 0xffff;
  return ((x + (0x7fff + ((x >>> 16) & 1))) >>> 16) & 0xffff;
}
