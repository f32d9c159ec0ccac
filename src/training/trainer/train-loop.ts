import type { tf } from "./backend.js";
import type { TokenizedSequence } from "./chat-tokens.js";
import { learningRateAt } from "./optimizer.js";
import { closeSession, openSession, saveAdapter, type TrainingSession } from "./session.js";
import type { CommonConfig } from "./train-config.js";
import { accumulateGradients, applyGradients, throwIfAborted, type OnStep, type StepMetrics } from "./train-step.js";

/** What a finished job reports. */
export interface TrainResult {
  adapterPath: string;
  steps: number;
  /** Metrics of the last step (undefined when nothing was trainable). */
  finalMetrics?: StepMetrics;
  numSequences: number;
  droppedSequences: number;
  truncatedSequences: number;
  /** Configuration keys accepted but without effect on this trainer. */
  ignoredConfigKeys: string[];
}

export interface LoopJob {
  baseModelPath: string;
  adapterPath?: string;
  outputPath: string;
  signal?: AbortSignal;
}

/** What one step of a particular loss contributes: a loss per sequence, and metrics of its own. */
export interface StepLoss {
  parts: (() => tf.Scalar)[];
  metrics?: () => Record<string, number>;
}

export type StepLossFactory<S> = (session: TrainingSession, batch: S[], step: number, trainableTokens: number) => StepLoss;

function countTrainable(seq: TokenizedSequence): number {
  let n = 0;
  for (let i = 1; i < seq.trainable.length; i++) n += seq.trainable[i];
  return n;
}

/**
 * The optimisation SFT and RL share: open a session on the base model (and the previous adapter), run the planned
 * steps with gradient accumulation, clipping and the learning-rate schedule, report each step, and write the adapter.
 */
export async function runTrainingLoop<S extends TokenizedSequence>(
  job: LoopJob,
  config: CommonConfig,
  plan: S[][],
  lossOf: StepLossFactory<S>,
  onStep: OnStep,
  summary: Omit<TrainResult, "adapterPath" | "steps" | "finalMetrics">,
): Promise<TrainResult> {
  const session = await openSession({
    baseModelPath: job.baseModelPath,
    adapterPath: job.adapterPath,
    lora: config.lora,
    weightDecay: config.weightDecay,
    seed: config.seed,
  });
  try {
    let finalMetrics: StepMetrics | undefined;
    for (let step = 0; step < plan.length; step++) {
      throwIfAborted(job.signal);
      const started = performance.now();
      const batch = plan[step];
      const trainable = batch.reduce((n, s) => n + countTrainable(s), 0);
      const tokens = batch.reduce((n, s) => n + s.tokens.length, 0);
      const { parts, metrics } = lossOf(session, batch, step, trainable);
      const { grads, loss } = await accumulateGradients(session.vars, parts, job.signal);
      const learningRate = learningRateAt(step, plan.length, config);
      const gradNorm = applyGradients(session.optimizer, grads, learningRate, config.maxGradNorm);
      const seconds = (performance.now() - started) / 1000;
      finalMetrics = {
        step: step + 1,
        loss,
        grad_norm: gradNorm,
        learning_rate: learningRate,
        num_sequences: batch.length,
        num_tokens: tokens,
        num_trainable_tokens: trainable,
        tokens_per_second: tokens / seconds,
        ...metrics?.(),
      };
      await onStep(finalMetrics);
    }
    throwIfAborted(job.signal);
    await saveAdapter(session, job.outputPath);
    return { adapterPath: job.outputPath, steps: plan.length, finalMetrics, ...summary };
  } finally {
    closeSession(session);
  }
}
