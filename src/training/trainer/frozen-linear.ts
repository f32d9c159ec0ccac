import { tf } from "./backend.js";

/**
 * y = x·Wᵀ for a frozen weight W [out, in]. The WebAssembly backend multiplies untransposed operands several times
 * faster than with transposeB, so both layouts are kept: Wᵀ for the forward product and W for the input gradient.
 * The weight gets no gradient, which also saves computing one.
 */
export class FrozenLinear {
  readonly weight: tf.Tensor2D;
  private readonly transposed: tf.Tensor2D;
  private readonly op: (x: tf.Tensor2D) => tf.Tensor2D;

  constructor(weight: tf.Tensor2D) {
    this.weight = weight;
    this.transposed = tf.keep(weight.transpose());
    this.op = tf.customGrad((...inputs: (tf.Tensor | tf.GradSaveFunc)[]) => ({
      value: tf.matMul(inputs[0] as tf.Tensor2D, this.transposed),
      gradFunc: (dy: tf.Tensor2D) => tf.matMul(dy, this.weight),
    })) as (x: tf.Tensor2D) => tf.Tensor2D;
  }

  get shape(): [number, number] {
    return this.weight.shape;
  }

  apply(x: tf.Tensor2D): tf.Tensor2D {
    return this.op(x);
  }

  dispose(): void {
    this.weight.dispose();
    this.transposed.dispose();
  }
}
