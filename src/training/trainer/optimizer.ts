import { tf } from "./backend.js";

export interface AdamWConfig {
  beta1: number;
  beta2: number;
  epsilon: number;
  weightDecay: number;
}

export const DEFAULT_ADAMW: AdamWConfig = { beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weightDecay: 0 };

/** AdamW with decoupled weight decay (Loshchilov & Hutter), over a fixed list of variables. */
export class AdamW {
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];
  private t = 0;

  constructor(
    private readonly vars: tf.Variable[],
    private readonly config: AdamWConfig = DEFAULT_ADAMW,
  ) {
    this.m = vars.map((x) => tf.variable(tf.zerosLike(x), false));
    this.v = vars.map((x) => tf.variable(tf.zerosLike(x), false));
  }

  /** Applies one update with gradients aligned to the variable list. */
  step(grads: tf.Tensor[], learningRate: number): void {
    this.t += 1;
    const { beta1, beta2, epsilon, weightDecay } = this.config;
    const c1 = 1 - Math.pow(beta1, this.t);
    const c2 = 1 - Math.pow(beta2, this.t);
    tf.tidy(() => {
      this.vars.forEach((x, i) => {
        const g = grads[i];
        const m = this.m[i].mul(beta1).add(g.mul(1 - beta1));
        const v = this.v[i].mul(beta2).add(g.square().mul(1 - beta2));
        this.m[i].assign(m);
        this.v[i].assign(v);
        const update = m.div(c1).div(v.div(c2).sqrt().add(epsilon));
        const decayed = weightDecay > 0 ? x.mul(1 - learningRate * weightDecay) : x;
        x.assign(decayed.sub(update.mul(learningRate)));
      });
    });
  }

  dispose(): void {
    for (const t of [...this.m, ...this.v]) t.dispose();
  }
}

/** Global L2 norm of the gradients. */
export function globalNorm(grads: tf.Tensor[]): number {
  return Math.sqrt(tf.tidy(() => tf.addN(grads.map((g) => g.square().sum())).dataSync()[0]));
}

/** Scales gradients in place of a new list so their global norm is at most maxNorm (0 disables clipping). */
export function clipByGlobalNorm(grads: tf.Tensor[], norm: number, maxNorm: number): tf.Tensor[] {
  if (!(maxNorm > 0) || norm <= maxNorm) return grads;
  const scale = maxNorm / (norm + 1e-6);
  return grads.map((g) => g.mul(scale));
}

export interface ScheduleConfig {
  /** One rate, or one per optimizer step (the last repeats). */
  learningRate: number | number[];
  warmupSteps: number;
  schedule: "constant" | "cosine";
  /** Floor of the cosine schedule, as a fraction of the peak rate. */
  minLearningRateRatio: number;
}

/** Learning rate at a 0-based step of totalSteps: optional linear warmup, then constant or cosine decay. */
export function learningRateAt(step: number, totalSteps: number, config: ScheduleConfig): number {
  if (Array.isArray(config.learningRate)) {
    if (config.learningRate.length === 0) throw new Error("learning_rate list is empty");
    return config.learningRate[Math.min(step, config.learningRate.length - 1)];
  }
  const peak = config.learningRate;
  if (step < config.warmupSteps) return (peak * (step + 1)) / (config.warmupSteps + 1);
  if (config.schedule === "constant") return peak;
  const span = Math.max(1, totalSteps - config.warmupSteps - 1);
  const progress = Math.min(1, (step - config.warmupSteps) / span);
  const floor = peak * config.minLearningRateRatio;
  return floor + (peak - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
}
