import { tf } from "./backend.js";
import type { ModelConfig } from "./model-config.js";

export interface RopeTables {
  /** [T, 1, ropeDims], laid out to match the rotation mode's pairing. */
  cos: tf.Tensor3D;
  sin: tf.Tensor3D;
  /** [ropeDims, ropeDims] signed permutation taking x to its rotated partner (−x_b at a, x_a at b). */
  rotation: tf.Tensor2D;
}

/**
 * Cos/sin tables for positions 0..n-1. The angles are accumulated in float32 the way ggml's rope kernel does
 * (theta starts at the position and is multiplied by base^(-2/n_dims) per pair), so positions agree bit-closely.
 */
export function ropeTables(config: ModelConfig, nPos: number, freqFactors?: Float32Array): RopeTables {
  const half = config.ropeDims / 2;
  const scale = Math.fround(Math.pow(config.ropeBase, -2 / config.ropeDims));
  const rd = config.ropeDims;
  const rotation = new Float32Array(rd * rd);
  const cos = new Float32Array(nPos * config.ropeDims);
  const sin = new Float32Array(nPos * config.ropeDims);
  for (let p = 0; p < nPos; p++) {
    let theta = Math.fround(p);
    for (let i = 0; i < half; i++) {
      const angle = freqFactors ? Math.fround(theta / freqFactors[i]) : theta;
      const c = Math.fround(Math.cos(angle));
      const s = Math.fround(Math.sin(angle));
      const row = p * config.ropeDims;
      // norm mode rotates adjacent pairs; neox pairs dimension i with i + n/2.
      const [a, b] = config.ropeMode === "norm" ? [2 * i, 2 * i + 1] : [i, i + half];
      cos[row + a] = c;
      cos[row + b] = c;
      sin[row + a] = s;
      sin[row + b] = s;
      theta = Math.fround(theta * scale);
    }
  }
  for (let i = 0; i < half; i++) {
    const [a, b] = config.ropeMode === "norm" ? [2 * i, 2 * i + 1] : [i, i + half];
    rotation[b * rd + a] = -1;
    rotation[a * rd + b] = 1;
  }
  return {
    rotation: tf.tensor2d(rotation, [rd, rd]),
    cos: tf.tensor3d(cos, [nPos, 1, config.ropeDims]),
    sin: tf.tensor3d(sin, [nPos, 1, config.ropeDims]),
  };
}

/** Rotates x [T, H, headDim]; dimensions past ropeDims pass through unchanged. */
export function applyRope(x: tf.Tensor3D, tables: RopeTables, config: ModelConfig): tf.Tensor3D {
  const [T, H, D] = x.shape;
  const rd = config.ropeDims;
  const rotated = rd === D ? x : x.slice([0, 0, 0], [T, H, rd]);
  // One small matmul pairs the dimensions, instead of split/concat (many tiny kernels on this backend).
  const turned = tf.matMul(rotated.reshape([T * H, rd]) as tf.Tensor2D, tables.rotation).reshape([T, H, rd]);
  const out = rotated.mul(tables.cos).add(turned.mul(tables.sin)) as tf.Tensor3D;
  return rd === D ? out : tf.concat([out, x.slice([0, 0, rd], [T, H, D - rd])], 2);
}
